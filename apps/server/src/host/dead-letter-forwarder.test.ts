import { type DataGroupPort, storedQueueName } from '@mq/data-service'
import {
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_SOURCE_HEADER,
  FORMAT_LEVEL_DEAD_LETTER_QUEUE,
  InvalidArgumentError,
  LimitExceededError,
  QueueNotFoundError,
} from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import {
  DEAD_LETTER_BATCH,
  DeadLetterForwarder,
  type DeadLetterForwarderHost,
  type ForwardedMessage,
} from './dead-letter-forwarder'
import { leaseAndNack, memoryGroup } from './memory-group'

const text = (s: string) => new TextEncoder().encode(s)
const bodyOf = (m: ForwardedMessage) => new TextDecoder().decode(m.body)
/** A forward's answer when the target stored every one of `messages`. */
const allStored = (messages: readonly ForwardedMessage[]) => messages.map(() => undefined)

/** A led group holding jobs#7/0 (max 1 delivery) with the bodies given dead-lettered. */
async function withDead(bodies: readonly string[]) {
  const g = await memoryGroup(3)
  const stored = storedQueueName('jobs', 7)
  await g.port.propose({ type: 'open', queue: stored, partition: 0, config: { maxDeliveries: 1 } })
  const apply = (command: Parameters<typeof g.port.propose>[0] extends infer C ? C : never) =>
    g.port.propose(command)
  await apply({
    type: 'apply',
    queue: stored,
    partition: 0,
    command: {
      type: 'enqueue',
      messages: bodies.map((b) => ({ body: text(b), weight: 3, headers: { app: b }, key: `k-${b}` })),
    },
  })
  const kill = (count: number) => leaseAndNack(g.port, stored, 0, count)
  await kill(bodies.length)
  const dead = async () =>
    (await g.port.machine.listDead(stored, 0, 100))?.map((d) => new TextDecoder().decode(d.body)) ?? []
  return { g, stored, kill, dead, apply }
}

/** Opens partition 1 of `stored` (one delivery allowed) with one dead letter, `body`. */
async function deadOnPartition1(port: DataGroupPort, stored: string, body: string) {
  await port.propose({ type: 'open', queue: stored, partition: 1, config: { maxDeliveries: 1 } })
  await port.propose({
    type: 'apply',
    queue: stored,
    partition: 1,
    command: { type: 'enqueue', messages: [{ body: text(body), weight: 1 }] },
  })
  await leaseAndNack(port, stored, 1, 1)
}

function host(
  ports: DeadLetterForwarderHost['groups'],
  forward: DeadLetterForwarderHost['forward'],
  overrides: Partial<DeadLetterForwarderHost> = {},
): DeadLetterForwarderHost {
  return {
    groups: ports,
    formatLevel: () => FORMAT_LEVEL_DEAD_LETTER_QUEUE,
    deadLetterQueueOf: async (queue, queueId) => (queue === 'jobs' && queueId === 7 ? 'jobs-dead' : ''),
    placedIn: async () => true,
    forward,
    ...overrides,
  }
}

