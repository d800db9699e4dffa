import { EventEmitter } from 'node:events'
import { MemoryEngine } from '@mq/kv-storage'
import {
  CONSUMER_ID_BYTES_MAX,
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_SOURCE_HEADER,
  FORMAT_LEVEL_LATE_GIVE_BACK,
  FORMAT_LEVEL_LEASE_ATTEMPTS,
  FORMAT_LEVEL_LEASE_TAGS,
  FORMAT_LEVEL_REDRIVE_SPAN,
  FORMAT_LEVEL_REPEAT_ONLY,
  FORMAT_LEVEL_RETRY_BACKOFF,
  FORMAT_LEVEL_TTL_REDRIVE_LINES,
  fromGrpcError,
  LEASE_VISIBILITY_MS_MAX,
  LeaseOutcome,
  MESSAGE_DELAY_MS_MAX,
  MESSAGE_KEY_BYTES_MAX,
  NotLeaderError,
  type QueueConfig,
  type QueueServer,
  StaleRouteError,
  UnavailableError,
} from '@mq/protocol'
import { Prng } from '@mq/raft-core'
import { NAME_BYTES_MAX, QUEUE_CONFIG_DEFAULT } from '@mq/weighted-queue'
import { describe, expect, it, vi } from 'vitest'
import { encodeDataCommand } from './data-command'
import { DataGroupMachine } from './data-group'
import { ProducerOrder } from './producer-order'
import { type DataGroupPort, type DataNodePort, queueHandlers } from './queue-handlers'

/**
 * One replica that applies proposals at once (the handlers' contract, not Raft's). Long polls
 * learn of changes from the machine itself (`watchReady`): no group-wide signal.
 */
async function localGroup(
  leader = true,
  config: Record<string, number> = { messageBytesMax: 100 },
): Promise<DataGroupPort & { now: number }> {
  const engine = new MemoryEngine()
  const machine = await DataGroupMachine.open(1, engine)
  const port = {
    groupId: 1,
    machine,
    now: 1_000,
    nowMs: () => port.now,
    assertLeader: () => {
      if (!leader)
        throw new NotLeaderError('not the leader of group 1', { leaderId: 'n2', leaderAddress: 'n2:1' })
      return 1
    },
    propose: async (command: Parameters<DataGroupPort['propose']>[0]) => {
      const applied = await machine.apply(encodeDataCommand(command), port.now)
      await engine.write(applied.ops, { sync: false })
      applied.written()
      return applied.result
    },
    settled: async () => {},
    readBarrier: async () => {},
  }
  await port.propose({ type: 'open', queue: 'jobs', partition: 0, config })
  return port
}

/** The config of queue `jobs` in the fake node's route. */
const JOBS_CONFIG: QueueConfig = {
  partitions: 1,
  visibilityTimeoutMs: 30_000,
  maxDeliveries: 5,
  deadLetterQueue: '',
  messageBytesMax: 150,
  queueLengthMax: 1000,
  strictPriority: false,
  dedupWindowMs: 0,
  engine: 'leveldb',
  messageTtlMs: 0,
  paused: false,
  orderedKeys: false,
  deliveryRate: 0,
  retryBackoffMinMs: 0,
  retryBackoffMaxMs: 0,
}

/** A node holding partition jobs/0 in `group`; `config` gives the route's config of each lookup. */
function node(
  group: DataGroupPort,
  formatLevel = 2,
  config: () => QueueConfig | undefined = () => JOBS_CONFIG,
): DataNodePort {
  return {
    formatLevel: () => formatLevel,
    groupFor: async (q, p) =>
      q === 'jobs' && p === 0 ? { group, storedAs: 'jobs', config: config() } : undefined,
    routeEpoch: () => 4,
  }
}

/** As mq-server's node: `node`, but a partition fenced here is located nowhere (STALE_ROUTE). */
function fencingNode(group: DataGroupPort): DataNodePort {
  const located = node(group)
  return {
    ...located,
    groupFor: async (q, p, epoch) => {
      if (group.machine.fenced(q, p)) throw new StaleRouteError(`${q}/${p} moved away`, { epoch: 4 })
      return located.groupFor(q, p, epoch)
    },
  }
}

/** Counts the lease entries `group` is asked to propose from now on. */
function countLeaseEntries(group: DataGroupPort): () => number {
  let entries = 0
  const propose = group.propose
  group.propose = (command) => {
    if (command.type === 'apply' && command.command.type === 'lease') entries++
    return propose(command)
  }
  return () => entries
}

/** A node holding partition 0 of queues `jobs` and `other`, both in `group`. */
function nodeOf(group: DataGroupPort): DataNodePort {
  return {
    formatLevel: () => 2,
    groupFor: async (q, p) =>
      (q === 'jobs' || q === 'other') && p === 0 ? { group, storedAs: q, config: JOBS_CONFIG } : undefined,
    routeEpoch: () => 4,
  }
}

/**
 * Counts, for `queue`, the handlers' looks at the partition's leasable messages (each round of a
 * poll, each wake decision) and the polls going to sleep (each looks at its due time once then).
 */
function countLooks(group: DataGroupPort, queue: string) {
  let lookups = 0
  let sleeps = 0
  const machine = group.machine
  const leasable = machine.leasableAtMost.bind(machine)
  const timed = machine.nextTimedMs.bind(machine)
  machine.leasableAtMost = (q, i, nowMs) => {
    if (q === queue) lookups++
    return leasable(q, i, nowMs)
  }
  machine.nextTimedMs = (q, i) => {
    if (q === queue) sleeps++
    return timed(q, i)
  }
  return {
    lookups: () => lookups,
    sleeps: () => sleeps,
    reset: () => {
      lookups = 0
      sleeps = 0
    },
  }
}

/** Lets every callback due now run (a few turns of the event loop). */
async function settleAll(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r))
}

/** Resolves once `condition` holds; fails after 5 s. */
async function until(condition: () => boolean): Promise<void> {
  const started = Date.now()
  while (!condition()) {
    if (Date.now() - started > 5_000) throw new Error('the condition did not hold within 5 s')
    await new Promise((r) => setImmediate(r))
  }
}

/** The handlers over one group (default limits). */
const h0 = (group: DataGroupPort) => queueHandlers(node(group))

/** A server call as grpc-js hands it to a handler: the request, and a `cancelled` event. */
function fakeCall(request: unknown): EventEmitter & { request: unknown; cancelled: boolean; cancel(): void } {
  const c = Object.assign(new EventEmitter(), {
    request,
    cancelled: false,
    cancel: () => {
      c.cancelled = true
      c.emit('cancelled')
    },
  })
  return c
}

function call<K extends keyof QueueServer>(
  h: QueueServer,
  method: K,
  request: unknown,
  server = fakeCall(request),
  // biome-ignore lint/suspicious/noExplicitAny: the tests read the handlers' untyped responses
): Promise<any> {
  return new Promise((resolve, reject) =>
    (h[method] as (c: unknown, cb: (e: unknown, r: unknown) => void) => void)(server, (e, r) =>
      e ? reject(e) : resolve(r),
    ),
  )
}

const target = { queue: 'jobs', partition: 0, routeEpoch: 4 }

/** Leases up to `max` messages of `target` and nacks them (with maxDeliveries 1: they die). */
async function leaseAndNack(h: ReturnType<typeof queueHandlers>, max: number): Promise<void> {
  const leased = await call(h, 'lease', { target, consumerId: 'c', max, visibilityMs: 5_000, waitMs: 0 })
  await call(h, 'nack', { target, leaseIds: leased.messages.map((m: { leaseId: string }) => m.leaseId) })
}
const message = (body: string, weight = 1) => ({
  body: new TextEncoder().encode(body),
  weight,
  headers: {},
  key: '',
  delayMs: 0,
  dedupKey: '',
})

