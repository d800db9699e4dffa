import { EventEmitter } from 'node:events'
import { MemoryEngine } from '@mq/kv-storage'
import { FORMAT_LEVEL_RETRY_BACKOFF, NotLeaderError, type QueueConfig, type QueueServer } from '@mq/protocol'
import { describe, expect, it, vi } from 'vitest'
import { ChangeSignal } from './change-signal'
import { encodeDataCommand } from './data-command'
import { DataGroupMachine } from './data-group'
import { wakesLongPolls } from './long-poll-wake'
import { type DataGroupPort, type DataNodePort, queueHandlers } from './queue-handlers'

/** One replica that applies proposals at once (the handlers' contract, not Raft's). */
async function localGroup(
  leader = true,
  config: Record<string, number> = { messageBytesMax: 100 },
): Promise<DataGroupPort & { now: number }> {
  const engine = new MemoryEngine()
  const machine = await DataGroupMachine.open(1, engine)
  const changes = new ChangeSignal()
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
      if (wakesLongPolls(applied.result)) changes.notify()
      return applied.result
    },
    changed: (ms: number, signal: AbortSignal, since: number) => changes.changed(ms, signal, since),
    changes: () => changes.count,
    settled: async () => {},
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
    expect(await call(h, 'redrive', { target, max: 1_200 })).toEqual({ moved: 1_200, more: false })
    expect(await call(h, 'redrive', { target, max: 0 })).toEqual({ moved: 300, more: false }) // 0: up to 1,000
    for (const max of [1_000, 200]) {
      const again = await call(h, 'lease', { target, consumerId: 'c', max, visibilityMs: 5_000, waitMs: 0 })
      await call(h, 'nack', { target, leaseIds: again.messages.map((m: { leaseId: string }) => m.leaseId) })
    }
    expect(await call(h, 'purgeDead', { target })).toEqual({ removed: 1_200, more: false })
    expect(await call(h, 'purge', { target })).toEqual({ removed: 300, more: false })
    expect((await call(h, 'stats', { target })).messages).toBe(0)
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
    const leased = await call(h, 'lease', { target, consumerId: 'c', max: 2, visibilityMs: 5_000, waitMs: 0 })
    await call(h, 'nack', { target, leaseIds: leased.messages.map((m: { leaseId: string }) => m.leaseId) })
    // Two dead: a redrive of up to 1,000 moves those two, not more.
    expect(await call(h, 'redrive', { target, max: 1_000 })).toEqual({ moved: 2, more: false })
    expect(await call(h, 'redrive', { target, max: 1_000 })).toEqual({ moved: 0, more: false })
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
    const held = await call(h, 'lease', { target, consumerId: 'c', max: 1, visibilityMs: 100, waitMs: 0 })
    const leaseEntries = countLeaseEntries(group)
    // Every extend leaves the partition's next deadline behind (a lower bound) until an apply
    // looks: each stale one wakes the waiters.
    let extending = true
    const extender = (async () => {
      while (extending) {
        await call(h, 'extend', { target, leaseIds: [held.messages[0].leaseId], extendMs: 100 })
        await new Promise((r) => setTimeout(r, 20))
      }
    })()
    const waiters = Array.from({ length: 20 }, () =>
      call(h, 'lease', { target, consumerId: 'w', max: 10, visibilityMs: 5_000, waitMs: 2_000 }),
    )
    for (const w of await Promise.all(waiters)) expect(w.messages).toEqual([])
    extending = false
    await extender
    // 20 first rounds, and about one per stale deadline (every ~80 ms): hundreds when every
    // waiter committed its own at each.
    expect(leaseEntries()).toBeLessThan(80)
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
    // Over the partition's size limit: INVALID_ARGUMENT (retrying cannot help), nothing stored.
    await expect(call(h, 'produce', { target, messages: [message('x'.repeat(200))] })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/message 0 is 200 bytes .* the limit is 100/),
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