describe('DeadLetterForwarder', () => {
  it('copies dead letters to the dead-letter queue, then purges exactly what it copied', async () => {
    const { g, stored, kill, dead, apply } = await withDead(['a', 'b'])
    // One more message, ready now; it dies while the copy of a and b is under way.
    await apply({
      type: 'apply',
      queue: stored,
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: text('late'), weight: 1 }] },
    })
    const sent: { target: string; messages: readonly ForwardedMessage[] }[] = []
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (target, messages) => {
          sent.push({ target, messages })
          if (sent.length === 1) await kill(1)
          return allStored(messages)
        },
      ),
    )
    const first = await forwarder.round()
    expect(first.failures).toEqual([])
    expect(sent[0]?.target).toBe('jobs-dead')
    expect(sent[0]?.messages.map(bodyOf)).toEqual(['a', 'b'])
    expect(sent[0]?.messages[0]).toMatchObject({
      weight: 3,
      key: 'k-a',
      headers: { app: 'a', [DEAD_LETTER_SOURCE_HEADER]: 'jobs/0/1', [DEAD_LETTER_DELIVERIES_HEADER]: '1' },
      dedupKey: 'mq-dlq/7/0/0',
    })
    // a and b purged; late, which died after the listing, was listed and moved next (same round).
    expect(sent.map((s) => s.messages.map(bodyOf))).toEqual([['a', 'b'], ['late']])
    // Keyless, it stays keyless and is routed by its source partition: every copy of it goes
    // to one partition. A keyed one is routed by its key.
    expect(sent[1]?.messages[0]).toMatchObject({ key: '', partitionKey: 'mq-dlq/7/0' })
    expect(sent[0]?.messages[0]?.partitionKey).toBeUndefined()
    expect(first.forwarded).toBe(3)
    expect(await dead()).toEqual([])
    expect((await forwarder.round()).forwarded).toBe(0)
  })

  it('leaves the dead letters where they are while the target cannot take them, and moves them once it can', async () => {
    const { g, dead } = await withDead(['a', 'b'])
    let exists = false
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (target, messages) => {
          if (!exists) throw new QueueNotFoundError(`queue ${target} does not exist`)
          return allStored(messages)
        },
      ),
    )
    const r = await forwarder.round()
    expect(r.forwarded).toBe(0)
    expect(r.failures).toMatchObject([{ queue: 'jobs', partition: 0, target: 'jobs-dead' }])
    expect(r.failures[0]?.messageId).toBeUndefined()
    expect(await dead()).toEqual(['a', 'b'])
    exists = true
    expect((await forwarder.round()).forwarded).toBe(2)
    expect(await dead()).toEqual([])
  })

  it('tries a failing target once a round, not once per partition', async () => {
    const { g, stored } = await withDead(['a'])
    // A second partition of jobs with a dead letter too.
    await deadOnPartition1(g.port, stored, 'b')
    expect(g.port.machine.deadPartitionIds()).toHaveLength(2)
    let tries = 0
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async () => {
          tries++
          throw new QueueNotFoundError('queue jobs-dead does not exist')
        },
      ),
    )
    expect((await forwarder.round()).failures).toHaveLength(1)
    expect(tries).toBe(1)
  })

  it('does not let a partition whose copies the target keeps failing hold up the other partitions naming it', async () => {
    const { g, stored, dead } = await withDead(['a'])
    await deadOnPartition1(g.port, stored, 'b')
    // The target's partition that partition 0's copies go to is full; the one partition 1's go
    // to has room.
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (_target, messages) => {
          if (messages.some((m) => m.key === 'k-a'))
            throw new LimitExceededError('the partition holds 10 messages; retry after consumers catch up')
          return allStored(messages)
        },
      ),
    )
    let forwarded = 0
    for (let i = 0; i < 3; i++) forwarded += (await forwarder.round()).forwarded
    expect(forwarded).toBe(1)
    expect(await dead()).toEqual(['a'])
    expect(await g.port.machine.listDead(stored, 1, 10)).toEqual([])
  })

  it('sends one at a time when the target refuses a batch as invalid; the refused one stays and is skipped', async () => {
    const { g, dead } = await withDead(['a', 'huge', 'c'])
    const calls: string[][] = []
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (_target, messages) => {
          calls.push(messages.map(bodyOf))
          if (messages.some((m) => bodyOf(m) === 'huge'))
            throw new InvalidArgumentError('message 0 is too big')
          return allStored(messages)
        },
      ),
    )
    const r = await forwarder.round()
    expect(calls).toEqual([['a', 'huge', 'c'], ['a'], ['huge'], ['c']])
    expect(r.forwarded).toBe(2)
    expect(r.failures).toMatchObject([{ queue: 'jobs', partition: 0, messageId: 2 }])
    expect(await dead()).toEqual(['huge'])
    // Skipped from then on: the next round sends nothing.
    calls.length = 0
    expect((await forwarder.round()).forwarded).toBe(0)
    expect(calls).toEqual([])
  })

  it('sends again only the copies the target did not store when it refused one of a batch', async () => {
    const { g, dead } = await withDead(['a', 'huge', 'c'])
    const calls: string[][] = []
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        // As the SDK's producer does: the batch refused for its message 1, the others sent
        // again and stored.
        async (_target, messages) => {
          calls.push(messages.map(bodyOf))
          return messages.map((m, i) =>
            bodyOf(m) === 'huge'
              ? new InvalidArgumentError(`message ${i} is too big`, { messageIndex: i })
              : undefined,
          )
        },
      ),
    )
    const r = await forwarder.round()
    expect(calls).toEqual([['a', 'huge', 'c'], ['huge']])
    expect(r.forwarded).toBe(2)
    expect(r.failures).toMatchObject([{ queue: 'jobs', partition: 0, messageId: 2 }])
    expect(await dead()).toEqual(['huge'])
  })

  it('purges what the target stored, before and after a copy that failed, and leaves that one for the next round', async () => {
    const { g, dead } = await withDead(['a', 'b', 'c'])
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (_target, messages) =>
          messages.map((m) =>
            bodyOf(m) === 'b' ? new QueueNotFoundError('queue jobs-dead is gone') : undefined,
          ),
      ),
    )
    const r = await forwarder.round()
    expect(r.forwarded).toBe(2)
    expect(r.failures).toHaveLength(1)
    expect(r.failures[0]?.messageId).toBeUndefined()
    expect(await dead()).toEqual(['b'])
  })

  it('does not send again a copy the target stored when one before it failed (no duplicate once the dedup window passed)', async () => {
    const { g, dead } = await withDead(['a', 'b', 'c'])
    // A target whose partition b's copy goes to is full for longer than its dedup window
    // (5 min); the others take theirs.
    let now = 0
    const windowMs = 5 * 60_000
    const dedup = new Map<string, number>()
    const stored: string[] = []
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (_target, messages) =>
          messages.map((m) => {
            if (bodyOf(m) === 'b') return new LimitExceededError('the partition is full')
            const at = dedup.get(m.dedupKey)
            if (at !== undefined && now - at < windowMs) return undefined
            dedup.set(m.dedupKey, now)
            stored.push(bodyOf(m))
            return undefined
          }),
      ),
    )
    for (; now <= 3 * windowMs; now += 60_000) await forwarder.round()
    expect(stored).toEqual(['a', 'c'])
    expect(await dead()).toEqual(['b'])
  })

  it('begins a round after the partition where the previous one ran out of batches', async () => {
    // Partition 0: more than two rounds' batches.
    const bodies = Array.from({ length: 4 * DEAD_LETTER_BATCH + 1 }, (_, i) => `m${i}`)
    const { g, stored } = await withDead(bodies)
    // A second partition of jobs with one dead letter.
    await deadOnPartition1(g.port, stored, 'p1')
    const sent: string[] = []
    const forwarder = new DeadLetterForwarder(
      host(
        () => [g.port],
        async (_target, messages) => {
          sent.push(...messages.map(bodyOf))
          return allStored(messages)
        },
      ),
      2, // batches a round
    )
    expect((await forwarder.round()).forwarded).toBe(2 * DEAD_LETTER_BATCH) // partition 0's budget
    sent.length = 0
    // Partition 1 first, then partition 0 with what is left of the budget.
    expect((await forwarder.round()).forwarded).toBe(1 + DEAD_LETTER_BATCH)
    expect(sent[0]).toBe('p1')
    expect(sent[1]).toBe(`m${2 * DEAD_LETTER_BATCH}`)
  })

  it("does not forward the dead letters of an aborted move's copy, which the route places in another group", async () => {
    // Group 3 holds jobs#7/0 with two dead letters; move 5 copies it, fenced, into group 4, and
    // is aborted as its last chunk lands: group 4 holds a complete copy, unfenced, while the
    // route places the partition in group 3, which serves it again.
    const { g: source, stored, dead } = await withDead(['a', 'b'])
    const target = await memoryGroup(4)
    await source.port.propose({ type: 'fence', queue: stored, partition: 0, moveId: 5 })
    const { pairs } = await source.port.machine.exportChunk(stored, 0, undefined, Number.POSITIVE_INFINITY)
    const config = source.port.machine.configOf(stored, 0) ?? {}
    const chunk = { moveId: 5, session: 's', config }
    await target.port.propose({
      type: 'import',
      queue: stored,
      partition: 0,
      ...chunk,
      seq: 0,
      last: false,
      pairs,
    })
    await source.port.propose({ type: 'unfence', queue: stored, partition: 0, moveId: 5 })
    await target.port.propose({
      type: 'import',
      queue: stored,
      partition: 0,
      ...chunk,
      seq: 1,
      last: true,
      pairs: [],
    })
    expect(target.port.machine.deadPartitionIds()).toEqual([`${stored}/0`])
    expect(source.port.machine.deadPartitionIds()).toEqual([`${stored}/0`])
    const sent: string[] = []
    let groupOfRoute = 3
    const forwarder = new DeadLetterForwarder(
      host(
        () => [source.port, target.port],
        async (_target, messages) => {
          sent.push(...messages.map(bodyOf))
          return allStored(messages)
        },
        {
          placedIn: async (queue, queueId, partition, groupId) =>
            queue === 'jobs' && queueId === 7 && partition === 0 && groupId === groupOfRoute,
        },
      ),
    )
    expect((await forwarder.round()).forwarded).toBe(2)
    expect(sent).toEqual(['a', 'b'])
    expect(await dead()).toEqual([])
    // The copy's dead letters stay where they are (no second copy in the dead-letter queue).
    expect(await target.port.machine.listDead(stored, 0, 10)).toHaveLength(2)
    expect((await forwarder.round()).forwarded).toBe(0)
    // Once the route places the partition there (a later move), they go.
    groupOfRoute = 4
    expect((await forwarder.round()).forwarded).toBe(2)
    expect(await target.port.machine.listDead(stored, 0, 10)).toEqual([])
  })

  it('does nothing below the format level, for queues without a dead-letter queue, or on a follower', async () => {
    const { g, dead } = await withDead(['a'])
    const sent: unknown[] = []
    const forward = async (_t: string, m: readonly ForwardedMessage[]) => {
      sent.push(m)
      return allStored(m)
    }
    const cases: DeadLetterForwarderHost[] = [
      host(() => [g.port], forward, { formatLevel: () => FORMAT_LEVEL_DEAD_LETTER_QUEUE - 1 }),
      host(() => [g.port], forward, { deadLetterQueueOf: async () => '' }),
      host(() => [g.port], forward, { deadLetterQueueOf: async () => 'jobs' }), // itself
      host(() => [g.port], forward, { deadLetterQueueOf: async (q, id) => (id === 8 ? `${q}-dead` : '') }), // an older incarnation
    ]
    for (const h of cases) expect((await new DeadLetterForwarder(h).round()).forwarded).toBe(0)
    const follower = await memoryGroup(4, false)
    await follower.port.propose({ type: 'open', queue: storedQueueName('jobs', 7), partition: 0, config: {} })
    expect((await new DeadLetterForwarder(host(() => [follower.port], forward)).round()).forwarded).toBe(0)
    expect(sent).toEqual([])
    expect(await dead()).toEqual(['a'])
  })
})