describe('queue handlers', () => {
  it("leases for the visibility of the queue's route the partition was located by", async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group, 2, () => ({ ...JOBS_CONFIG, visibilityTimeoutMs: 120_000 })))
    // Enqueued straight into the group: the lease is the first request the handlers see.
    await group.propose({
      type: 'apply',
      queue: 'jobs',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: new TextEncoder().encode('a'), weight: 1 }] },
    })
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 0, waitMs: 0 })
    expect(leased.messages[0].deadlineMs).toBe(group.nowMs() + 120_000)
  })

  it('applies the acks a lease carries before its lease, and answers both together', async () => {
    const group = await localGroup()
    const proposed: string[] = []
    const propose = group.propose
    group.propose = (command) => {
      if (command.type === 'apply') proposed.push(command.command.type)
      return propose(command)
    }
    const h = queueHandlers(node(group))
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a'), message('b')] })
    const first = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })
    // Without acks: no ack results.
    expect(first.ackResults).toEqual([])
    const leaseId = first.messages[0].leaseId
    proposed.length = 0
    const next = await call(h, 'lease', {
      target,
      consumerId: 'c',
      max: 5,
      visibilityMs: 5_000,
      waitMs: 0,
      ackLeaseIds: [leaseId, 'bogus'],
    })
    expect(proposed).toEqual(['ack', 'lease'])
    expect(next.ackResults).toEqual([
      { leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_OK, deadlineMs: 0 },
      { leaseId: 'bogus', outcome: LeaseOutcome.LEASE_OUTCOME_UNKNOWN, deadlineMs: 0 },
    ])
    expect(next.messages.map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual(['b'])
    // The acked message is gone: nothing is left but the one leased now.
    const stats = await call(h, 'stats', { target })
    expect(stats.messages).toBe(1)
  })

  it("answers a lease's applied acks with no message when the lease is refused before it leased", async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group), { waitersPerPartitionMax: 1, waitersPerGroupMax: 1 })
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a')] })
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })
    // One long poll takes the partition's only place: a second one, with nothing ready, is refused.
    const pollRequest = { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 10_000 }
    const waiting = fakeCall(pollRequest)
    const poll = call(h, 'lease', pollRequest, waiting)
    await settleAll()
    const answer = await call(h, 'lease', { ...pollRequest, ackLeaseIds: [leased.messages[0].leaseId] })
    expect(answer).toEqual({
      messages: [],
      ackResults: [
        { leaseId: leased.messages[0].leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_OK, deadlineMs: 0 },
      ],
    })
    // Without acks the same lease is refused (LIMIT_EXCEEDED).
    await expect(call(h, 'lease', pollRequest)).rejects.toMatchObject({ code: 8 })
    waiting.cancel()
    await poll
  })

  it("fails a lease's acks and leases nothing when the acks are refused, or the lease is lost on its way", async () => {
    // Not the leader: refused before anything is proposed.
    const follower = await localGroup(false)
    const entries = countLeaseEntries(follower)
    await expect(
      call(queueHandlers(node(follower)), 'lease', {
        target,
        consumerId: 'c',
        max: 1,
        waitMs: 0,
        ackLeaseIds: ['1.1'],
      }),
    ).rejects.toMatchObject({ code: 14, details: expect.stringMatching(/not the leader/) })
    expect(entries()).toBe(0)
    // An ack id past the lease id length: INVALID_ARGUMENT naming the field, nothing proposed.
    const group = await localGroup()
    const h = queueHandlers(node(group))
    const leaseEntries = countLeaseEntries(group)
    await expect(
      call(h, 'lease', { target, consumerId: 'c', max: 1, waitMs: 0, ackLeaseIds: ['x'.repeat(65)] }),
    ).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/^ack_lease_ids\[0\] is 65 characters long/),
    })
    expect(leaseEntries()).toBe(0)
    // The lease's entry lost on its way (UNAVAILABLE) after the acks applied: the call fails with
    // it (the consumer takes both as may-have-acted).
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a'), message('b')] })
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })
    const propose = group.propose
    group.propose = (command) => {
      if (command.type === 'apply' && command.command.type === 'lease')
        return Promise.reject(new UnavailableError('the entry was not committed: leadership lost'))
      return propose(command)
    }
    await expect(
      call(h, 'lease', {
        target,
        consumerId: 'c',
        max: 1,
        visibilityMs: 5_000,
        waitMs: 0,
        ackLeaseIds: [leased.messages[0].leaseId],
      }),
    ).rejects.toMatchObject({ code: 14, details: expect.stringMatching(/leadership lost/) })
    group.propose = propose
    const stats = await call(h, 'stats', { target })
    expect(stats.messages, 'the ack was applied').toBe(1)
  })

  it('produces, leases by weight, acks', async () => {
    const h = queueHandlers(node(await localGroup()))
    const produced = await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [message('a', 1), message('b', 9)],
    })
    expect(produced).toEqual({ ids: [1, 2], duplicate: false, pipelining: true })
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })
    expect(leased.messages).toHaveLength(1)
    expect(leased.messages[0]).toMatchObject({ id: 2, weight: 9, deliveryCount: 1 })
    const acked = await call(h, 'ack', { target, leaseIds: [leased.messages[0].leaseId, 'bogus'] })
    expect(acked.results.map((r: { outcome: number }) => r.outcome)).toEqual([1, 2])
  })

  it("keeps a pipelining producer's order only at the pipelining format level, and says so", async () => {
    // Batch 3 overtook batch 2 (base 2: 2 is still in flight) after batch 1 was stored.
    const batch = (sequence: number, body: string) => ({
      target,
      producerId: 'p1',
      sequence,
      sequenceBase: sequence === 1 ? 1 : 2,
      messages: [message(body)],
    })
    const upgraded = queueHandlers(node(await localGroup(), 2))
    expect(await call(upgraded, 'produce', batch(1, 'one'))).toEqual({
      ids: [1],
      duplicate: false,
      pipelining: true,
    })
    // Held for its predecessor (100 ms at most), then refused: SEQUENCE_GAP, retriable.
    await expect(call(upgraded, 'produce', batch(3, 'three'))).rejects.toMatchObject({ code: 10 })
    // A cluster with a replica of an older version: the base is not written (that replica
    // could not read it) and the answer tells the producer not to pipeline. Batch 3 sent while
    // batch 2 is in flight (base 2) could overtake it without the base: refused, retriable.
    const mixed = queueHandlers(node(await localGroup(), 1))
    expect(await call(mixed, 'produce', batch(1, 'one'))).toEqual({
      ids: [1],
      duplicate: false,
      pipelining: false,
    })
    await expect(call(mixed, 'produce', batch(3, 'three'))).rejects.toMatchObject({ code: 10 })
    // Sent alone (base = its own sequence), a batch after a gap is stored as before levels.
    expect(await call(mixed, 'produce', { ...batch(3, 'three'), sequenceBase: 3 })).toEqual({
      ids: [2],
      duplicate: false,
      pipelining: false,
    })
  })

  it('tags lease ids with their partition and queue incarnation from format level 20: another settles nothing', async () => {
    const group = await localGroup()
    for (const queue of ['jobs#7', 'jobs#8'])
      await group.propose({ type: 'open', queue, partition: 0, config: { messageBytesMax: 100 } })
    const at = (storedAs: string, formatLevel = FORMAT_LEVEL_LEASE_TAGS): DataNodePort => ({
      formatLevel: () => formatLevel,
      groupFor: async (q, p) =>
        q === 'jobs' && p === 0 ? { group, storedAs, config: JOBS_CONFIG } : undefined,
      routeEpoch: () => 4,
    })
    const h = queueHandlers(at('jobs#7'))
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a'), message('b')] })
    const lease = { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 }
    const [leased] = (await call(h, 'lease', lease)).messages
    expect(leased.leaseId).toBe('7.0.1.1')
    const outcomes = async (h: QueueServer, leaseIds: string[]) =>
      (await call(h, 'ack', { target, leaseIds })).results.map((r: { outcome: number }) => r.outcome)
    // The queue deleted and created again (incarnation 8), or another partition's tag: unknown.
    expect(await outcomes(h, ['8.0.1.1', '7.1.1.1', '70.0.1.1'])).toEqual([2, 2, 2])
    // Incarnation 7's id acked after the queue was created again (jobs#8, whose message 1 is
    // another): nothing.
    const h8 = queueHandlers(at('jobs#8'))
    await call(h8, 'produce', { target, producerId: '', sequence: 0, messages: [message('x')] })
    expect((await call(h8, 'lease', lease)).messages[0].leaseId).toBe('8.0.1.1')
    expect(await outcomes(h8, ['7.0.1.1'])).toEqual([2])
    expect(await outcomes(h8, ['8.0.1.1'])).toEqual([1]) // its consumer's lease was untouched
    expect(await outcomes(h, ['7.0.1.1'])).toEqual([1])
    // Below the level: the partition's own ids, which are still taken as they are.
    const old = queueHandlers(at('jobs#7', FORMAT_LEVEL_LEASE_TAGS - 1))
    const [second] = (await call(old, 'lease', lease)).messages
    expect(second.leaseId).toBe('2.1')
    expect(await outcomes(h, ['2.1'])).toEqual([1])
  })

  it('tags and gives back the leases of the incarnation the lease was committed in, not of an earlier look', async () => {
    const group = await localGroup()
    for (const queue of ['jobs#7', 'jobs#8']) {
      await group.propose({ type: 'open', queue, partition: 0, config: { messageBytesMax: 100 } })
      await group.propose({
        type: 'apply',
        queue,
        partition: 0,
        command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] },
      })
    }
    /** A node whose route of jobs names these incarnations, one lookup after the other (then the last). */
    const lookups = (...storedAs: string[]): DataNodePort => {
      let n = 0
      return {
        formatLevel: () => FORMAT_LEVEL_LEASE_TAGS,
        groupFor: async (q, p) =>
          q === 'jobs' && p === 0
            ? { group, storedAs: storedAs[Math.min(n++, storedAs.length - 1)] as string, config: JOBS_CONFIG }
            : undefined,
        routeEpoch: () => 4,
      }
    }
    const lease = { target, consumerId: 'c', max: 1, visibilityMs: 60_000, waitMs: 0 }
    // The queue is deleted and created again (jobs#8) between the poll's look and the lease: the
    // lease is of jobs#8's message 1, and so is its tag.
    const [leased] = (await call(queueHandlers(lookups('jobs#7', 'jobs#8')), 'lease', lease)).messages
    expect(leased.leaseId).toBe('8.0.1.1')
    // A call cancelled while its lease of jobs#7's message 1 (its own id 1.1) is committed gives
    // it back tagged: by then the route names jobs#8, whose message 1 the lease above holds
    // under the same own id, which it must not settle.
    const cancelling = fakeCall(lease)
    const nacks: string[] = []
    const propose = group.propose
    group.propose = (command) => {
      if (command.type === 'apply' && command.command.type === 'lease') cancelling.cancel()
      if (command.type === 'apply' && command.command.type === 'nack')
        nacks.push(`${command.queue} ${JSON.stringify(command.command.leaseIds)}`)
      return propose(command)
    }
    expect(
      (await call(queueHandlers(lookups('jobs#7', 'jobs#7', 'jobs#8')), 'lease', lease, cancelling)).messages,
    ).toEqual([])
    group.propose = propose
    expect(nacks).toEqual(['jobs#8 [""]']) // an id no partition knows: nothing settled
    const acked = await call(queueHandlers(lookups('jobs#8')), 'ack', { target, leaseIds: ['8.0.1.1'] })
    expect(acked.results.map((r: { outcome: number }) => r.outcome)).toEqual([1])
  })

  it('ends a long poll at once when its client cancels the call while it sleeps', async () => {
    const h = h0(await localGroup())
    const poll = fakeCall({ target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 30_000 })
    const answer = call(h, 'lease', poll.request, poll)
    await new Promise((r) => setTimeout(r, 100)) // asleep among the partition's polls by now
    const cancelledAt = Date.now()
    poll.cancel()
    expect((await answer).messages).toEqual([])
    // Not at the next recheck (1 s after the poll began): the cancel itself woke it.
    expect(Date.now() - cancelledAt).toBeLessThan(500)
  })

  it('answers a repeated lease attempt with the leases it still holds, at once, also to a long poll', async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group, FORMAT_LEVEL_LEASE_ATTEMPTS))
    await call(h, 'produce', { target, messages: [message('a'), message('b'), message('c')] })
    const ask = { target, consumerId: 'c', max: 2, visibilityMs: 60_000, waitMs: 0, attempt: 'at-1' }
    const first = (await call(h, 'lease', ask)).messages
    expect(first.map((m: { id: number }) => m.id)).toEqual([1, 2])
    // Its answer was lost: asked again (a long poll this time), the same leases, and nothing more.
    const started = Date.now()
    const again = (await call(h, 'lease', { ...ask, max: 10, waitMs: 5_000, attemptRepeat: true })).messages
    expect(again).toEqual(first)
    expect(Date.now() - started).toBeLessThan(2_000)
    // Another attempt leases what is left.
    const other = (await call(h, 'lease', { ...ask, attempt: 'at-2' })).messages
    expect(other.map((m: { id: number }) => m.id)).toEqual([3])
    // An attempt id that is not a name is refused before anything is proposed.
    await expect(call(h, 'lease', { ...ask, attempt: 'x'.repeat(300) })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/attempt is 300 characters long; the limit is 256 UTF-8 bytes/),
    })
    // Below the level the attempt is dropped: a repeat is a lease as before (nothing is left).
    const below = queueHandlers(node(group, FORMAT_LEVEL_LEASE_ATTEMPTS - 1))
    expect((await call(below, 'lease', ask)).messages).toEqual([])
  })

  it('answers a repeat the leases its attempt holds on a paused queue, or one out of delivery tokens, and nothing new', async () => {
    const group = await localGroup()
    const leaseEntries = countLeaseEntries(group)
    let config = JOBS_CONFIG
    const at = (level: number) =>
      queueHandlers(
        node(group, level, () => config),
        { leaseWaitMsMax: 30_000, leaseRecheckMs: 50 },
      )
    const h = at(FORMAT_LEVEL_REPEAT_ONLY)
    await call(h, 'produce', { target, messages: ['a', 'b', 'c', 'd'].map((b) => message(b)) })
    const ask = { target, consumerId: 'c', max: 2, visibilityMs: 60_000, waitMs: 0, attempt: 'at-1' }
    const ids = (r: { messages: { id: number }[] }) => r.messages.map((m) => m.id)
    const first = (await call(h, 'lease', ask)).messages
    expect(ids({ messages: first })).toEqual([1, 2])
    // Paused since (the answer was lost): the repeat gets the same leases at once.
    config = { ...JOBS_CONFIG, paused: true }
    const repeat = { ...ask, attemptRepeat: true }
    expect((await call(h, 'lease', { ...repeat, waitMs: 5_000 })).messages).toEqual(first)
    // Nothing held under another attempt: nothing new is leased, and a long poll waits on.
    const entries = leaseEntries()
    const started = Date.now()
    expect((await call(h, 'lease', { ...repeat, attempt: 'at-2', waitMs: 200 })).messages).toEqual([])
    expect(Date.now() - started).toBeGreaterThanOrEqual(190)
    expect(leaseEntries()).toBe(entries + 1) // the one that only repeats; none while paused
    // Below the level, a repeat to a paused queue waits for the resume, as any lease.
    expect((await call(at(FORMAT_LEVEL_REPEAT_ONLY - 1), 'lease', repeat)).messages).toEqual([])
    // Out of delivery tokens (1 a second, taken by the lease of message 3): the same.
    config = { ...JOBS_CONFIG, deliveryRate: 1 }
    const third = (await call(h, 'lease', { ...ask, max: 1, attempt: 'at-3' })).messages
    expect(ids({ messages: third })).toEqual([3])
    expect((await call(h, 'lease', { ...ask, attempt: 'at-4' })).messages).toEqual([])
    expect((await call(h, 'lease', { ...ask, attempt: 'at-3', attemptRepeat: true })).messages).toEqual(third)
    expect((await call(h, 'lease', { ...ask, attempt: 'at-5', attemptRepeat: true })).messages).toEqual([])
    // No token went back for what was answered again: message 4 waits for the next one.
    expect((await call(h, 'lease', { ...ask, attempt: 'at-6' })).messages).toEqual([])
  })

  it("does not give back a cancelled call's leases once a repeat of its attempt was answered them", async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group, FORMAT_LEVEL_LEASE_ATTEMPTS))
    await call(h, 'produce', { target, messages: [message('a'), message('b')] })
    const ask = { target, consumerId: 'c', max: 2, visibilityMs: 60_000, waitMs: 0, attempt: 'at-1' }
    // The first call is cancelled (its client gave up) while its lease is committed; its
    // give-back is proposed only after the client's repeat was answered.
    const cancelled = fakeCall(ask)
    const propose = group.propose
    const giveBacks: Promise<unknown>[] = []
    let repeat: Promise<{ messages: { leaseId: string }[] }> | undefined
    group.propose = (command) => {
      if (command.type === 'apply' && command.command.type === 'lease' && !cancelled.cancelled)
        cancelled.cancel()
      if (command.type === 'apply' && command.command.type === 'nack') {
        repeat ??= call(h, 'lease', { ...ask, attemptRepeat: true })
        const after = repeat.then(() => propose(command))
        giveBacks.push(after)
        return after as ReturnType<typeof propose>
      }
      return propose(command)
    }
    expect((await call(h, 'lease', ask, cancelled)).messages).toEqual([])
    const repeated = await (repeat as Promise<{ messages: { leaseId: string }[] }>)
    await Promise.all(giveBacks)
    group.propose = propose
    expect(repeated.messages.map((m) => m.leaseId)).toHaveLength(2)
    // They stay the repeat's: another attempt finds nothing to lease, and they settle.
    expect((await call(h, 'lease', { ...ask, attempt: 'at-2' })).messages).toEqual([])
    const acked = await call(h, 'ack', { target, leaseIds: repeated.messages.map((m) => m.leaseId) })
    expect(acked.results.map((r: { outcome: number }) => r.outcome)).toEqual([1, 1])
  })

  it("marks a cancelled call's give-back under its attempt to lapse with the attempt from format level 38, not below", async () => {
    const group = await localGroup()
    await call(queueHandlers(node(group, FORMAT_LEVEL_LATE_GIVE_BACK)), 'produce', {
      target,
      messages: [message('a'), message('b')],
    })
    const propose = group.propose
    const nacks: unknown[] = []
    const giveBack = async (level: number, attempt: string) => {
      const ask = { target, consumerId: 'c', max: 1, visibilityMs: 60_000, waitMs: 0, attempt }
      const cancelled = fakeCall(ask)
      group.propose = (command) => {
        if (command.type === 'apply' && command.command.type === 'lease') cancelled.cancel()
        if (command.type === 'apply' && command.command.type === 'nack') nacks.push(command.command)
        return propose(command)
      }
      try {
        expect((await call(queueHandlers(node(group, level)), 'lease', ask, cancelled)).messages).toEqual([])
      } finally {
        group.propose = propose
      }
    }
    await giveBack(FORMAT_LEVEL_LATE_GIVE_BACK, 'at-1')
    await giveBack(FORMAT_LEVEL_LATE_GIVE_BACK - 1, 'at-2')
    // Applied past the attempt's record, the first changes nothing; the second, as a replica
    // of an earlier version applies it, gives back what is still held.
    expect(nacks).toEqual([
      expect.objectContaining({ type: 'nack', release: true, attempt: 'at-1', lapses: true }),
      expect.not.objectContaining({ lapses: true }),
    ])
    expect(nacks[1]).toMatchObject({ type: 'nack', release: true, attempt: 'at-2' })
  })

  it("gives back only its own leases when a late call's lease comes after its attempt's repeat", async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group, FORMAT_LEVEL_LEASE_ATTEMPTS))
    await call(h, 'produce', { target, messages: [message('a'), message('b'), message('c')] })
    const ask = { target, consumerId: 'c', max: 2, visibilityMs: 60_000, waitMs: 0, attempt: 'at-1' }
    // The first call is slow: the client gave up and asked again, and the repeat's lease is
    // committed (and answered) first; the late call's own lease then takes what is left, and
    // its cancel is noticed only then: it gives that back, not the repeat's.
    const late = fakeCall(ask)
    const propose = group.propose
    let repeat: Promise<{ messages: { leaseId: string }[] }> | undefined
    group.propose = (command) => {
      if (command.type === 'apply' && command.command.type === 'lease' && repeat === undefined) {
        repeat = call(h, 'lease', { ...ask, attemptRepeat: true })
        return repeat.then(() => {
          late.cancel()
          return propose(command)
        }) as ReturnType<typeof propose>
      }
      return propose(command)
    }
    expect((await call(h, 'lease', ask, late)).messages).toEqual([])
    const repeated = await (repeat as Promise<{ messages: { leaseId: string }[] }>)
    group.propose = propose
    expect(repeated.messages).toHaveLength(2)
    // The repeat's stay its: another attempt finds only what the late call gave back, and they settle.
    const rest = (await call(h, 'lease', { ...ask, attempt: 'at-2' })).messages
    expect(rest.map((m: { id: number }) => m.id)).toEqual([3])
    const acked = await call(h, 'ack', { target, leaseIds: repeated.messages.map((m) => m.leaseId) })
    expect(acked.results.map((r: { outcome: number }) => r.outcome)).toEqual([1, 1])
  })

  it('lists ready messages without leasing them, within the limit, as a leased message without a lease', async () => {
    const h = queueHandlers(node(await localGroup()))
    await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [message('a', 1), message('b', 9), message('c', 1)],
    })
    const listed = await call(h, 'listReady', { target, limit: 0 })
    expect(listed.messages.map((m: { id: number }) => m.id)).toEqual([2, 1, 3])
    expect(listed.messages[0]).toMatchObject({ leaseId: '', weight: 9, deliveryCount: 0, deadlineMs: 0 })
    expect((await call(h, 'listReady', { target, limit: 2 })).messages).toHaveLength(2)
    // Nothing was leased: all three are still there to lease.
    const leased = await call(h, 'lease', {
      target,
      consumerId: 'c',
      max: 10,
      visibilityMs: 5_000,
      waitMs: 0,
    })
    expect(leased.messages).toHaveLength(3)
    expect((await call(h, 'listReady', { target, limit: 10 })).messages).toEqual([])
  })

  it("reads a partition (stats, listings, a redrive's count) past the read barrier: a new leader applies what it committed first", async () => {
    const group = await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1 })
    const h = queueHandlers(node(group))
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a'), message('b')] })
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })
    // Committed, acknowledged and not yet applied here (this replica just became the leader):
    // the barrier resolves once it is.
    const lagging: Parameters<DataGroupPort['propose']>[0][] = [
      {
        type: 'apply',
        queue: 'jobs',
        partition: 0,
        command: { type: 'enqueue', messages: [{ body: Uint8Array.of(7), weight: 3 }] },
      },
    ]
    const propose = group.propose
    const reads: string[] = []
    group.readBarrier = async () => {
      reads.push('barrier')
      for (const command of lagging.splice(0)) await propose(command)
    }
    expect((await call(h, 'stats', { target })).messages).toBe(3)
    lagging.push({
      type: 'apply',
      queue: 'jobs',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(8), weight: 9 }] },
    })
    expect(
      (await call(h, 'listReady', { target, limit: 10 })).messages.map((m: { weight: number }) => m.weight),
    ).toEqual([9, 3, 1])
    lagging.push({
      type: 'apply',
      queue: 'jobs',
      partition: 0,
      command: { type: 'nack', leaseIds: [leased.messages[0].leaseId] },
    })
    expect((await call(h, 'listDead', { target, limit: 10, afterId: 0 })).messages).toHaveLength(1)
    expect(reads).toEqual(['barrier', 'barrier', 'barrier'])
    // A redrive counts the dead past the barrier too (below the level that bounds it by place).
    expect(await call(h, 'redrive', { target, max: 10 })).toMatchObject({ moved: 1 })
    expect(reads).toHaveLength(4)
    // A barrier that fails (deposed: no quorum confirms the leader) fails the read.
    group.readBarrier = async () => {
      throw new NotLeaderError('not the leader of group 1', { leaderId: 'n2', leaderAddress: 'n2:1' })
    }
    await expect(call(h, 'stats', { target })).rejects.toMatchObject({
      code: 14,
      details: expect.stringMatching(/not the leader of group 1/),
    })
  })

  it.each([
    ['stats', { target }],
    ['listReady', { target, limit: 10 }],
    ['listDead', { target, limit: 10, afterId: 0 }],
  ] as const)(
    "refuses a %s (STALE_ROUTE) of a partition whose move's fence the read barrier applies: no frozen copy is served",
    async (method, request) => {
      const group = await localGroup()
      const h = queueHandlers(fencingNode(group))
      await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a')] })
      // The move's fence is committed (the route flipped: new writes go to the target) but not
      // yet applied here, as on a replica that just became the leader: the partition is located
      // as served, and the barrier applies the fence.
      const propose = group.propose
      group.readBarrier = async () => {
        await propose({ type: 'fence', queue: 'jobs', partition: 0 })
      }
      const error = await call(h, method, request).then(
        () => expect.unreachable('the read succeeded'),
        (e: unknown) => e,
      )
      expect(fromGrpcError(error as Parameters<typeof fromGrpcError>[0]).code).toBe('STALE_ROUTE')
    },
  )

  it('lists dead letters in pages by place; redrives, purges and purges them past the one-entry limit of 1,000, in batches', async () => {
    const h = queueHandlers(node(await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1 })))
    for (let batch = 0; batch < 3; batch++) {
      const messages = Array.from({ length: 500 }, (_, i) => message(`m${batch}.${i}`))
      await call(h, 'produce', { target, producerId: '', sequence: 0, messages })
      const leased = await call(h, 'lease', {
        target,
        consumerId: 'c',
        max: 500,
        visibilityMs: 5_000,
        waitMs: 0,
      })
      // One delivery at most: each nack dead-letters its message.
      await call(h, 'nack', { target, leaseIds: leased.messages.map((m: { leaseId: string }) => m.leaseId) })
    }
    expect((await call(h, 'stats', { target })).weights[0]).toMatchObject({ dead: 1_500 })
    // Listed in pages from a place on: 1,000, then the 500 after place 1,000.
    const page1 = await call(h, 'listDead', { target, limit: 5_000, afterId: 0 })
    expect(page1.messages.map((m: { deadPlace: number }) => m.deadPlace)).toEqual(
      Array.from({ length: 1_000 }, (_, i) => i + 1),
    )
    const page2 = await call(h, 'listDead', { target, limit: 1_000, afterId: 1_000 })
    expect(page2.messages).toHaveLength(500)
    expect(page2.messages[0]).toMatchObject({ deadPlace: 1_001, id: page1.messages[999].id + 1 })
    expect(await call(h, 'redrive', { target, max: 1_200 })).toEqual({
      moved: 1_200,
      more: false,
      throughPlace: 0,
    })
    expect(await call(h, 'redrive', { target, max: 0 })).toEqual({ moved: 300, more: false, throughPlace: 0 }) // 0: up to 1,000
    for (const max of [1_000, 200]) {
      const again = await call(h, 'lease', { target, consumerId: 'c', max, visibilityMs: 5_000, waitMs: 0 })
      await call(h, 'nack', { target, leaseIds: again.messages.map((m: { leaseId: string }) => m.leaseId) })
    }
    expect(await call(h, 'purgeDead', { target })).toEqual({ removed: 1_200, more: false })
    expect(await call(h, 'purge', { target })).toEqual({ removed: 300, more: false })
    expect((await call(h, 'stats', { target })).messages).toBe(0)
  })

  it('redrives dead letters older than the TTL from format level 19: their TTL counts from the redrive', async () => {
    const delivered = async (formatLevel: number) => {
      const group = await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1, messageTtlMs: 1_000 })
      const h = queueHandlers(node(group, formatLevel))
      await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('old')] })
      const leased = await call(h, 'lease', {
        target,
        consumerId: 'c',
        max: 1,
        visibilityMs: 5_000,
        waitMs: 0,
      })
      await call(h, 'nack', { target, leaseIds: leased.messages.map((m: { leaseId: string }) => m.leaseId) })
      group.now += 5_000 // dead for 5 s: older than its TTL
      expect(await call(h, 'redrive', { target, max: 0 })).toMatchObject({ moved: 1, more: false })
      const again = await call(h, 'lease', {
        target,
        consumerId: 'c',
        max: 1,
        visibilityMs: 5_000,
        waitMs: 0,
      })
      return again.messages.length
    }
    expect(await delivered(FORMAT_LEVEL_TTL_REDRIVE_LINES)).toBe(1)
    expect(await delivered(FORMAT_LEVEL_TTL_REDRIVE_LINES - 1)).toBe(0) // deleted at the lease, as before
  })

  it('answers a purge or redrive with more at its time bound, one batch at least; redrives at most the dead at its start', async () => {
    const group = await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1 })
    const h = queueHandlers(node(group), { batchCallMs: 0 })
    for (let batch = 0; batch < 3; batch++) {
      const messages = Array.from({ length: 500 }, (_, i) => message(`m${batch}.${i}`))
      await call(h, 'produce', { target, producerId: '', sequence: 0, messages })
    }
    // A time bound of 0: one entry of 1,000 a call, then more.
    expect(await call(h, 'purge', { target })).toEqual({ removed: 1_000, more: true })
    expect(await call(h, 'purge', { target })).toEqual({ removed: 500, more: false })
    await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [message('d1'), message('d2')],
    })
    await leaseAndNack(h, 2)
    // Two dead: a redrive of up to 1,000 moves those two, not more.
    expect(await call(h, 'redrive', { target, max: 1_000 })).toEqual({
      moved: 2,
      more: false,
      throughPlace: 0,
    })
    expect(await call(h, 'redrive', { target, max: 1_000 })).toEqual({
      moved: 0,
      more: false,
      throughPlace: 0,
    })
  })

  it('ends a purge or redrive whose queue was deleted and created again meanwhile, touching nothing of the new one', async () => {
    const config = { messageBytesMax: 100, maxDeliveries: 1 }
    const group = await localGroup(true, config)
    await group.propose({ type: 'open', queue: 'jobs-2', partition: 0, config })
    /** A node where `jobs` is stored as `jobs` for its first `first` lookups, then as `jobs-2`. */
    const recreatedAfter = (first: number): DataNodePort => {
      let looked = 0
      return {
        formatLevel: () => 2,
        groupFor: async (q, p) =>
          q === 'jobs' && p === 0
            ? { group, storedAs: looked++ < first ? 'jobs' : 'jobs-2', config: JOBS_CONFIG }
            : undefined,
        routeEpoch: () => 4,
      }
    }
    const old = queueHandlers(recreatedAfter(Number.POSITIVE_INFINITY))
    const fresh = queueHandlers(recreatedAfter(0))
    const produce = async (h: ReturnType<typeof queueHandlers>, bodies: string[]) =>
      call(h, 'produce', { target, producerId: '', sequence: 0, messages: bodies.map((b) => message(b)) })
    for (let batch = 0; batch < 3; batch++)
      await produce(
        old,
        Array.from({ length: 500 }, (_, i) => `m${batch}.${i}`),
      )
    await produce(fresh, ['n1', 'n2', 'n3'])
    // The first entry (a full batch) purges the old queue; the next would be the new one's.
    expect(await call(queueHandlers(recreatedAfter(1)), 'purge', { target })).toEqual({
      removed: 1_000,
      more: false,
    })
    expect((await call(fresh, 'stats', { target })).messages).toBe(3)
    // Dead letters in both; the redrive located the old queue, its first entry the new one.
    await call(old, 'purge', { target })
    await produce(old, ['d1', 'd2'])
    await leaseAndNack(old, 2)
    await leaseAndNack(fresh, 2)
    expect(group.machine.deadCount('jobs-2', 0)).toBe(2)
    expect(await call(queueHandlers(recreatedAfter(1)), 'redrive', { target, max: 1_000 })).toEqual({
      moved: 0,
      more: false,
      throughPlace: 0,
    })
    expect(group.machine.deadCount('jobs-2', 0)).toBe(2)
    expect(group.machine.deadCount('jobs', 0)).toBe(2)
  })

  it('answers where a redrive starting now ends, moving nothing (placeOnly, from format level 24)', async () => {
    const asked = async (formatLevel: number) => {
      const group = await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1 })
      const h = queueHandlers(node(group, formatLevel))
      const none = await call(h, 'redrive', { target, max: 10, placeOnly: true })
      await call(h, 'produce', {
        target,
        producerId: '',
        sequence: 0,
        messages: [message('a'), message('b')],
      })
      await leaseAndNack(h, 2)
      const two = await call(h, 'redrive', { target, max: 10, placeOnly: true })
      return { none, two, dead: (await call(h, 'stats', { target })).weights[0].dead }
    }
    expect(await asked(FORMAT_LEVEL_REDRIVE_SPAN)).toEqual({
      none: { moved: 0, more: false, throughPlace: 0 },
      two: { moved: 0, more: false, throughPlace: 2 },
      dead: 2,
    })
    // Below the level it is a redrive like any (as a server of an earlier version does).
    expect(await asked(FORMAT_LEVEL_REDRIVE_SPAN - 1)).toMatchObject({
      two: { moved: 2, throughPlace: 0 },
      dead: 0,
    })
  })

  it('redrives, across calls, only the dead at its first call (from format level 24): one that died again stays', async () => {
    const redriven = async (formatLevel: number) => {
      const group = await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1 })
      const h = queueHandlers(node(group, formatLevel), { batchCallMs: 0 })
      const messages = Array.from({ length: 1_500 }, (_, i) => message(`m${i}`))
      for (let i = 0; i < 3; i++) {
        await call(h, 'produce', {
          target,
          producerId: '',
          sequence: 0,
          messages: messages.slice(i * 500, i * 500 + 500),
        })
      }
      const kill = async (max: number) => {
        const leased = await call(h, 'lease', {
          target,
          consumerId: 'c',
          max,
          visibilityMs: 5_000,
          waitMs: 0,
        })
        await call(h, 'nack', {
          target,
          leaseIds: leased.messages.map((m: { leaseId: string }) => m.leaseId),
        })
      }
      await kill(1_000)
      await kill(500)
      // A time bound of 0: the first call takes one entry of 1,000 and answers more.
      const first = await call(h, 'redrive', { target, max: 2_000 })
      expect(first).toMatchObject({ moved: 1_000, more: true })
      // The 1,000 redriven fail at once and die again, behind the 500 still dead.
      await kill(1_000)
      const next = await call(h, 'redrive', { target, max: 1_000, throughPlace: first.throughPlace })
      return {
        throughPlace: first.throughPlace,
        moved: next.moved,
        dead: (await call(h, 'stats', { target })).weights[0].dead,
      }
    }
    // The next call moves the 500 left of the first call's, not the 1,000 that died again.
    expect(await redriven(FORMAT_LEVEL_REDRIVE_SPAN)).toEqual({
      throughPlace: 1_500,
      moved: 500,
      dead: 1_000,
    })
    // Below the level it counts afresh: it takes the 1,000 that died again before the 500 left.
    expect(await redriven(FORMAT_LEVEL_REDRIVE_SPAN - 1)).toEqual({
      throughPlace: 0,
      moved: 1_000,
      dead: 500,
    })
  })

  it('keeps a purge to its time bound when the wall clock steps back', async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group), { batchCallMs: 0 })
    for (let batch = 0; batch < 3; batch++) {
      const messages = Array.from({ length: 500 }, (_, i) => message(`m${batch}.${i}`))
      await call(h, 'produce', { target, producerId: '', sequence: 0, messages })
    }
    // Each read of the wall clock is an hour before the previous one: by it no time passes.
    let wallMs = Date.now()
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => {
      wallMs -= 3_600_000
      return wallMs
    })
    try {
      expect(await call(h, 'purge', { target })).toEqual({ removed: 1_000, more: true })
    } finally {
      wall.mockRestore()
    }
  })

  it("fixes a delay from the group's time when the leader's clock is behind it", async () => {
    const group = await localGroup()
    const h = h0(group)
    const lease = async () =>
      (await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })).messages
    group.now = 10_000
    expect(await lease()).toEqual([]) // the partition applied an entry at 10,000
    // A new leader whose clock is 3 s behind: a 2-s delay still ends at 12,000, not at 9,000.
    group.now = 7_000
    await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [{ ...message('d'), delayMs: 2_000 }],
    })
    group.now = 10_001
    expect(await lease()).toEqual([])
    group.now = 12_000
    expect((await lease()).map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual(['d'])
  })

  it("fixes a delay in the partition's time when a move gave it a clock apart from the group's", async () => {
    const group = await localGroup()
    const h = h0(group)
    const lease = async () =>
      (await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })).messages
    // jobs/0 moved in from a group whose clock is 500 s ahead of this one's (now 1,000).
    await group.propose({ type: 'drop', queue: 'jobs', partition: 0 })
    const chunk = { moveId: 1, session: 's', config: { messageBytesMax: 100 }, pairs: [] }
    await group.propose({ type: 'import', queue: 'jobs', partition: 0, ...chunk, seq: 0, last: false })
    await group.propose({
      type: 'import',
      queue: 'jobs',
      partition: 0,
      ...chunk,
      seq: 1,
      last: true,
      clockMs: 501_000,
    })
    await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [{ ...message('d'), delayMs: 2_000 }],
    })
    // Fixed from the group's clock (a delay ending at 3,000), it would be long past for the partition.
    group.now = 2_999
    expect(await lease()).toEqual([])
    group.now = 3_000
    const [leased] = await lease()
    expect(new TextDecoder().decode(leased.body)).toBe('d')
    expect(leased.deadlineMs).toBe(508_000)
  })

  it('gives a released lease back uncounted from format level 16, as a plain nack below it', async () => {
    for (const [level, dead] of [
      [FORMAT_LEVEL_RETRY_BACKOFF, 0],
      [FORMAT_LEVEL_RETRY_BACKOFF - 1, 1],
    ] as const) {
      const h = queueHandlers(node(await localGroup(true, { messageBytesMax: 100, maxDeliveries: 1 }), level))
      await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('r')] })
      const leased = await call(h, 'lease', {
        target,
        consumerId: 'c',
        max: 1,
        visibilityMs: 5_000,
        waitMs: 0,
      })
      await call(h, 'nack', { target, leaseIds: [leased.messages[0].leaseId], release: true })
      expect((await call(h, 'stats', { target })).weights[0]).toMatchObject({ dead, ready: 1 - dead })
    }
  })

  it('purges ready messages, leaving leased ones', async () => {
    const h = queueHandlers(node(await localGroup()))
    await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [message('a'), message('b'), message('c', 4)],
    })
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 0 })
    expect(await call(h, 'purge', { target })).toEqual({ removed: 2, more: false })
    expect((await call(h, 'stats', { target })).messages).toBe(1)
    const acked = await call(h, 'ack', { target, leaseIds: [leased.messages[0].leaseId] })
    expect(acked.results[0].outcome).toBe(1)
  })

  it('wakes a long poll when a message arrives', async () => {
    const h = queueHandlers(node(await localGroup()))
    const started = Date.now()
    const polling = call(h, 'lease', { target, consumerId: 'c', max: 10, visibilityMs: 5_000, waitMs: 5_000 })
    setTimeout(
      () => void call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('late')] }),
      50,
    )
    const leased = await polling
    expect(leased.messages).toHaveLength(1)
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it("wakes a long poll when an ack hands an ordered key's turn on, not at its recheck", async () => {
    const group = await localGroup(true, { messageBytesMax: 100, orderedKeys: 1 })
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 5_000 })
    const keyed = (body: string) => ({ ...message(body), key: 'a' })
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [keyed('a1'), keyed('a2')] })
    const lease = (waitMs: number) =>
      call(h, 'lease', { target, consumerId: 'c', max: 10, visibilityMs: 5_000, waitMs })
    const first = await lease(0)
    expect(first.messages.map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual(['a1'])
    const started = Date.now()
    const polling = lease(4_000) // a2 waits for a1's ack
    setTimeout(() => void call(h, 'ack', { target, leaseIds: [first.messages[0].leaseId] }), 50)
    const second = await polling
    expect(second.messages.map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual(['a2'])
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it('wakes a long poll when a retry backoff or an expired lease falls due, not at its recheck', async () => {
    const group = await localGroup(true, {
      messageBytesMax: 100,
      retryBackoffMinMs: 300,
      retryBackoffMaxMs: 10_000,
    })
    Object.defineProperty(group, 'now', { get: () => Date.now() })
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 5_000 })
    const lease = (waitMs: number, visibilityMs = 5_000) =>
      call(h, 'lease', { target, consumerId: 'c', max: 10, visibilityMs, waitMs })
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('m')] })
    const first = await lease(0)
    await call(h, 'nack', { target, leaseIds: [first.messages[0].leaseId] })
    // Backed off 300 ms (the first attempt): the poll gets it then, not at the 5 s recheck.
    let started = Date.now()
    const second = await lease(4_000, 200)
    expect(second.messages).toHaveLength(1)
    expect(Date.now() - started).toBeGreaterThanOrEqual(250)
    expect(Date.now() - started).toBeLessThan(2_000)
    // Its 200 ms lease expires, then the second attempt's backoff, 600 ms: about 0.8 s.
    started = Date.now()
    const third = await lease(4_000)
    expect(third.messages.map((m: { deliveryCount: number }) => m.deliveryCount)).toEqual([3])
    expect(Date.now() - started).toBeGreaterThanOrEqual(700)
    expect(Date.now() - started).toBeLessThan(2_500)
  })

  it('wakes a long poll when a lease an extend shortened expires, not at its recheck', async () => {
    const group = await localGroup()
    Object.defineProperty(group, 'now', { get: () => Date.now() })
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 5_000 })
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('m')] })
    const held = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 20_000, waitMs: 0 })
    const looks = countLooks(group, 'jobs')
    const started = Date.now()
    const polling = call(h, 'lease', { target, consumerId: 'w', max: 1, visibilityMs: 5_000, waitMs: 4_000 })
    await until(() => looks.sleeps() > 0) // asleep, its partition's due timer at the 20 s deadline
    // The holder shortens its lease to 100 ms (and crashes): the poll gets the message then.
    const extended = await call(h, 'extend', { target, leaseIds: [held.messages[0].leaseId], extendMs: 100 })
    expect(extended.results[0].deadlineMs).toBeLessThan(Date.now() + 1_000)
    const leased = await polling
    expect(leased.messages.map((m: { deliveryCount: number }) => m.deliveryCount)).toEqual([2])
    expect(Date.now() - started).toBeLessThan(2_000)
  })

  it('commits one lease per stale due time, not one per waiter, while a held lease is extended', async () => {
    const group = await localGroup()
    Object.defineProperty(group, 'now', { get: () => Date.now() })
    // A commit takes a few ms, as an fsync does: waiters woken together overlap.
    const apply = group.propose
    group.propose = async (command) => {
      await new Promise((r) => setTimeout(r, 3))
      return apply(command)
    }
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 1_000 })
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('held')] })
    // Leased for 250 ms, extended every ~20 ms: a busy machine may hold the extender up for
    // 200 ms without the lease ending (at 100 ms a loaded CI run saw it end, the message leased).
    const held = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 250, waitMs: 0 })
    const leaseEntries = countLeaseEntries(group)
    // Every extend leaves the partition's next deadline behind (a lower bound) until an apply
    // looks: each stale one wakes the waiters.
    let extending = true
    const extender = (async () => {
      while (extending) {
        await call(h, 'extend', { target, leaseIds: [held.messages[0].leaseId], extendMs: 250 })
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    const waiters = Array.from({ length: 20 }, () =>
      call(h, 'lease', { target, consumerId: 'w', max: 10, visibilityMs: 5_000, waitMs: 2_000 }),
    )
    for (const w of await Promise.all(waiters)) expect(w.messages).toEqual([])
    extending = false
    await extender
    // 20 first rounds, and about one per stale deadline (every ~230 ms): 20 at each, some 200,
    // when every waiter committed its own.
    expect(leaseEntries()).toBeLessThan(80)
  })

  it("takes no delivery tokens back for a cancelled call's leases that a repeat of its attempt was answered", async () => {
    const group = await localGroup()
    // 2 messages a second: a burst of 2.
    const h = queueHandlers(
      node(group, FORMAT_LEVEL_REPEAT_ONLY, () => ({ ...JOBS_CONFIG, partitions: 1, deliveryRate: 2 })),
    )
    await call(h, 'produce', {
      target,
      messages: [message('a'), message('b'), message('c'), message('d')],
    })
    const ask = { target, consumerId: 'c', max: 2, visibilityMs: 60_000, waitMs: 0, attempt: 'at-1' }
    // The first call's lease (the whole burst) is committed; its client gave up meanwhile and
    // asked again under the same attempt, and the repeat is answered those leases (it takes
    // no tokens: they were taken) before the first call notices its cancel.
    const cancelled = fakeCall(ask)
    const propose = group.propose
    let repeat: Promise<{ messages: { leaseId: string }[] }> | undefined
    group.propose = (command) => {
      if (command.type === 'apply' && command.command.type === 'lease' && repeat === undefined) {
        return propose(command).then(async (r) => {
          cancelled.cancel()
          repeat = call(h, 'lease', { ...ask, attemptRepeat: true })
          await repeat
          return r
        }) as ReturnType<typeof propose>
      }
      return propose(command)
    }
    expect((await call(h, 'lease', ask, cancelled)).messages).toEqual([])
    const repeated = await (repeat as Promise<{ messages: { leaseId: string }[] }>)
    group.propose = propose
    expect(repeated.messages).toHaveLength(2) // delivered: the burst is spent
    // So another consumer gets nothing more at once (2 a second, a burst of 2).
    const other = await call(h, 'lease', { ...ask, consumerId: 'd', attempt: 'at-2' })
    expect(other.messages).toHaveLength(0)
  })

  it("paces a rate-limited queue's deliveries: a second's worth at once, then the rate", async () => {
    const group = await localGroup()
    // 20 messages a second over 2 partitions: 10 a second from this one.
    const h = queueHandlers(node(group, 2, () => ({ ...JOBS_CONFIG, partitions: 2, deliveryRate: 20 })))
    const many = Array.from({ length: 40 }, (_, i) => message(`m${i}`))
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: many })
    const lease = async (waitMs: number) =>
      (await call(h, 'lease', { target, consumerId: 'c', max: 100, visibilityMs: 30_000, waitMs })).messages
        .length as number
    expect(await lease(0)).toBe(10) // the burst
    expect(await lease(0)).toBe(0)
    const started = Date.now()
    let got = 0
    while (Date.now() - started < 1_000) got += await lease(1_000 - (Date.now() - started))
    // One every 100 ms: about 10 in the second (a loose bound: a busy machine delays timers).
    expect(got).toBeGreaterThanOrEqual(7)
    expect(got).toBeLessThanOrEqual(11)
    // Lifted, the rest comes at once.
    const free = queueHandlers(node(group, 2, () => ({ ...JOBS_CONFIG, partitions: 2, deliveryRate: 0 })))
    const rest = await call(free, 'lease', {
      target,
      consumerId: 'c',
      max: 100,
      visibilityMs: 30_000,
      waitMs: 0,
    })
    expect(rest.messages).toHaveLength(40 - 10 - got)
  })

  it('commits no empty lease for a waiter that a change wakes when nothing is left to lease', async () => {
    const group = await localGroup()
    const leaseEntries = countLeaseEntries(group)
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 100 })
    const poll = () =>
      call(h, 'lease', { target, consumerId: 'c', max: 10, visibilityMs: 5_000, waitMs: 400 })
    const polls = [poll(), poll(), poll()]
    await new Promise((r) => setTimeout(r, 50))
    expect(leaseEntries()).toBe(3) // each poll's first round commits a lease (it checks the request)
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('one')] })
    const got = (await Promise.all(polls)).map((r) => r.messages.length)
    expect(got.sort()).toEqual([0, 0, 1])
    // One more lease took the message; the other two woke, and at each recheck, and saw nothing.
    expect(leaseEntries()).toBe(4)
  })

  it('wakes only the long polls of the partition a write changed, and one of them for one message', async () => {
    const group = await localGroup()
    await group.propose({ type: 'open', queue: 'other', partition: 0, config: { messageBytesMax: 100 } })
    const looks = countLooks(group, 'jobs')
    const h = queueHandlers(nodeOf(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 10_000 })
    const calls = Array.from({ length: 50 }, () =>
      fakeCall({ target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 10_000 }),
    )
    const answered: number[] = []
    const polls = calls.map((c, i) =>
      call(h, 'lease', c.request, c).then((r) => {
        answered.push(i)
        return r
      }),
    )
    await until(() => looks.sleeps() === 50) // each poll looked at its due time and sleeps
    looks.reset()
    const other = { ...target, queue: 'other' }
    for (let i = 0; i < 20; i++)
      await call(h, 'produce', { target: other, producerId: '', sequence: 0, messages: [message(`o${i}`)] })
    await settleAll()
    // Not one look at jobs's polls (each of the 20 writes woke all 50 before: 1,000 looks).
    expect(looks.lookups()).toBe(0)
    expect(answered).toEqual([])
    // One message to jobs: one poll wakes and takes it; the 49 others are not looked at.
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('one')] })
    await until(() => answered.length === 1)
    await settleAll()
    expect(answered).toHaveLength(1)
    expect(looks.lookups()).toBeLessThanOrEqual(4) // the wake, the woken poll's look, its hand-on
    expect((await polls[answered[0] as number]).messages).toHaveLength(1)
    for (const c of calls) c.cancel()
    for (const r of await Promise.all(polls)) expect(r.messages.length).toBeLessThanOrEqual(1)
  })

  it('bounds the long polls per partition and per group: past them, what is ready at once, else LIMIT_EXCEEDED', async () => {
    const group = await localGroup()
    await group.propose({ type: 'open', queue: 'other', partition: 0, config: { messageBytesMax: 100 } })
    const looks = countLooks(group, 'jobs')
    const leaseEntries = countLeaseEntries(group)
    const h = queueHandlers(nodeOf(group), {
      leaseWaitMsMax: 30_000,
      leaseRecheckMs: 10_000,
      waitersPerPartitionMax: 2,
      waitersPerGroupMax: 2,
    })
    const request = { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 10_000 }
    const calls = [fakeCall(request), fakeCall(request)]
    const polls = calls.map((c) => call(h, 'lease', request, c))
    await until(() => looks.sleeps() === 2)
    const entries = leaseEntries()
    const refusal = async (r: Promise<unknown>) => {
      const error = await r.then(
        () => undefined,
        (e: unknown) => e,
      )
      expect(error, 'the poll is refused').toBeDefined()
      return fromGrpcError(error as never)
    }
    // Nothing ready for them: refused at once, retriable, naming the limit; no lease committed.
    const started = Date.now()
    const onJobs = await refusal(call(h, 'lease', { ...request, waitMs: 500 }))
    expect(onJobs).toMatchObject({ code: 'LIMIT_EXCEEDED', retriable: true })
    expect(onJobs.message).toMatch(/partition jobs\/0 \(waitersPerPartitionMax 2\)/)
    const other = { ...target, queue: 'other' }
    const onOther = await refusal(call(h, 'lease', { ...request, target: other, waitMs: 500 }))
    expect(onOther).toMatchObject({ code: 'LIMIT_EXCEEDED', retriable: true })
    expect(onOther.message).toMatch(/data group 1 \(waitersPerGroupMax 2\)/)
    expect(Date.now() - started).toBeLessThan(400)
    expect(leaseEntries()).toBe(entries)
    // A message ready: such a poll gets it at once, without waiting.
    await call(h, 'produce', { target: other, producerId: '', sequence: 0, messages: [message('o')] })
    const served = await call(h, 'lease', { ...request, target: other, waitMs: 10_000 })
    expect(served.messages).toHaveLength(1)
    expect(Date.now() - started).toBeLessThan(1_000)
    // A poll that ends makes room.
    calls[0]?.cancel()
    expect((await polls[0]).messages).toEqual([])
    const waiting = call(h, 'lease', { ...request, target: other, waitMs: 10_000 })
    await call(h, 'produce', { target: other, producerId: '', sequence: 1, messages: [message('p')] })
    expect((await waiting).messages).toHaveLength(1)
    calls[1]?.cancel()
    await polls[1]
  })

  it("answers a repeated attempt its held leases at once when the long polls' limit is full, not LIMIT_EXCEEDED", async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group, FORMAT_LEVEL_LEASE_ATTEMPTS), {
      leaseWaitMsMax: 30_000,
      leaseRecheckMs: 10_000,
      waitersPerPartitionMax: 1,
    })
    await call(h, 'produce', { target, messages: [message('a')] })
    const ask = { target, consumerId: 'c', max: 1, visibilityMs: 60_000, waitMs: 0, attempt: 'at-1' }
    const first = (await call(h, 'lease', ask)).messages
    expect(first).toHaveLength(1)
    // Another consumer's long poll fills the partition's limit (nothing is ready for it).
    const looks = countLooks(group, 'jobs')
    const other = fakeCall({ ...ask, attempt: 'at-2', waitMs: 10_000 })
    const polling = call(h, 'lease', other.request, other)
    await until(() => looks.sleeps() === 1)
    // The first answer was lost: its repeat, a long poll, gets the leases its attempt holds.
    const again = await call(h, 'lease', { ...ask, waitMs: 5_000, attemptRepeat: true })
    expect(again.messages).toEqual(first)
    other.cancel()
    expect((await polling).messages).toEqual([])
  })

  it('delivers messages falling due together to every waiting poll, not only to the one their due time woke', async () => {
    const group = await localGroup()
    Object.defineProperty(group, 'now', { get: () => Date.now() })
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 5_000 })
    const poll = () =>
      call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 4_000 })
    const polls = [poll(), poll(), poll()]
    await new Promise((r) => setImmediate(r))
    const started = Date.now()
    const delayed = (body: string) => ({ ...message(body), delayMs: 150 })
    await call(h, 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [delayed('a'), delayed('b'), delayed('c')],
    })
    // The due time wakes one poll; what its lease made ready and left goes on to the others
    // (its hand-on, the due timer set again).
    const got = await Promise.all(polls)
    expect(got.map((r) => r.messages.length)).toEqual([1, 1, 1])
    expect(Date.now() - started).toBeLessThan(1_500)
  })

  it('hands the wake of a poll that gives up as it is woken on to the next poll', async () => {
    const group = await localGroup()
    const looks = countLooks(group, 'jobs')
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 5_000 })
    const request = { target, consumerId: 'c', max: 1, visibilityMs: 5_000, waitMs: 4_000 }
    const first = fakeCall(request)
    const firstPoll = call(h, 'lease', request, first)
    await until(() => looks.sleeps() === 1)
    const second = call(h, 'lease', request)
    await until(() => looks.sleeps() === 2)
    // The message wakes the oldest poll, whose client gives up in the same turn (before it leases).
    group.machine.watchReady(() => first.cancel())
    const started = Date.now()
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('one')] })
    expect((await firstPoll).messages).toEqual([])
    expect((await second).messages).toHaveLength(1)
    expect(Date.now() - started).toBeLessThan(1_000)
  })

  it('loses no wake-up under interleaved produces, polls, cancels and slow commits (seeded)', async () => {
    for (const seed of [1, 2, 3]) {
      const prng = new Prng(seed)
      const random = () => prng.float()
      const group = await localGroup()
      await group.propose({ type: 'open', queue: 'other', partition: 0, config: { messageBytesMax: 100 } })
      const apply = group.propose
      // Commits take 0-2 ms, so rounds, wakes and leases interleave.
      group.propose = async (command) => {
        await new Promise((r) => setTimeout(r, Math.floor(random() * 3)))
        return apply(command)
      }
      // The recheck (10 s) is past every bound below: only the wake-ups deliver in time.
      const h = queueHandlers(nodeOf(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 10_000 })
      const total = 60
      const producedAt = new Map<string, number>()
      const latencyMs: number[] = []
      const delivered = new Set<string>()
      const deadline = Date.now() + 8_000
      const polling = new Set<ReturnType<typeof fakeCall>>()
      const consumer = async () => {
        while (delivered.size < total && Date.now() < deadline) {
          const max = 1 + Math.floor(random() * 3)
          const c = fakeCall({ target, consumerId: 'c', max, visibilityMs: 60_000, waitMs: 2_000 })
          // Some clients give up on their poll after a moment.
          const giveUp = random() < 0.2 ? setTimeout(() => c.cancel(), Math.floor(random() * 20)) : undefined
          polling.add(c)
          const r = await call(h, 'lease', c.request, c)
          polling.delete(c)
          clearTimeout(giveUp)
          for (const m of r.messages as { body: Uint8Array }[]) {
            const body = new TextDecoder().decode(m.body)
            expect(delivered.has(body), `seed ${seed}: ${body} delivered twice`).toBe(false)
            delivered.add(body)
            latencyMs.push(Date.now() - (producedAt.get(body) ?? 0))
          }
          // All delivered: the polls still waiting end.
          if (delivered.size === total) for (const p of polling) p.cancel()
        }
      }
      const producer = async () => {
        let n = 0
        for (let seq = 0; n < total; seq++) {
          await new Promise((r) => setTimeout(r, Math.floor(random() * 15)))
          const size = Math.min(total - n, 1 + Math.floor(random() * 4))
          const batch = Array.from({ length: size }, (_, i) => `m${n + i}`)
          n += size
          for (const b of batch) producedAt.set(b, Date.now())
          await call(h, 'produce', {
            target,
            producerId: '',
            sequence: seq,
            messages: batch.map((b) => message(b)),
          })
          // Writes of another partition of the group in between wake nobody here.
          if (random() < 0.5)
            await call(h, 'produce', { target: { ...target, queue: 'other' }, messages: [message('x')] })
        }
      }
      await Promise.all([producer(), ...Array.from({ length: 6 }, consumer)])
      expect(delivered.size, `seed ${seed}`).toBe(total)
      expect(Math.max(...latencyMs), `seed ${seed}: latencies ${latencyMs}`).toBeLessThan(1_000)
    }
  })

  it('hands nothing out of a paused queue, commits no lease for it, and resumes within a recheck', async () => {
    const group = await localGroup()
    const leaseEntries = countLeaseEntries(group)
    let paused = true
    const h = queueHandlers(
      node(group, 2, () => ({ ...JOBS_CONFIG, paused })),
      { leaseWaitMsMax: 30_000, leaseRecheckMs: 50 },
    )
    // Produce, peek and stats work as usual.
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('a'), message('b')] })
    expect((await call(h, 'listReady', { target, limit: 10 })).messages).toHaveLength(2)
    const request = { target, consumerId: 'c', max: 10, visibilityMs: 5_000 }
    expect((await call(h, 'lease', { ...request, waitMs: 0 })).messages).toEqual([])
    const started = Date.now()
    expect((await call(h, 'lease', { ...request, waitMs: 200 })).messages).toEqual([])
    expect(Date.now() - started).toBeGreaterThanOrEqual(190)
    expect(leaseEntries()).toBe(0)
    // A produce does not end the paused wait; resuming does, at the next recheck.
    const polling = call(h, 'lease', { ...request, waitMs: 5_000 })
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('c')] })
    await new Promise((r) => setTimeout(r, 120))
    expect(leaseEntries()).toBe(0)
    const resumedAt = Date.now()
    paused = false
    const leased = await polling
    expect(leased.messages.map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual([
      'a',
      'b',
      'c',
    ])
    expect(Date.now() - resumedAt).toBeLessThan(1_000)
    // Leases given out before a pause can still be acked.
    paused = true
    const acked = await call(h, 'ack', {
      target,
      leaseIds: leased.messages.map((m: { leaseId: string }) => m.leaseId),
    })
    expect(acked.results.map((r: { outcome: number }) => r.outcome)).toEqual([1, 1, 1])
  })

  it('ends an empty long poll at its wait', async () => {
    const h = queueHandlers(node(await localGroup()), { leaseWaitMsMax: 30_000, leaseRecheckMs: 50 })
    const leased = await call(h, 'lease', {
      target,
      consumerId: 'c',
      max: 10,
      visibilityMs: 5_000,
      waitMs: 150,
    })
    expect(leased.messages).toEqual([])
  })

  it('ends an empty long poll at its wait when the wall clock steps back', async () => {
    const h = queueHandlers(node(await localGroup()), { leaseWaitMsMax: 30_000, leaseRecheckMs: 20 })
    const request = { target, consumerId: 'c', max: 10, visibilityMs: 5_000, waitMs: 100 }
    const server = fakeCall(request)
    // Each read of the wall clock is a second before the previous one.
    let wallMs = Date.now()
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => {
      wallMs -= 1_000
      return wallMs
    })
    // Bounded: a poll that does not end by itself is cancelled after 2 s.
    const stop = setTimeout(() => server.cancel(), 2_000)
    try {
      const started = performance.now()
      expect((await call(h, 'lease', request, server)).messages).toEqual([])
      expect(performance.now() - started).toBeLessThan(1_000)
    } finally {
      clearTimeout(stop)
      wall.mockRestore()
    }
  })

  it('ends a long poll when the client cancels it, and gives back what a lease took after the cancel', async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 1_000 })
    const request = { target, consumerId: 'c', max: 10, visibilityMs: 60_000, waitMs: 10_000 }
    const waiting = fakeCall(request)
    const started = Date.now()
    const polling = call(h, 'lease', request, waiting)
    setTimeout(() => waiting.cancel(), 50)
    expect((await polling).messages).toEqual([])
    expect(Date.now() - started).toBeLessThan(1_000)

    // The client cancels while the lease that found a message is being committed: the message
    // is nacked at once, ready for the next consumer, not held for its 60-s visibility.
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('kept')] })
    const leasing = fakeCall(request)
    const propose = group.propose
    group.propose = (command) => {
      if (command.type === 'apply' && command.command.type === 'lease') leasing.cancel()
      return propose(command)
    }
    expect((await call(h, 'lease', request, leasing)).messages).toEqual([])
    group.propose = propose
    const next = await call(h, 'lease', { ...request, consumerId: 'd', waitMs: 0 })
    expect(next.messages.map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual(['kept'])
    // A call cancelled before it began leases nothing.
    const late = fakeCall(request)
    late.cancel()
    await call(h, 'produce', { target, producerId: '', sequence: 1, messages: [message('more')] })
    expect((await call(h, 'lease', request, late)).messages).toEqual([])
    expect((await call(h, 'lease', { ...request, waitMs: 0 })).messages).toHaveLength(1)
  })

  it('leases again at once when a lease found only messages past their TTL, not after the recheck', async () => {
    const group = await localGroup()
    await group.propose({
      type: 'apply',
      queue: 'jobs',
      partition: 0,
      command: { type: 'configure', config: { messageTtlMs: 1_000 } },
    })
    await call(h0(group), 'produce', {
      target,
      producerId: '',
      sequence: 0,
      messages: [message('a'), message('b'), message('c')],
    })
    group.now = 1_500
    await call(h0(group), 'produce', { target, producerId: '', sequence: 1, messages: [message('young')] })
    group.now = 2_000 // a, b and c are 1,000 ms old: past the TTL
    const h = queueHandlers(node(group), { leaseWaitMsMax: 30_000, leaseRecheckMs: 5_000 })
    const started = Date.now()
    const leased = await call(h, 'lease', {
      target,
      consumerId: 'c',
      max: 2,
      visibilityMs: 5_000,
      waitMs: 5_000,
    })
    expect(leased.messages.map((m: { body: Uint8Array }) => new TextDecoder().decode(m.body))).toEqual([
      'young',
    ])
    expect(Date.now() - started).toBeLessThan(1_000)
  })

  it('answers with typed errors and changes nothing', async () => {
    const group = await localGroup()
    const h = queueHandlers(node(group))
    await expect(
      call(h, 'produce', { target: { ...target, partition: 3 }, messages: [message('x')] }),
    ).rejects.toMatchObject({
      code: 9,
      details: expect.stringMatching(/holds no replica of jobs\/3/),
    })
    // Over the queue's size limit in the route (150): refused before it is proposed.
    await expect(call(h, 'produce', { target, messages: [message('x'.repeat(200))] })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(
        /message 0: its body is 200 bytes; the queue's message size limit is 150 bytes/,
      ),
    })
    // Over the partition's own (100), within the route's: INVALID_ARGUMENT at apply (retrying
    // cannot help), nothing stored.
    await expect(call(h, 'produce', { target, messages: [message('x'.repeat(120))] })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/message 0 is 120 bytes .* the limit is 100/),
    })
    await expect(call(h, 'lease', { target, consumerId: 'c', max: 0, waitMs: 0 })).rejects.toMatchObject({
      code: 3,
    })
    await expect(call(h, 'produce', { messages: [message('x')] })).rejects.toMatchObject({ code: 3 })
    const stats = await call(h, 'stats', { target })
    expect(stats.messages).toBe(0)
    const follower = queueHandlers(node(await localGroup(false)))
    await expect(call(follower, 'produce', { target, messages: [message('x')] })).rejects.toMatchObject({
      code: 14,
    })
  })
})

describe('queue handlers: checks before a proposal', () => {
  /**
   * Handlers over jobs/0 (route config JOBS_CONFIG, epoch 4: one partition) whose group counts
   * what it is asked to propose, with the ProducerOrder and the node's lookups in view.
   */
  async function checked(messageBytesMax?: number) {
    const group = await localGroup(true, { messageBytesMax: messageBytesMax ?? 100 })
    const proposals: string[] = []
    const propose = group.propose
    group.propose = (command) => {
      proposals.push(command.type === 'apply' ? command.command.type : command.type)
      return propose(command)
    }
    const lookups: string[] = []
    const config = { ...JOBS_CONFIG, messageBytesMax: messageBytesMax ?? JOBS_CONFIG.messageBytesMax }
    const base = node(group, 2, () => config)
    const port: DataNodePort = {
      ...base,
      groupFor: (q, p, epoch) => {
        lookups.push(`${q.length > 20 ? `${q.length} chars` : q}/${p}`)
        return base.groupFor(q, p, epoch)
      },
    }
    const producerOrder = new ProducerOrder()
    return { group, h: queueHandlers(port, {}, { producerOrder }), proposals, lookups, producerOrder }
  }

  /** The error a call failed with, as the client reads it (code, message, facts). */
  const failure = async (promise: Promise<unknown>) => {
    const error = await promise.then(
      () => expect.unreachable('the call succeeded'),
      (e: unknown) => e,
    )
    return fromGrpcError(error as Parameters<typeof fromGrpcError>[0])
  }

  it('refuses what the partition would refuse at apply, before proposing it or keeping a producer lane', async () => {
    const { h, proposals, lookups, producerOrder } = await checked()
    const at = (m: Partial<ReturnType<typeof message>>) => ({ ...message('x'), ...m })
    const produce = (fields: Record<string, unknown>) => ({ target, producerId: '', sequence: 0, ...fields })
    const many = <T>(n: number, f: (i: number) => T) => Array.from({ length: n }, (_, i) => f(i))
    const refused: [keyof QueueServer, unknown, RegExp, number?][] = [
      [
        'ack',
        { target, leaseIds: many(1001, (i) => `${i + 1}.1`) },
        /^ack of 1001 lease_ids exceeds the limit of 1000/,
      ],
      [
        'ack',
        { target, leaseIds: ['1.1', '9'.repeat(1 << 20)] },
        /^lease_ids\[1\] is 1048576 characters long; a lease id has at most 64$/,
      ],
      [
        'nack',
        { target, leaseIds: ['1.1'], delayMs: 8 * 86_400_000 },
        /^delay_ms must be an integer from 0 to 604800000/,
      ],
      [
        'extend',
        { target, leaseIds: many(1001, (i) => `${i + 1}.1`), extendMs: 1_000 },
        /^extend of 1001 lease_ids/,
      ],
      [
        'extend',
        { target, leaseIds: ['1.1'], extendMs: 13 * 3_600_000 },
        /^extend_ms must be an integer from 1 to 43200000/,
      ],
      [
        'produce',
        produce({ messages: many(1001, () => message('x')) }),
        /^produce of 1001 messages exceeds the batch limit of 1000/,
      ],
      [
        'produce',
        produce({ messages: [message('ok'), at({ key: 'k'.repeat(300) })] }),
        /^message 1: key is 300 characters long; the limit is 256 UTF-8 bytes$/,
        1,
      ],
      [
        'produce',
        produce({ messages: [at({ key: '€'.repeat(100) })] }),
        /^message 0: key is 300 UTF-8 bytes long; the limit is 256$/,
        0,
      ],
      [
        'produce',
        produce({ messages: [at({ dedupKey: 'd'.repeat(257) })] }),
        /^message 0: dedup_key is 257 characters/,
        0,
      ],
      [
        'produce',
        produce({ messages: [at({ weight: 1001 })] }),
        /^message 0: weight \(0 = default\) must be an integer from 1 to 1000, got 1001/,
        0,
      ],
      // Fixed as an absolute time at the leader, it came back as "not a non-negative safe
      // integer: 9008995435981566", naming neither the field nor the limit.
      [
        'produce',
        produce({ messages: [at({ delayMs: 9_007_199_254_740_000 })] }),
        /^message 0: delay_ms must be an integer from 0 to 604800000, got 9007199254740000$/,
        0,
      ],
      [
        'produce',
        produce({ messages: [message('x'.repeat(151))] }),
        /^message 0: its body is 151 bytes; the queue's message size limit is 150 bytes \(its message_bytes_max: `mq queue update --max-message-bytes` sets it\)$/,
        0,
      ],
      [
        'produce',
        produce({ messages: [at({ headers: { h: 'v'.repeat(140) }, key: 'k'.repeat(9) })] }),
        /^message 0 is 151 bytes \(body \+ headers \+ key\)/,
        0,
      ],
      // A producer id of 1 MiB, pipelining (base below its sequence): no lane is made for it.
      [
        'produce',
        produce({ producerId: 'p'.repeat(1 << 20), sequence: 5, sequenceBase: 3, messages: [message('x')] }),
        /^producer_id is 1048576 characters long; the limit is 256 UTF-8 bytes$/,
      ],
      [
        'produce',
        produce({ producerId: 'p', sequence: 5, sequenceBase: 6, messages: [message('x')] }),
        /^sequence_base \(of sequence 5\) must be an integer from 0 to 5, got 6$/,
      ],
      [
        'produce',
        produce({ producerId: 'p', sequence: -1, messages: [message('x')] }),
        /^sequence must be an integer from 0/,
      ],
      [
        'lease',
        { target, consumerId: '', max: 1, visibilityMs: 0, waitMs: 0 },
        /^consumer_id must be set \(1 to 256 UTF-8 bytes\)$/,
      ],
      [
        'lease',
        { target, consumerId: 'c'.repeat(257), max: 1, visibilityMs: 0, waitMs: 0 },
        /^consumer_id is 257 characters long/,
      ],
      [
        'lease',
        { target, consumerId: 'c', max: 1001, visibilityMs: 0, waitMs: 0 },
        /^max must be an integer from 1 to 1000, got 1001$/,
      ],
      [
        'lease',
        { target, consumerId: 'c', max: 1, visibilityMs: 13 * 3_600_000, waitMs: 0 },
        /^visibility_ms \(0 = the queue default\) must be an integer from 1 to 43200000/,
      ],
    ]
    for (const [method, request, details, messageIndex] of refused) {
      const e = await failure(call(h, method, request))
      expect([method, e.code, e.message]).toEqual([
        method,
        'INVALID_ARGUMENT',
        expect.stringMatching(details),
      ])
      expect(e.facts.messageIndex).toBe(messageIndex)
    }
    // Nothing was proposed, and no producer lane was made for a request that was refused.
    expect(proposals).toEqual([])
    expect(producerOrder.size).toBe(0)
    // Only the size needs the queue's config: the other checks come before the partition is located.
    expect(lookups).toEqual(['jobs/0', 'jobs/0'])
  })

  it('takes requests at the limits', async () => {
    const { h, proposals, producerOrder } = await checked(1024)
    const messages = Array.from({ length: 1000 }, (_, i) => ({
      ...message(String(i), i === 0 ? 0 : 1000),
      key: i === 1 ? '€'.repeat(85) + 'k' : '', // 256 bytes
      dedupKey: i === 2 ? 'd'.repeat(256) : '',
      delayMs: i === 3 ? 604_800_000 : 0,
    }))
    const produced = await call(h, 'produce', {
      target,
      producerId: 'p'.repeat(256),
      sequence: 7,
      sequenceBase: 7,
      messages,
    })
    expect(produced.ids).toHaveLength(1000)
    expect(producerOrder.size).toBe(1)
    const leased = await call(h, 'lease', {
      target,
      consumerId: 'c'.repeat(256),
      max: 1000,
      visibilityMs: 43_200_000,
      waitMs: 0,
    })
    // All but the delayed one.
    expect(leased.messages).toHaveLength(999)
    const leaseIds: string[] = leased.messages.map((m: { leaseId: string }) => m.leaseId)
    const extended = await call(h, 'extend', {
      target,
      leaseIds: [...leaseIds, '1'.repeat(20) + '.' + '1'.repeat(19)],
      extendMs: 43_200_000,
    })
    // A lease id of 40 characters is taken (and, not one the partition handed out, unknown).
    expect(extended.results.map((r: { outcome: number }) => r.outcome)).toEqual([...leaseIds.map(() => 1), 2])
    const nacked = await call(h, 'nack', { target, leaseIds: leaseIds.slice(0, 4), delayMs: 604_800_000 })
    expect(nacked.results).toHaveLength(4)
    expect(proposals).toEqual(['enqueue', 'lease', 'extend', 'nack'])
  })

  it('leaves a produced message room for the two headers its copy to a dead-letter queue gets', async () => {
    const { h, proposals } = await checked(16_384)
    const headers = (n: number, more: Record<string, string> = {}) => ({
      ...Object.fromEntries(Array.from({ length: n }, (_, i) => [`h${i}`, ''])),
      ...more,
    })
    const produce = (messages: unknown[]) =>
      call(h, 'produce', { target, producerId: '', sequence: 0, messages })
    // 999 or 1,000 (the request guard's bound) were taken, and the copy, with 1,001 or 1,002,
    // was refused by the dead-letter queue: the message stayed in its dead-letter list for good.
    const e = await failure(produce([message('ok'), { ...message('x'), headers: headers(999) }]))
    expect([e.code, e.message, e.facts.messageIndex]).toEqual([
      'INVALID_ARGUMENT',
      expect.stringMatching(/^message 1 has 999 headers; the limit is 998 \(besides mq-dead-letter-source/),
      1,
    ])
    expect(proposals).toEqual([])
    // 998 of its own; and the copy of such a message, the forwarder's two on top.
    const copy = headers(998, {
      [DEAD_LETTER_SOURCE_HEADER]: 'jobs/0/1',
      [DEAD_LETTER_DELIVERIES_HEADER]: '5',
    })
    const produced = await produce([
      { ...message('a'), headers: headers(998) },
      { ...message('b'), headers: copy },
    ])
    expect(produced.ids).toHaveLength(2)
  })

  it('refuses a queue name no queue can have or a partition past the largest count, without looking the route up', async () => {
    const { h, proposals, lookups } = await checked()
    const long = await failure(
      call(h, 'ack', { target: { ...target, queue: 'q'.repeat(4 << 20) }, leaseIds: ['1.1'] }),
    )
    expect([long.code, long.message]).toEqual([
      'INVALID_ARGUMENT',
      'target.queue is 4194304 characters long; no queue name is longer than 200',
    ])
    const invalid = await failure(
      call(h, 'ack', { target: { ...target, queue: 'no such queue!' }, leaseIds: ['1.1'] }),
    )
    expect([invalid.code, invalid.message]).toEqual([
      'INVALID_ARGUMENT',
      `target.queue: queue name "no such queue!" may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit`,
    ])
    const beyond = await failure(call(h, 'stats', { target: { ...target, partition: 256 } }))
    expect([beyond.code, beyond.message]).toEqual([
      'INVALID_ARGUMENT',
      'target.partition of queue jobs must be an integer from 0 to 255, got 256',
    ])
    const none = await failure(call(h, 'lease', { consumerId: 'c', max: 1, visibilityMs: 0, waitMs: 0 }))
    expect(none.code).toBe('INVALID_ARGUMENT')
    expect(lookups).toEqual([])
    expect(proposals).toEqual([])
  })

  it('answers an empty Produce as a send there: refused for a partition this node holds no replica of, proposing nothing', async () => {
    const { h, proposals, lookups } = await checked()
    const empty = { producerId: '', sequence: 0, messages: [] }
    // Until a review (2026-12-07) it was answered ok whatever the target: an empty send to a
    // queue that does not exist, or to a follower, seemed to succeed.
    const unknown = await failure(call(h, 'produce', { ...empty, target: { ...target, queue: 'nope' } }))
    expect([unknown.code, unknown.message]).toEqual([
      'STALE_ROUTE',
      'this node holds no replica of nope/0; refresh the route (epoch 4)',
    ])
    expect(await call(h, 'produce', { ...empty, target })).toMatchObject({ ids: [], duplicate: false })
    expect(lookups).toEqual(['nope/0', 'jobs/0'])
    expect(proposals).toEqual([])
  })

  it("refuses a partition that the node's route of the request's epoch lacks: INVALID_ARGUMENT naming the range, not STALE_ROUTE", async () => {
    const group = await localGroup()
    const lookups: number[] = []
    // The node holds the route of jobs at epoch 4 (one partition); a lookup for a newer epoch
    // fetches it (epoch 6, still one partition).
    let known = { routeEpoch: 4, partitions: [{ partition: 0 }] }
    const base = node(group)
    const h = queueHandlers({
      ...base,
      groupFor: async (q, p, epoch) => {
        lookups.push(epoch)
        if (epoch > known.routeEpoch) known = { ...known, routeEpoch: 6 }
        return base.groupFor(q, p, epoch)
      },
      knownRoute: (q) => (q === 'jobs' ? known : undefined),
    })
    const send = (partition: number, routeEpoch: number) =>
      failure(
        call(h, 'produce', { target: { queue: 'jobs', partition, routeEpoch }, messages: [message('x')] }),
      )
    // The route the node holds is of the request's epoch: refused at once, no lookup.
    const e = await send(3, 4)
    expect([e.code, e.message]).toEqual([
      'INVALID_ARGUMENT',
      'target.partition 3 is out of range: queue jobs has 1 partition (0 to 0) in route epoch 4',
    ])
    expect(lookups).toEqual([])
    // The request's route is older than the one the node then fetched: a stale client (the queue
    // deleted and created again with fewer partitions), told to refresh as before, not failed.
    expect((await send(3, 5)).code).toBe('STALE_ROUTE')
    expect(lookups).toEqual([5])
    // Of the epoch the node now holds: refused so.
    expect((await send(3, 6)).message).toMatch(/^target.partition 3 is out of range: .* in route epoch 6$/)
    // A request without a route epoch may know of partitions the node's route lacks: as before.
    expect((await send(3, 0)).code).toBe('STALE_ROUTE')
    // A queue the node holds no route of: as before.
    const unknown = await failure(
      call(h, 'produce', {
        target: { queue: 'nope', partition: 0, routeEpoch: 4 },
        messages: [message('x')],
      }),
    )
    expect([unknown.code, unknown.message]).toEqual([
      'STALE_ROUTE',
      'this node holds no replica of nope/0; refresh the route (epoch 4)',
    ])
    expect(await call(h, 'produce', { target, messages: [message('x')] })).toMatchObject({ ids: [1] })
  })
  it('puts a long poll whose partition moved to another group of this node among that group’s polls', async () => {
    // A move between two groups this node leads: a write to the new group must wake the poll
    // (the review of 2026-12-02: it stayed among the old group's polls, woken by its recheck).
    const before = await localGroup()
    const after = await localGroup()
    let current: DataGroupPort = before
    const moving: DataNodePort = {
      formatLevel: () => 2,
      groupFor: async (q, p) =>
        q === 'jobs' && p === 0 ? { group: current, storedAs: 'jobs', config: JOBS_CONFIG } : undefined,
      routeEpoch: () => 4,
    }
    const recheckMs = 400
    const h = queueHandlers(moving, { leaseRecheckMs: recheckMs })
    const polling = call(h, 'lease', {
      target,
      consumerId: 'c',
      max: 10,
      visibilityMs: 5_000,
      waitMs: 10_000,
    })
    await new Promise((r) => setTimeout(r, 50))
    current = after // the move completes
    await new Promise((r) => setTimeout(r, recheckMs + 100)) // at its recheck the poll finds group 2
    const sentAt = Date.now()
    await call(h, 'produce', { target, producerId: '', sequence: 0, messages: [message('moved')] })
    const leased = await polling
    expect(leased.messages).toHaveLength(1)
    expect(Date.now() - sentAt).toBeLessThan(recheckMs / 2) // woken by the write, not the recheck
  })
  it.each([
    ['fenced by a move', { type: 'fence', queue: 'jobs', partition: 0, moveId: 1 }],
    ['retired (its queue deleted)', { type: 'retire', queue: 'jobs', partition: 0 }],
    ['dropped', { type: 'drop', queue: 'jobs', partition: 0 }],
  ] as const)('answers a long poll whose partition is %s at once, not at its recheck', async (_, gone) => {
    const group = await localGroup()
    const recheckMs = 2_000
    const h = queueHandlers(fencingNode(group), { leaseRecheckMs: recheckMs })
    // Three polls: every one of them, not as many as the partition's messages could serve.
    const polling = ['c1', 'c2', 'c3'].map((consumerId) =>
      failure(call(h, 'lease', { target, consumerId, max: 10, visibilityMs: 5_000, waitMs: 10_000 })),
    )
    await new Promise((r) => setTimeout(r, 50))
    const sentAt = Date.now()
    await group.propose(gone)
    expect((await Promise.all(polling)).map((e) => e.code)).toEqual([
      'STALE_ROUTE',
      'STALE_ROUTE',
      'STALE_ROUTE',
    ])
    expect(Date.now() - sentAt).toBeLessThan(recheckMs / 2)
  })
})

describe('request bounds', () => {
  it("are the partitions' own (the protocol's constants, which clients check, match weighted-queue's defaults)", () => {
    expect(LEASE_VISIBILITY_MS_MAX).toBe(QUEUE_CONFIG_DEFAULT.visibilityMsMax)
    expect(MESSAGE_DELAY_MS_MAX).toBe(QUEUE_CONFIG_DEFAULT.delayMsMax)
    expect(MESSAGE_KEY_BYTES_MAX).toBe(NAME_BYTES_MAX)
    expect(CONSUMER_ID_BYTES_MAX).toBe(NAME_BYTES_MAX)
  })
})
