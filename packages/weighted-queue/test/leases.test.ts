import type { Engine, KeyRange, KeyValue } from '@mq/kv-storage'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  type CommandResult,
  DirectPartition,
  type EnqueueMessage,
  type InvalidArgumentError,
  type Lease,
  LIST_BYTES_MAX,
  MESSAGE_META_CACHED_BYTES_MAX,
  MESSAGE_METAS_CACHED_MAX,
  PRODUCERS_CACHED_MAX,
  partitionKeySpan,
  type QueueConfig,
} from '../src/index'
import { KeyTag } from '../src/keys'
import { ENGINES, leasesOf } from './harness'

const PREFIX = Uint8Array.of(0x42, 0x07)
const text = (s: string) => new TextEncoder().encode(s)

function idsOf(r: CommandResult): readonly number[] {
  if (r.type !== 'enqueue' && r.type !== 'redriveDead' && r.type !== 'purgeDead' && r.type !== 'purgeReady') {
    throw new Error(`expected ids, got ${JSON.stringify(r)}`)
  }
  return r.ids
}

describe.each(ENGINES)('leases, delays, idempotence and limits on $name', ({ open }) => {
  let engine: Engine
  let dispose: () => Promise<void>
  beforeEach(async () => {
    ;({ engine, dispose } = await open())
  })
  afterEach(async () => {
    await dispose()
  })

  const queue = (config: Partial<QueueConfig> = {}) => DirectPartition.open(engine, PREFIX, config)
  const enqueue = (q: DirectPartition, nowMs: number, ...messages: EnqueueMessage[]) =>
    q.apply({ type: 'enqueue', messages }, nowMs)
  const lease = async (q: DirectPartition, nowMs: number, max = 10, visibilityMs = 100, bytesMax?: number) =>
    leasesOf(
      await q.apply(
        {
          type: 'lease',
          consumerId: 'c1',
          max,
          visibilityMs,
          ...(bytesMax === undefined ? {} : { bytesMax }),
        },
        nowMs,
      ),
    )
  const dump = async () => engine.range({ ...partitionKeySpan(PREFIX) })

  it('leases with ids, delivery counts and deadlines; redelivers an expired lease at the head of its weight', async () => {
    const q = await queue()
    expect(
      idsOf(await enqueue(q, 1000, { body: text('a') }, { body: text('b') }, { body: text('c') })),
    ).toEqual([1, 2, 3])
    const [first] = await lease(q, 1000, 1, 100)
    expect(first).toMatchObject({
      leaseId: '1.1',
      messageId: 1,
      deliveryCount: 1,
      deadlineMs: 1100,
      weight: 1,
    })
    expect(first?.body).toEqual(text('a'))
    expect((await lease(q, 1099, 1)).map((l) => l.messageId)).toEqual([2])
    // at its deadline message 1 is ready again, ahead of message 3
    const again = await lease(q, 1100, 2)
    expect(again.map((l) => [l.messageId, l.deliveryCount, l.leaseId])).toEqual([
      [1, 2, '1.2'],
      [3, 1, '3.1'],
    ])
    // the first lease of message 1 is now expired; the second is live
    expect(await q.apply({ type: 'ack', leaseIds: ['1.1', '1.2', '1.2', '77.1'] }, 1101)).toEqual({
      type: 'ack',
      statuses: ['expired', 'ok', 'unknown', 'unknown'],
    })
  })

  it('bounds what a lease may find: the ready messages, or any when a lease deadline or a delayed one is due', async () => {
    const q = await queue()
    expect(q.leasableAtMost(1000)).toBe(0)
    await enqueue(
      q,
      1000,
      { body: text('a') },
      { body: text('b'), weight: 5 },
      { body: text('later'), notBeforeMs: 1500 },
    )
    expect(q.leasableAtMost(1000)).toBe(2)
    expect((await lease(q, 1000, 10, 100)).map((l) => l.messageId)).toEqual([2, 1])
    // Nothing ready: the leases run to 1100, the delayed message is due at 1500.
    expect(q.leasableAtMost(1050)).toBe(0)
    expect(await lease(q, 1050)).toEqual([])
    expect(q.leasableAtMost(1100)).toBe(Number.POSITIVE_INFINITY)
    expect((await lease(q, 1100, 10, 1000)).map((l) => l.deliveryCount)).toEqual([2, 2])
    expect(q.leasableAtMost(1499)).toBe(0)
    expect(q.leasableAtMost(1500)).toBe(Number.POSITIVE_INFINITY)
    expect((await lease(q, 1500, 10, 1000)).map((l) => l.messageId)).toEqual([3])
    expect(q.leasableAtMost(1600)).toBe(0)
  })

  it("ignores a configure whose configVersion is below the partition's (an older copy of the settings)", async () => {
    const q = await queue({ messageBytesMax: 100, configVersion: 5 })
    await q.apply({ type: 'configure', config: { messageBytesMax: 10, configVersion: 4 } }, 1000)
    expect(q.config).toMatchObject({ messageBytesMax: 100, configVersion: 5 })
    await q.apply({ type: 'configure', config: { messageBytesMax: 10, configVersion: 6 } }, 1000)
    expect(q.config).toMatchObject({ messageBytesMax: 10, configVersion: 6 })
    const r = await enqueue(q, 1000, { body: text('eleven byte') })
    expect(r).toMatchObject({ type: 'rejected', error: { code: 'INVALID_ARGUMENT' } })
    // Unversioned, as before versions existed: applied.
    await q.apply({ type: 'configure', config: { messageBytesMax: 100 } }, 1000)
    expect(q.config).toMatchObject({ messageBytesMax: 100, configVersion: 6 })
  })

  it('lists ready messages without delivering them: heaviest weight first, returned ahead of fresh', async () => {
    const q = await queue()
    await enqueue(
      q,
      1000,
      { body: text('a'), weight: 2 },
      { body: text('b'), weight: 7, key: 'k', headers: { h: 'v' } },
      { body: text('c'), weight: 2 },
      { body: text('later'), weight: 9, notBeforeMs: 5000 },
    )
    const [first] = await lease(q, 1001, 1, 50) // b (weight 7), then it expires: returned
    expect(first?.messageId).toBe(2)
    const listed = await q.listReady(10)
    expect(listed.map((m) => [m.messageId, m.weight, m.deliveryCount])).toEqual([
      [1, 2, 0],
      [3, 2, 0],
    ])
    // At 1051 the lease of b expired: it is ready again (returned), and listed first.
    await q.apply({ type: 'tick' }, 1051)
    const again = await q.listReady(10)
    expect(again.map((m) => [m.messageId, m.deliveryCount])).toEqual([
      [2, 1],
      [1, 0],
      [3, 0],
    ])
    expect(again[0]).toMatchObject({ body: text('b'), key: 'k', headers: { h: 'v' }, enqueuedAtMs: 1000 })
    expect((await q.listReady(2)).map((m) => m.messageId)).toEqual([2, 1])
    // Listing changed nothing: the next lease delivers them (in the scheduler's order across
    // weights, which a listing does not predict), each one delivery further.
    const leased = (await lease(q, 1052, 10)).map((l) => [l.messageId, l.deliveryCount])
    expect(leased.sort((a, b) => (a[0] as number) - (b[0] as number))).toEqual([
      [1, 1],
      [2, 2],
      [3, 1],
    ])
    expect(await q.listReady(10)).toEqual([])
  })

  it('stops a listing of large messages at LIST_BYTES_MAX of bodies (the first one always)', async () => {
    const q = await queue({ messageBytesMax: 4 * 1024 * 1024, maxDeliveries: 1 })
    const big = (fill: number) => new Uint8Array(LIST_BYTES_MAX / 2).fill(fill)
    await enqueue(q, 0, { body: big(1), weight: 3 }, { body: big(2), weight: 3 }, { body: big(3), weight: 2 })
    await enqueue(q, 0, { body: text('small') })
    // 2 MiB + 2 MiB fit; the third (another weight) would pass the budget.
    expect((await q.listReady(10)).map((m) => m.messageId)).toEqual([1, 2])
    // A single message above the budget is still listed.
    const huge = await DirectPartition.open(engine, Uint8Array.of(0x42, 0x09), {
      messageBytesMax: 8 * 1024 * 1024,
    })
    await enqueue(huge, 0, { body: new Uint8Array(LIST_BYTES_MAX + 1) }, { body: text('next') })
    expect((await huge.listReady(10)).map((m) => m.body.length)).toEqual([LIST_BYTES_MAX + 1])
    // Dead letters the same way (each died at its first lease's expiry, maxDeliveries 1).
    await lease(q, 1, 10, 10)
    await q.apply({ type: 'tick' }, 20)
    expect((await q.listDead(10)).map((m) => m.messageId)).toEqual([1, 2])
  })

  it('reports unknown and expired ids per id and changes nothing for them', async () => {
    const q = await queue()
    await enqueue(q, 10, { body: text('x') })
    const [l] = await lease(q, 10, 1, 50)
    const before = await dump()
    for (const type of ['ack', 'nack'] as const) {
      expect(await q.apply({ type, leaseIds: ['', 'x.y', '1.0', '1.2', '2.1', '01.1'] }, 11)).toEqual({
        type,
        statuses: ['unknown', 'unknown', 'unknown', 'unknown', 'unknown', 'unknown'],
      })
    }
    const after = await dump()
    // only the state record (clock) may differ
    expect(after.length).toBe(before.length)
    expect(await q.apply({ type: 'ack', leaseIds: [l?.leaseId as string] }, 60)).toEqual({
      type: 'ack',
      statuses: ['expired'],
    })
    expect((await q.stats(60)).weights[0]).toMatchObject({ ready: 1, leased: 0 })
  })

  it('extends a lease past its old deadline; an extend of an expired lease fails per id', async () => {
    const q = await queue()
    await enqueue(q, 0, { body: text('x') }, { body: text('y') })
    const [a, b] = await lease(q, 0, 2, 100)
    expect(
      await q.apply({ type: 'extend', leaseIds: [a?.leaseId as string], visibilityMs: 500 }, 90),
    ).toEqual({
      type: 'extend',
      statuses: ['ok'],
      deadlinesMs: [590],
    })
    expect(await lease(q, 100, 5, 10_000)).toMatchObject([{ messageId: b?.messageId, deliveryCount: 2 }])
    expect(
      await q.apply({ type: 'extend', leaseIds: [b?.leaseId as string], visibilityMs: 500 }, 101),
    ).toEqual({
      type: 'extend',
      statuses: ['expired'],
      deadlinesMs: [undefined],
    })
    expect(await lease(q, 589, 5)).toEqual([])
    expect(await q.apply({ type: 'ack', leaseIds: [a?.leaseId as string] }, 589)).toEqual({
      type: 'ack',
      statuses: ['ok'],
    })
  })

  it("reads a weight's head from past the runs already leased, and from a returned message again", async () => {
    const starts: Uint8Array[] = []
    const spied = new Proxy(engine, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target)
        if (prop === 'range')
          return (o: { gte?: Uint8Array }) => {
            if (o.gte) starts.push(o.gte)
            return value.call(target, o)
          }
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const q = await DirectPartition.open(spied, PREFIX, {})
    await enqueue(q, 1, ...Array.from({ length: 20 }, (_, i) => ({ body: text(`m${i + 1}`) })))
    starts.length = 0
    // A lease of 2 reads 8 entries: the 6 it does not take are kept ahead.
    const first = await lease(q, 2, 2)
    expect(first.map((l) => l.messageId)).toEqual([1, 2])
    expect(starts).toHaveLength(1)
    const spanStart = starts.at(-1)?.length ?? 0
    expect((await lease(q, 3, 2)).map((l) => l.messageId)).toEqual([3, 4])
    expect(starts).toHaveLength(1)
    // More than are kept ahead: read again, from a key past message 4's entry, not from the
    // span's start.
    expect((await lease(q, 4, 5)).map((l) => l.messageId)).toEqual([5, 6, 7, 8, 9])
    expect(starts).toHaveLength(2)
    expect(starts.at(-1)?.length).toBeGreaterThan(spanStart)
    // An enqueue puts its entries past those kept ahead: they stay.
    await enqueue(q, 5, { body: text('m21') })
    expect((await lease(q, 6, 2)).map((l) => l.messageId)).toEqual([10, 11])
    expect(starts).toHaveLength(2)
    // A returned message goes below that floor (and drops what was kept ahead): the next
    // lease finds it first.
    await q.apply({ type: 'nack', leaseIds: [first[1]?.leaseId as string] }, 7)
    expect((await lease(q, 8, 3)).map((l) => l.messageId)).toEqual([2, 12, 13])
    expect(starts).toHaveLength(3)
    // A purge of the head drops what was kept ahead too.
    expect(await q.apply({ type: 'purgeReady', max: 2 }, 9)).toEqual({ type: 'purgeReady', ids: [14, 15] })
    expect((await lease(q, 10, 2)).map((l) => l.messageId)).toEqual([16, 17])
  })

  it('settles the leases it just made from their records in memory; older or reopened ones from the engine, alike', async () => {
    let recordReads = 0
    const isRecord = (k: Uint8Array) => k.length === PREFIX.length + 9 && k[PREFIX.length] === KeyTag.Message
    const spied = new Proxy(engine, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target)
        if (prop === 'get' || prop === 'getMany')
          return (keys: Uint8Array | Uint8Array[]) => {
            recordReads += (Array.isArray(keys) ? keys : [keys]).filter(isRecord).length
            return value.call(target, keys)
          }
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const q = await DirectPartition.open(spied, PREFIX, {})
    const n = MESSAGE_METAS_CACHED_MAX + 4
    for (let i = 0; i < n; i += 1000)
      await enqueue(q, 1, ...Array.from({ length: Math.min(1000, n - i) }, () => ({ body: text('m') })))
    const leases: string[] = []
    for (let i = 0; i < n; i += 1000) leases.push(...(await lease(q, 2, 1000, 60_000)).map((l) => l.leaseId))
    expect(leases).toHaveLength(n)
    recordReads = 0
    // The newest leases: ack, nack and extend read no record (the lease wrote them, and the
    // extend rewrote one).
    const newest = leases.slice(-3)
    const ok = { statuses: ['ok'] }
    expect(await q.apply({ type: 'ack', leaseIds: [newest[0] as string] }, 3)).toMatchObject(ok)
    expect(
      await q.apply({ type: 'extend', leaseIds: [newest[1] as string], visibilityMs: 500 }, 3),
    ).toMatchObject(ok)
    expect(await q.apply({ type: 'nack', leaseIds: [newest[2] as string] }, 3)).toMatchObject(ok)
    expect(
      await q.apply({ type: 'ack', leaseIds: [newest[1] as string, newest[0] as string] }, 4),
    ).toMatchObject({
      statuses: ['ok', 'unknown'], // extended, then acked; acked before: gone
    })
    expect(recordReads).toBe(1) // only the acked record's absence (absence is not cached)
    // The oldest leases left the cache (bounded): read from the engine, with the same outcome.
    expect(
      await q.apply({ type: 'ack', leaseIds: [leases[0] as string, leases[1] as string] }, 5),
    ).toMatchObject({
      statuses: ['ok', 'ok'],
    })
    expect(recordReads).toBe(3)
    // After a reopen nothing is cached: the same answers from the engine.
    const reopened = await DirectPartition.open(spied, PREFIX, {})
    recordReads = 0
    expect(
      await reopened.apply({ type: 'ack', leaseIds: [leases[2] as string, newest[0] as string] }, 6),
    ).toMatchObject({ statuses: ['ok', 'unknown'] })
    expect(recordReads).toBe(2)
    expect((await reopened.stats(6)).weights[0]).toMatchObject({ ready: 1, leased: n - 6 })
    // A record with a large inline body is not cached (the cache's memory stays small).
    const big = await DirectPartition.open(spied, Uint8Array.of(0x42, 0x08), {})
    await big.apply(
      { type: 'enqueue', messages: [{ body: new Uint8Array(MESSAGE_META_CACHED_BYTES_MAX) }] },
      7,
    )
    const [held] = leasesOf(
      await big.apply({ type: 'lease', consumerId: 'c1', max: 1, visibilityMs: 100 }, 7),
    )
    recordReads = 0
    expect(await big.apply({ type: 'ack', leaseIds: [held?.leaseId as string] }, 8)).toMatchObject({
      statuses: ['ok'],
    })
    expect(recordReads).toBe(1)
  })

  it('nack returns a message to the head at once, or after a delay', async () => {
    const q = await queue()
    await enqueue(q, 0, { body: text('1') }, { body: text('2') }, { body: text('3') })
    const [m1, m2] = await lease(q, 0, 2)
    expect(await q.apply({ type: 'nack', leaseIds: [m2?.leaseId as string] }, 1)).toEqual({
      type: 'nack',
      statuses: ['ok'],
    })
    expect((await lease(q, 2, 1)).map((l) => l.messageId)).toEqual([2])
    expect(await q.apply({ type: 'nack', leaseIds: [m1?.leaseId as string], delayMs: 50 }, 3)).toEqual({
      type: 'nack',
      statuses: ['ok'],
    })
    expect((await q.stats(3)).weights[0]).toMatchObject({ ready: 1, delayed: 1, leased: 1 })
    expect((await lease(q, 52, 5)).map((l) => l.messageId)).toEqual([3])
    expect((await lease(q, 53, 5)).map((l) => [l.messageId, l.deliveryCount])).toEqual([[1, 2]])
  })

  it('backs a failed delivery off by the retry backoff: doubling per attempt, capped, a nack delay first', async () => {
    const q = await queue({ retryBackoffMinMs: 100, retryBackoffMaxMs: 300, maxDeliveries: 5 })
    await enqueue(q, 0, { body: text('x') }, { body: text('y') })
    const attempt = async (now: number) => {
      const [l] = await lease(q, now, 1, 50)
      return l as Lease
    }
    // 1st delivery nacked: 100 ms; 2nd expired at its deadline: 200 ms; 3rd nacked: capped at 300.
    let l = await attempt(0)
    expect(l).toMatchObject({ messageId: 1, deliveryCount: 1 })
    await q.apply({ type: 'nack', leaseIds: [l.leaseId] }, 10)
    expect((await q.stats(10)).weights[0]).toMatchObject({ ready: 1, delayed: 1 })
    expect((await lease(q, 109, 5, 50_000)).map((x) => x.messageId)).toEqual([2])
    l = await attempt(110)
    expect(l).toMatchObject({ messageId: 1, deliveryCount: 2 })
    expect(await lease(q, 160, 1)).toEqual([]) // expired at 160: back off until 360
    expect(await lease(q, 359, 1)).toEqual([])
    l = await attempt(360)
    expect(l).toMatchObject({ messageId: 1, deliveryCount: 3 })
    await q.apply({ type: 'nack', leaseIds: [l.leaseId] }, 370)
    expect(await lease(q, 669, 1)).toEqual([])
    l = await attempt(670)
    expect(l).toMatchObject({ messageId: 1, deliveryCount: 4 })
    // A nack's own delay wins over the backoff.
    await q.apply({ type: 'nack', leaseIds: [l.leaseId], delayMs: 20 }, 680)
    l = await attempt(700)
    expect(l).toMatchObject({ messageId: 1, deliveryCount: 5 })
    // The last attempt goes to the dead letters at once, not after a backoff.
    await q.apply({ type: 'nack', leaseIds: [l.leaseId] }, 710)
    expect((await q.stats(710)).weights[0]).toMatchObject({ ready: 0, delayed: 0, dead: 1 })
    // Turned off by a configure: a failed delivery is ready again at once, at the head.
    await q.apply({ type: 'configure', config: { retryBackoffMinMs: 0 } }, 720)
    await enqueue(q, 720, { body: text('z') }, { body: text('w') })
    const [z] = await lease(q, 720, 1, 50)
    await q.apply({ type: 'nack', leaseIds: [z?.leaseId as string] }, 722)
    expect((await lease(q, 722, 5)).map((x) => [x.messageId, x.deliveryCount])).toEqual([
      [3, 2],
      [4, 1],
    ])
  })

  it('keeps weighted shares when the byte budget cuts leases short: a pick not taken is not charged', async () => {
    const q = await queue({ messageBytesMax: 100 })
    const m = (weight: number) => ({ body: new Uint8Array(60), weight })
    for (let i = 0; i < 3; i++)
      await enqueue(
        q,
        0,
        ...Array.from({ length: 10 }, () => m(2)),
        ...Array.from({ length: 10 }, () => m(1)),
      )
    const taken = new Map<number, number>()
    for (let i = 0; i < 30; i++) {
      // Three picks asked, one message fits: charging all three starved weight 1 (2, 2, 1: 2 first).
      const r = await q.apply(
        { type: 'lease', consumerId: 'c', max: 3, visibilityMs: 10_000, bytesMax: 100 },
        1,
      )
      for (const l of leasesOf(r)) taken.set(l.weight, (taken.get(l.weight) ?? 0) + 1)
    }
    expect(taken.get(2)).toBe(20)
    expect(taken.get(1)).toBe(10)
  })

  it('backs an expired lease off from its deadline, not from the apply that finds it expired', async () => {
    const q = await queue({ retryBackoffMinMs: 100, retryBackoffMaxMs: 1_000 })
    await enqueue(q, 0, { body: text('x') })
    await lease(q, 0, 1, 50)
    // Expired at 50 and backed off to 150: the first entry after that hands it out.
    expect((await lease(q, 149, 1)).map((l) => l.messageId)).toEqual([])
    // 2nd delivery, expires at 200: backed off to 400, which a lease at 5,000 finds past.
    expect((await lease(q, 150, 1, 50)).map((l) => l.messageId)).toEqual([1])
    expect((await lease(q, 5_000, 1)).map((l) => [l.messageId, l.deliveryCount])).toEqual([[1, 3]])
  })

  it('stops a lease at its byte budget (body, headers and key), the first always; the rest stay ready in place', async () => {
    const q = await queue({ messageBytesMax: 100_000 })
    const big = (n: number) => ({ body: new Uint8Array(n), headers: { h: 'vv' }, key: 'kk' }) // + 5 bytes
    await enqueue(q, 0, big(40_000), big(40_000), big(40_000), { body: text('small') })
    // 40,005 + 40,005 ≤ 100,000 < 120,015: two go, the third and the small one behind it wait.
    const first = await lease(q, 1, 10, 1_000, 100_000)
    expect(first.map((l) => l.messageId)).toEqual([1, 2])
    const second = await q.apply(
      { type: 'lease', consumerId: 'c', max: 10, visibilityMs: 1_000, bytesMax: 10 },
      2,
    )
    expect(leasesOf(second).map((l) => [l.messageId, l.deliveryCount])).toEqual([[3, 1]]) // over it alone: still one
    expect((await q.stats(2)).weights[0]).toMatchObject({ ready: 1, leased: 3 })
    expect((await lease(q, 3, 10, 1_000)).map((l) => l.messageId)).toEqual([4])
  })

  it('takes a give-back (release) as no delivery: no attempt counted, no backoff, back at the head', async () => {
    const q = await queue({ maxDeliveries: 1, retryBackoffMinMs: 1_000, retryBackoffMaxMs: 1_000 })
    await enqueue(q, 0, { body: text('a') }, { body: text('b') })
    for (let round = 1; round <= 3; round++) {
      const [a] = await lease(q, round, 1)
      expect(a).toMatchObject({ messageId: 1, deliveryCount: round })
      await q.apply({ type: 'nack', leaseIds: [a?.leaseId as string], release: true }, round)
    }
    // Its one attempt is still to come: a failed delivery now dead-letters it.
    const [a] = await lease(q, 10, 1)
    await q.apply({ type: 'nack', leaseIds: [a?.leaseId as string] }, 10)
    expect((await q.stats(10)).weights[0]).toMatchObject({ ready: 1, dead: 1 })
  })

  it('holds delayed messages until their not-before time, then queues them at the tail', async () => {
    const q = await queue()
    await enqueue(q, 100, { body: text('later'), notBeforeMs: 300 }, { body: text('now'), notBeforeMs: 50 })
    expect((await q.stats(100)).weights[0]).toMatchObject({ ready: 1, delayed: 1 })
    expect((await lease(q, 100, 10, 10_000)).map((l) => l.messageId)).toEqual([2])
    expect(await lease(q, 299)).toEqual([])
    await enqueue(q, 299, { body: text('fresh') })
    expect((await lease(q, 300)).map((l) => l.messageId)).toEqual([3, 1])
  })

  it('dead-letters past maxDeliveries; lists, redrives and purges the dead-letter sub-queue', async () => {
    const q = await queue({ maxDeliveries: 2 })
    await enqueue(
      q,
      0,
      { body: text('poison'), weight: 5, headers: { h: 'v' }, key: 'k' },
      { body: text('ok'), weight: 5 },
    )
    await lease(q, 0, 1, 10) // delivery 1 of message 1
    await lease(q, 10, 1, 10) // expired → redelivered: delivery 2
    const [m2] = await lease(q, 20, 1, 10) // message 1 is dead now; this is message 2
    expect(m2?.messageId).toBe(2)
    const nack = await lease(q, 21, 1)
    expect(nack).toEqual([])
    const dead = await q.listDead(10)
    expect(dead).toEqual([
      {
        messageId: 1,
        weight: 5,
        body: text('poison'),
        headers: { h: 'v' },
        key: 'k',
        deliveryCount: 2,
        enqueuedAtMs: 0,
        cursor: 0,
      },
    ])
    expect((await q.stats(21)).weights[0]).toMatchObject({ weight: 5, dead: 1, leased: 1, ready: 0 })
    expect(await q.listDead(10, 0)).toEqual([])
    expect(idsOf(await q.apply({ type: 'redriveDead', max: 10 }, 22))).toEqual([1])
    const [back] = await lease(q, 22, 1, 10)
    expect(back).toMatchObject({ messageId: 1, deliveryCount: 3, weight: 5 })
    // a redriven message gets maxDeliveries fresh attempts: nack once → ready, twice → dead
    await q.apply({ type: 'nack', leaseIds: [back?.leaseId as string] }, 23)
    const [again] = await lease(q, 23, 1, 10)
    await q.apply({ type: 'nack', leaseIds: [again?.leaseId as string] }, 24)
    expect((await q.listDead(10)).map((d) => d.messageId)).toEqual([1])
    expect(idsOf(await q.apply({ type: 'purgeDead', max: 10 }, 25))).toEqual([1])
    expect(await q.listDead(10)).toEqual([])
    expect((await q.stats(25)).messages).toBe(1)
  })

  it('redrives only the dead up to a place in the list (through): one that died again since stays', async () => {
    const q = await queue({ maxDeliveries: 1 })
    expect(q.deadEnd()).toBe(-1)
    await q.apply({ type: 'enqueue', messages: ['a', 'b', 'c'].map((b) => ({ body: text(b) })) }, 0)
    const first = await lease(q, 1, 3, 10)
    await q.apply({ type: 'nack', leaseIds: first.map((l) => l.leaseId) }, 2)
    // A redrive begins with three dead: through the last of them, as an entry of max 0 reports.
    expect(await q.apply({ type: 'redriveDead', max: 0 }, 2)).toEqual({
      type: 'redriveDead',
      ids: [],
      deadEnd: 2,
    })
    const through = q.deadEnd()
    expect(through).toBe(2)
    expect(idsOf(await q.apply({ type: 'redriveDead', max: 1, through }, 3))).toEqual([1])
    // Message 1 fails again at once and dies again, behind 2 and 3.
    const [again] = await lease(q, 4, 1, 10)
    expect(again?.messageId).toBe(1)
    await q.apply({ type: 'nack', leaseIds: [again?.leaseId as string] }, 5)
    expect(q.deadEnd()).toBe(3)
    // The redrive's next entries take 2 and 3, never 1 a second time.
    expect(idsOf(await q.apply({ type: 'redriveDead', max: 10, through }, 6))).toEqual([2, 3])
    expect(idsOf(await q.apply({ type: 'redriveDead', max: 10, through }, 7))).toEqual([])
    expect((await q.listDead(10)).map((d) => d.messageId)).toEqual([1])
  })

  it('purges only the dead listed up to a place in the list (through), and counts the dead', async () => {
    const q = await queue({ maxDeliveries: 1 })
    await q.apply({ type: 'enqueue', messages: ['a', 'b', 'c'].map((b) => ({ body: text(b) })) }, 0)
    const leases = await lease(q, 1, 3, 10)
    await q.apply({ type: 'nack', leaseIds: leases.slice(0, 2).map((l) => l.leaseId) }, 2)
    expect(q.deadCount()).toBe(2)
    const listed = await q.listDead(10)
    expect(listed.map((d) => d.messageId)).toEqual([1, 2])
    // c dies after the listing: a purge through the listing's last place leaves it.
    await q.apply({ type: 'nack', leaseIds: [leases[2]?.leaseId as string] }, 3)
    expect(q.deadCount()).toBe(3)
    const through = listed.at(-1)?.cursor as number
    expect(idsOf(await q.apply({ type: 'purgeDead', max: 10, through }, 4))).toEqual([1, 2])
    expect((await q.listDead(10)).map((d) => d.messageId)).toEqual([3])
    expect(q.deadCount()).toBe(1)
    // Nothing listed up to there is still dead: nothing more goes.
    expect(idsOf(await q.apply({ type: 'purgeDead', max: 10, through }, 5))).toEqual([])
    expect(q.deadCount()).toBe(1)
    // A span that starts after a place leaves what is before it.
    const [d] = await q.listDead(10)
    const cursor = d?.cursor as number
    expect(idsOf(await q.apply({ type: 'purgeDead', max: 10, through: cursor, after: cursor }, 6))).toEqual(
      [],
    )
    expect(
      idsOf(await q.apply({ type: 'purgeDead', max: 10, through: cursor, after: cursor - 1 }, 6)),
    ).toEqual([3])
    expect(q.deadCount()).toBe(0)
    // Through MAX_SAFE_INTEGER (what the codec writes for `after` alone): to the list's end.
    await q.apply({ type: 'enqueue', messages: [{ body: text('d') }] }, 7)
    const [d4] = await lease(q, 8, 1, 10)
    await q.apply({ type: 'nack', leaseIds: [d4?.leaseId as string] }, 9)
    expect(
      idsOf(
        await q.apply({ type: 'purgeDead', max: 10, through: Number.MAX_SAFE_INTEGER, after: cursor }, 10),
      ),
    ).toEqual([4])
  })

  it('makes a retried producer batch a no-op that returns the original ids', async () => {
    const q = await queue({ producerWindowMs: 1000 })
    const batch = {
      type: 'enqueue',
      producerId: 'p1',
      producerSeq: 7,
      messages: [{ body: text('a') }, { body: text('b') }],
    } as const
    expect(await q.apply(batch, 0)).toEqual({ type: 'enqueue', ids: [1, 2], duplicate: false })
    expect(await q.apply(batch, 500)).toEqual({ type: 'enqueue', ids: [1, 2], duplicate: true })
    expect((await q.stats(500)).messages).toBe(2)
    const stale = await q.apply({ ...batch, producerSeq: 6 }, 501)
    expect(stale.type === 'rejected' && stale.error.code).toBe('OUT_OF_ORDER_SEQUENCE')
    expect(idsOf(await q.apply({ ...batch, producerSeq: 8 }, 502))).toEqual([3, 4])
    // after the producer window the sequence is forgotten
    expect(await q.apply({ ...batch, producerSeq: 8 }, 1502)).toEqual({
      type: 'enqueue',
      ids: [5, 6],
      duplicate: false,
    })
  })

  it('keeps producers whose ids differ by a leading U+FEFF apart, also when one record expires', async () => {
    const q = await queue({ producerWindowMs: 1000 })
    const send = (producerId: string, producerSeq: number, nowMs: number) =>
      q.apply({ type: 'enqueue', producerId, producerSeq, messages: [{ body: text(producerId) }] }, nowMs)
    expect(idsOf(await send('\uFEFFp', 1, 0))).toEqual([1])
    expect(idsOf(await send('p', 1, 0))).toEqual([2])
    expect(idsOf(await send('p', 2, 500))).toEqual([3])
    // The first producer's record expires; the other's (renewed at 500) must stay.
    await q.apply({ type: 'tick' }, 1000)
    const retry = {
      type: 'enqueue',
      producerId: 'p',
      producerSeq: 2,
      messages: [{ body: text('p') }],
    } as const
    expect(await q.apply(retry, 1100)).toEqual({ type: 'enqueue', ids: [3], duplicate: true })
    const reopened = await queue({ producerWindowMs: 1000 })
    expect(await reopened.apply(retry, 1100)).toEqual({ type: 'enqueue', ids: [3], duplicate: true })
  })

  it('keeps a pipelining producer in order: a batch that overtakes an earlier one is refused, retriable', async () => {
    const q = await queue({ producerWindowMs: 10_000 })
    const batch = (seq: number, base: number) =>
      ({
        type: 'enqueue',
        producerId: 'p',
        producerSeq: seq,
        producerBase: base,
        messages: [{ body: text(`m${seq}`) }],
      }) as const
    const codeOf = (r: CommandResult) => (r.type === 'rejected' ? r.error.code : r.type)
    // 2 arrives before 1 (both in flight: base 1): refused, nothing enqueued.
    const early = await q.apply(batch(2, 1), 0)
    expect(codeOf(early)).toBe('SEQUENCE_GAP')
    expect(early.type === 'rejected' && early.error.retriable).toBe(true)
    expect((await q.stats(0)).messages).toBe(0)
    expect(idsOf(await q.apply(batch(1, 1), 1))).toEqual([1])
    expect(codeOf(await q.apply(batch(3, 1), 2))).toBe('SEQUENCE_GAP') // 2 has not arrived yet
    expect(idsOf(await q.apply(batch(2, 1), 3))).toEqual([2])
    expect(idsOf(await q.apply(batch(3, 2), 4))).toEqual([3])
    // Each of the last PRODUCER_BATCHES_KEPT batches is recognised when retried.
    for (let seq = 4; seq <= 7; seq++) await q.apply(batch(seq, seq), 4 + seq)
    for (let seq = 3; seq <= 7; seq++) {
      expect(await q.apply(batch(seq, 3), 20), `seq ${seq}`).toEqual({
        type: 'enqueue',
        ids: [seq],
        duplicate: true,
      })
    }
    expect(codeOf(await q.apply(batch(2, 2), 21))).toBe('OUT_OF_ORDER_SEQUENCE')
    // A batch the client gave up on (9 never arrived): base 10 says so, and 10 is accepted.
    expect(codeOf(await q.apply(batch(10, 9), 22))).toBe('SEQUENCE_GAP')
    expect(idsOf(await q.apply(batch(10, 10), 23))).toEqual([8])
    // Without a base (one batch in flight at a time) a gap is accepted, as before.
    expect(idsOf(await q.apply({ ...batch(12, 0), producerBase: undefined }, 24))).toEqual([9])
    expect(codeOf(await q.apply({ ...batch(13, 14) }, 25))).toBe('INVALID_ARGUMENT')
    expect(
      codeOf(await q.apply({ type: 'enqueue', producerBase: 1, messages: [{ body: text('x') }] }, 26)),
    ).toBe('INVALID_ARGUMENT')
    expect((await q.stats(30)).messages).toBe(9)
    // The recent batches survive a reopen (they are in the engine, not only in memory).
    const reopened = await queue({ producerWindowMs: 10_000 })
    expect(await reopened.apply(batch(10, 10), 31)).toEqual({ type: 'enqueue', ids: [8], duplicate: true })
  })

  it('keeps producer sequences past the producer cache and across a reopen', async () => {
    const q = await queue({ producerWindowMs: 10_000 })
    const producers = PRODUCERS_CACHED_MAX + 5
    for (let p = 0; p < producers; p++) {
      const r = await q.apply(
        { type: 'enqueue', producerId: `p${p}`, producerSeq: 1, messages: [{ body: text('x') }] },
        p,
      )
      expect(r).toMatchObject({ duplicate: false })
    }
    // p0's record left the cache long ago: the retry is answered from the engine.
    const retry = {
      type: 'enqueue',
      producerId: 'p0',
      producerSeq: 1,
      messages: [{ body: text('x') }],
    } as const
    expect(await q.apply(retry, producers)).toEqual({ type: 'enqueue', ids: [1], duplicate: true })
    const reopened = await queue({ producerWindowMs: 10_000 })
    const last = `p${producers - 1}`
    expect(await reopened.apply({ ...retry, producerId: last }, producers + 1)).toEqual({
      type: 'enqueue',
      ids: [producers],
      duplicate: true,
    })
    // Past the window the record expires (and leaves the cache): the same sequence is new.
    expect(await reopened.apply({ ...retry, producerId: last }, producers + 20_000)).toMatchObject({
      duplicate: false,
    })
  })

  it('dedups a repeated key within the dedup window, also inside one batch', async () => {
    const q = await queue({ dedupWindowMs: 100 })
    expect(
      idsOf(
        await enqueue(
          q,
          0,
          { body: text('a'), dedupKey: 'k' },
          { body: text('b'), dedupKey: 'k' },
          { body: text('c') },
        ),
      ),
    ).toEqual([1, 1, 2])
    expect(idsOf(await enqueue(q, 99, { body: text('again'), dedupKey: 'k' }))).toEqual([1])
    expect(idsOf(await enqueue(q, 100, { body: text('new'), dedupKey: 'k' }))).toEqual([3])
    expect((await q.stats(100)).messages).toBe(3)
    // the expired entry is gone from storage once its expiry passed
    await q.apply({ type: 'tick' }, 250)
    const keys = (await dump()).map(([k]) => k[PREFIX.length])
    expect(keys.filter((t) => t === 0x30)).toHaveLength(0)
    expect(keys.filter((t) => t === 0x32)).toHaveLength(0)
  })

  it('refuses a batch larger than the whole partition as not retriable, one that does not fit now as retriable', async () => {
    const q = await queue({ enqueueBatchMax: 10, queueMessagesMax: 4 })
    await q.apply({ type: 'tick' }, 1)
    const before = await dump()
    const five = Array.from({ length: 5 }, (_, i) => ({ body: text(`m${i}`) }))
    const never = await q.apply({ type: 'enqueue', messages: five }, 1)
    expect(never.type === 'rejected' && never.error.code).toBe('INVALID_ARGUMENT')
    expect(never.type === 'rejected' && never.error.retriable).toBe(false)
    expect(never.type === 'rejected' && never.error.message).toMatch(
      /a batch of 5 new messages can never fit: the partition holds at most 4 .*send at most 4 at a time/,
    )
    expect(await dump()).toEqual(before)
    expect(idsOf(await enqueue(q, 1, ...five.slice(0, 4)))).toEqual([1, 2, 3, 4])
    const full = await q.apply({ type: 'enqueue', messages: five.slice(0, 1) }, 1)
    expect(full.type === 'rejected' && full.error.code).toBe('LIMIT_EXCEEDED')
    expect(full.type === 'rejected' && full.error.retriable).toBe(true)
    // The partition's share, not the queue's --max-length: said so (it read "queue holds 4
    // messages; 1 more would exceed its limit of 4" for a queue of 16 over 4 partitions).
    expect(full.type === 'rejected' && full.error.message).toMatch(
      /^the partition holds 4 messages; 1 more would exceed its limit of 4 \(its share of the queue's max length\)/,
    )
  })

  it('rejects over-limit and invalid commands with a clear error and no state change', async () => {
    const q = await queue({ messageBytesMax: 8, enqueueBatchMax: 3, queueMessagesMax: 4, leaseBatchMax: 5 })
    await enqueue(q, 0, { body: text('ok') })
    await q.apply({ type: 'tick' }, 1)
    const before = await dump()
    const cases: [unknown, string, RegExp][] = [
      [
        { type: 'enqueue', messages: [{ body: text('123456789') }] },
        'INVALID_ARGUMENT',
        /message 0 is 9 bytes.*limit is 8/,
      ],
      [
        { type: 'enqueue', messages: [{ body: text('a'), headers: { hh: 'vvvvvvv' } }] },
        'INVALID_ARGUMENT',
        /10 bytes/,
      ],
      [
        { type: 'enqueue', messages: Array(4).fill({ body: text('a') }) },
        'INVALID_ARGUMENT',
        /batch limit of 3/,
      ],
      [{ type: 'enqueue', messages: [] }, 'INVALID_ARGUMENT', /at least one message/],
      [
        { type: 'enqueue', messages: [{ body: text('a'), weight: 0 }] },
        'INVALID_ARGUMENT',
        /weight must be an integer from 1 to 1000/,
      ],
      [{ type: 'enqueue', messages: [{ body: 'str' }] }, 'INVALID_ARGUMENT', /body must be a Uint8Array/],
      [
        { type: 'enqueue', messages: [{ body: text('a') }], producerId: 'p' },
        'INVALID_ARGUMENT',
        /set both or neither/,
      ],
      [{ type: 'lease', consumerId: 'c', max: 6, visibilityMs: 1 }, 'INVALID_ARGUMENT', /limit of 5/],
      [{ type: 'lease', consumerId: '', max: 1, visibilityMs: 1 }, 'INVALID_ARGUMENT', /consumerId/],
      [{ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 0 }, 'INVALID_ARGUMENT', /visibilityMs/],
      [{ type: 'ack', leaseIds: Array(6).fill('1.1') }, 'INVALID_ARGUMENT', /limit of 5/],
      [{ type: 'nack', leaseIds: ['1.1'], delayMs: -1 }, 'INVALID_ARGUMENT', /delayMs/],
      [{ type: 'redriveDead', max: 6 }, 'INVALID_ARGUMENT', /redrive max/],
      [{ type: 'configure', config: { maxDeliveries: 0 } }, 'INVALID_ARGUMENT', /maxDeliveries/],
      [{ type: 'configure', config: { scheduling: 'lottery' } }, 'INVALID_ARGUMENT', /scheduling/],
      [{ type: 'bogus' }, 'INVALID_ARGUMENT', /unknown command type/],
    ]
    // 3 more fit (4 - 1 stored); a 4th does not: fill to the limit first, then check
    const fits = await enqueue(q, 1, { body: text('a') }, { body: text('b') }, { body: text('c') })
    expect(idsOf(fits)).toEqual([2, 3, 4])
    const full = await q.apply({ type: 'enqueue', messages: [{ body: text('x') }] }, 1)
    expect(full.type === 'rejected' && full.error.message).toMatch(/holds 4 messages.*limit of 4/)
    expect(full.type === 'rejected' && full.error.retriable).toBe(true)
    const filled = await dump()
    for (const [cmd, code, message] of cases) {
      const r = await q.apply(cmd as never, 1)
      expect(r.type, JSON.stringify(cmd)).toBe('rejected')
      if (r.type === 'rejected') {
        expect(r.error.code).toBe(code)
        expect(r.error.message).toMatch(message)
      }
    }
    expect(await dump()).toEqual(filled)
    expect(before.length).toBeLessThan(filled.length)
    // A batch refused for one message names it (its place), so that a producer can send the
    // others again; a refusal of the batch as such names none.
    const one = await q.apply(
      { type: 'enqueue', messages: [{ body: text('a') }, { body: text('a'), weight: 0 }] },
      1,
    )
    expect(one.type === 'rejected' && (one.error as InvalidArgumentError).messageIndex).toBe(1)
    const whole = await q.apply({ type: 'enqueue', messages: [] }, 1)
    expect(whole.type === 'rejected' && (whole.error as InvalidArgumentError).messageIndex).toBeUndefined()
  })

  it('refuses an enqueue of a message that is not an object (null) as invalid, with its place, and goes on', async () => {
    const q = await queue()
    await enqueue(q, 0, { body: text('a') })
    const [l] = await lease(q, 0, 1, 10)
    // The apply at 100 expires the lease first; the refusal leaves that work whole.
    const r = await q.apply({ type: 'enqueue', messages: [{ body: text('b') }, null] } as never, 100)
    expect(r.type).toBe('rejected')
    if (r.type === 'rejected') {
      expect(r.error.code).toBe('INVALID_ARGUMENT')
      expect(r.error.message).toMatch(/message 1/)
      expect((r.error as InvalidArgumentError).messageIndex).toBe(1)
    }
    expect((await q.stats(100)).weights[0]).toMatchObject({ ready: 1, leased: 0 })
    const [again] = await lease(q, 101, 1, 10)
    expect(again).toMatchObject({ messageId: l?.messageId, deliveryCount: 2 })
  })

  it('refuses a command that is not an object, and applies the next one', async () => {
    const q = await queue()
    await expect(q.apply(null as never, 1)).rejects.toThrow(/the command is an object/)
    await enqueue(q, 2, { body: text('a') })
    expect((await q.stats(2)).weights[0]).toMatchObject({ ready: 1 })
  })

  it('keeps the clock monotonic when a new leader stamps an earlier time', async () => {
    const q = await queue()
    await enqueue(q, 1000, { body: text('a') })
    const [l] = await lease(q, 1000, 1, 100)
    expect(l?.deadlineMs).toBe(1100)
    await enqueue(q, 10, { body: text('b') }) // clamped to 1000
    const [l2] = await lease(q, 500, 1, 100)
    expect(l2).toMatchObject({ messageId: 2, deadlineMs: 1100, enqueuedAtMs: 1000 })
  })

  it('expires at most expiryBatchMax lease entries per apply; the rest report expired until then', async () => {
    const q = await queue({ expiryBatchMax: 2 })
    await enqueue(q, 0, ...Array.from({ length: 5 }, (_, i) => ({ body: text(String(i)) })))
    const ls: Lease[] = []
    for (let i = 0; i < 5; i++) ls.push(...(await lease(q, i, 1, 10)))
    // all five are due at 14; the first apply at 20 expires two of them, then the command runs
    const r = await q.apply({ type: 'ack', leaseIds: ls.map((l) => l.leaseId) }, 20)
    expect(r).toEqual({ type: 'ack', statuses: ['expired', 'expired', 'expired', 'expired', 'expired'] })
    expect((await q.stats(20)).weights[0]).toMatchObject({ ready: 2, leased: 3 })
    await q.apply({ type: 'tick' }, 21)
    await q.apply({ type: 'tick' }, 22)
    expect((await q.stats(22)).weights[0]).toMatchObject({ ready: 5, leased: 0 })
  })

  it('reads about the lease groups it expires: linear in a backlog of large groups, not quadratic', async () => {
    /** Lease-group values the engine returned to range reads (the bytes expiry reads). */
    let groupsRead = 0
    const spied = new Proxy(engine, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target)
        if (prop === 'range')
          return async (r: KeyRange) => {
            const got: KeyValue[] = await value.call(target, r)
            groupsRead += got.filter(([k]) => k[PREFIX.length] === KeyTag.LeaseDeadline).length
            return got
          }
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const size = 20
    const groups = 30
    const q = await DirectPartition.open(spied, PREFIX, { expiryBatchMax: size })
    for (let g = 0; g < groups; g++) {
      await enqueue(q, g, ...Array.from({ length: size }, () => ({ body: text('m') })))
      expect(await lease(q, g, size, 100)).toHaveLength(size)
    }
    groupsRead = 0
    // All due at 1000; each apply expires one whole group (size ≥ expiryBatchMax), oldest first.
    for (let t = 0; t < groups; t++) {
      await q.apply({ type: 'tick' }, 1000 + t)
      expect((await q.stats(1000 + t)).weights[0]).toMatchObject({
        ready: (t + 1) * size,
        leased: (groups - t - 1) * size,
      })
    }
    // One group taken and the next one seen per apply. A read of expiryBatchMax groups per
    // apply read 411 here (every apply re-read up to 20 of the groups left).
    expect(groupsRead).toBe(2 * groups - 1)
    const order = await lease(q, 2000, size)
    expect(order.map((l) => l.messageId)).toEqual(Array.from({ length: size }, (_, i) => i + 1))
  })

  it('takes whole due groups until expiryBatchMax entries, whatever their sizes and the reads', async () => {
    const q = await queue({ expiryBatchMax: 8 })
    // Lease groups of 1, 1, 1, 1, 1, 1, 1, 10, 1, 3 and 1 leases, due at 100 + g.
    const sizes = [1, 1, 1, 1, 1, 1, 1, 10, 1, 3, 1]
    const total = sizes.reduce((a, b) => a + b, 0)
    await enqueue(q, 0, ...Array.from({ length: total }, () => ({ body: text('m') })))
    for (const [g, n] of sizes.entries()) expect(await lease(q, g, n, 100)).toHaveLength(n)
    const leased = async (nowMs: number) => ((await q.stats(nowMs)).weights[0] as { leased: number }).leased
    await q.apply({ type: 'tick' }, 200)
    expect(await leased(200)).toBe(total - 17) // groups 1-8: 17 entries, the first to reach 8
    expect(q.nextTimedMs()).toBe(108) // the deadline of the first group left
    await q.apply({ type: 'tick' }, 201)
    expect(await leased(201)).toBe(0) // 5 left: under the bound
    expect(q.nextTimedMs()).toBe(Number.POSITIVE_INFINITY)
  })

  it('stores a large body apart, returns it intact and deletes it with its message', async () => {
    const q = await queue({ maxDeliveries: 1 })
    const big = Uint8Array.from({ length: 5000 }, (_, i) => i % 251)
    await enqueue(q, 0, { body: big, headers: { a: 'b' }, key: 'kk' }, { body: big })
    const bodyKeys = async () => (await dump()).filter(([k]) => k[PREFIX.length] === 0x11).length
    expect(await bodyKeys()).toBe(2)
    const [l1, l2] = await lease(q, 1, 2, 10)
    expect(l1?.body).toEqual(big)
    expect(l1?.headers).toEqual({ a: 'b' })
    expect(l1?.key).toBe('kk')
    await q.apply({ type: 'ack', leaseIds: [l1?.leaseId as string] }, 2)
    expect(await bodyKeys()).toBe(1)
    expect(l2?.messageId).toBe(2)
    await q.apply({ type: 'tick' }, 11) // message 2 expires after its only delivery: dead
    expect((await q.listDead(5))[0]?.body).toEqual(big)
    await q.apply({ type: 'purgeDead', max: 5 }, 12)
    expect(await bodyKeys()).toBe(0)
    expect(await dump()).toHaveLength(5) // state, config, window header and chunk, weight 1
  })

  it('deletes a lease group with its last held lease, also after a reopen (nothing cached)', async () => {
    const leaseKeys = async () =>
      (await dump()).filter(([k]) => {
        const tag = k[PREFIX.length]
        return tag === KeyTag.LeaseDeadline || tag === KeyTag.LeaseLive
      }).length
    const q = await queue()
    await enqueue(q, 0, ...['a', 'b', 'c', 'd', 'e'].map((b) => ({ body: text(b) })))
    const batch = (await lease(q, 1, 5, 100)).map((l) => l.leaseId)
    expect(await leaseKeys()).toBe(2) // the member list and the live count
    await q.apply({ type: 'ack', leaseIds: [batch[0], batch[1], batch[0]] as string[] }, 2)
    const reopened = await queue()
    expect(await reopened.apply({ type: 'ack', leaseIds: [batch[2] as string] }, 3)).toEqual({
      type: 'ack',
      statuses: ['ok'],
    })
    await reopened.apply({ type: 'nack', leaseIds: [batch[3] as string] }, 4)
    await reopened.apply({ type: 'extend', leaseIds: [batch[4] as string], visibilityMs: 50 }, 5)
    expect(await leaseKeys()).toBe(2) // the first group is gone; the extension made a new one
    await reopened.apply({ type: 'ack', leaseIds: [batch[4] as string] }, 6)
    expect(await leaseKeys()).toBe(0)
    const again = await lease(reopened, 7, 5, 100)
    expect(again.map((l) => l.leaseId)).toEqual(['4.2'])
    await reopened.apply({ type: 'ack', leaseIds: ['4.2'] }, 8)
    expect(await leaseKeys()).toBe(0)
    expect(await dump()).toHaveLength(5) // state, config, window header and chunk, weight 1
    // Nothing is left to expire: time passing changes nothing.
    await reopened.apply({ type: 'tick' }, 10_000)
    expect(await dump()).toHaveLength(5)
  })

  it('answers a repeated lease attempt with its leases still held and nothing more; once none are, it leases anew', async () => {
    const attemptKeys = async () => (await dump()).filter(([k]) => k[PREFIX.length] === KeyTag.Attempt).length
    const byAttempt = async (q: DirectPartition, nowMs: number, attempt: string, max = 10) =>
      leasesOf(
        await q.apply(
          { type: 'lease', consumerId: 'c1', max, visibilityMs: 100, attempt, repeat: true },
          nowMs,
        ),
      )
    const q = await queue()
    await enqueue(q, 0, ...['a', 'b', 'c', 'd'].map((b) => ({ body: text(b) })))
    const first = await byAttempt(q, 1_000, 'x1', 2)
    expect(first.map((l) => l.leaseId)).toEqual(['1.1', '2.1'])
    expect(await attemptKeys()).toBe(1)
    // Repeated (the answer was lost): the same leases, bodies and deadlines; nothing more.
    const repeated = await q.apply(
      { type: 'lease', consumerId: 'c1', max: 10, visibilityMs: 100, attempt: 'x1', repeat: true },
      1_010,
    )
    expect(repeated).toEqual({ type: 'lease', leases: first })
    // A give-back of the first answer (its call was cancelled) comes after the repeat: the
    // leases are the repeat's now, and stay leased.
    const giveBack = { type: 'nack', leaseIds: ['1.1', '2.1'], release: true, attempt: 'x1' } as const
    expect(await q.apply(giveBack, 1_011)).toEqual({
      type: 'nack',
      statuses: ['expired', 'expired'],
    })
    // Also after a reopen: the attempt is in the engine, not only in memory.
    const reopened = await queue()
    expect(await byAttempt(reopened, 1_020, 'x1')).toEqual(first)
    // What was settled or extended since is not answered again.
    await reopened.apply({ type: 'ack', leaseIds: ['1.1'] }, 1_030)
    expect((await byAttempt(reopened, 1_040, 'x1')).map((l) => l.leaseId)).toEqual(['2.1'])
    await reopened.apply({ type: 'extend', leaseIds: ['2.1'], visibilityMs: 100 }, 1_050)
    // None held by the attempt any more: it leases anew, and remembers the new leases.
    const second = await byAttempt(reopened, 1_060, 'x1', 1)
    expect(second.map((l) => l.leaseId)).toEqual(['3.1'])
    expect(await byAttempt(reopened, 1_070, 'x1', 5)).toEqual(second)
    // Another attempt, or none, is a lease as ever.
    expect((await lease(reopened, 1_080, 5)).map((l) => l.leaseId)).toEqual(['4.1'])
    // Past the deadlines every lease expired (back at the head): the attempt leases anew.
    const late = await byAttempt(reopened, 1_200, 'x1', 1)
    expect(late.map((l) => l.leaseId)).toEqual(['2.2'])
    // The records go at their deadline.
    await reopened.apply({ type: 'ack', leaseIds: ['2.2'] }, 1_210)
    await reopened.apply({ type: 'tick' }, 5_000)
    expect(await attemptKeys()).toBe(0)
    // An attempt id that is not a name is refused, and changes nothing (a lone surrogate too:
    // stored as U+FFFD, it would share its record with another name).
    for (const bad of ['', 'x'.repeat(257), 'a\uD800']) {
      const r = await reopened.apply(
        { type: 'lease', consumerId: 'c1', max: 1, visibilityMs: 100, attempt: bad },
        5_010,
      )
      expect(r.type).toBe('rejected')
      expect((r as { error: Error }).error.message).toMatch(
        /lease attempt must be a non-empty, well-formed string/,
      )
    }
  })

  it('gives back what an attempt leased while it answered once, not once it answered again', async () => {
    const q = await queue()
    await enqueue(q, 0, ...['a', 'b'].map((b) => ({ body: text(b) })))
    const ask = {
      type: 'lease',
      consumerId: 'c1',
      max: 1,
      visibilityMs: 100,
      attempt: 'y',
      repeat: true,
    } as const
    expect(leasesOf(await q.apply(ask, 1_000)).map((l) => l.leaseId)).toEqual(['1.1'])
    const giveBack = { type: 'nack', leaseIds: ['1.1'], release: true, attempt: 'y' } as const
    // Answered once: given back, ready again at the head.
    expect(await q.apply(giveBack, 1_010)).toEqual({ type: 'nack', statuses: ['ok'] })
    expect(leasesOf(await q.apply(ask, 1_020)).map((l) => l.leaseId)).toEqual(['1.2'])
    // Answered again (a repeat, or a late call): whichever call it was, the leases stay.
    expect(leasesOf(await q.apply(ask, 1_030)).map((l) => l.leaseId)).toEqual(['1.2'])
    expect(await q.apply({ ...giveBack, leaseIds: ['1.2'] }, 1_040)).toEqual({
      type: 'nack',
      statuses: ['expired'],
    })
    // A give-back without the attempt (a consumer returning what it holds) is as ever.
    expect(await q.apply({ type: 'nack', leaseIds: ['1.2'], release: true }, 1_050)).toEqual({
      type: 'nack',
      statuses: ['ok'],
    })
    // The attempt must be a name.
    const bad = await q.apply({ ...giveBack, attempt: '' }, 1_060)
    expect(bad.type).toBe('rejected')
    // A first lease under an attempt (not a repeat) looks for nothing: it leases at once, and
    // its leases replace what the attempt held.
    expect(leasesOf(await q.apply(ask, 1_070)).map((l) => l.leaseId)).toEqual(['1.3'])
    expect(leasesOf(await q.apply({ ...ask, repeat: false }, 1_080)).map((l) => l.leaseId)).toEqual(['2.1'])
    expect(leasesOf(await q.apply(ask, 1_090)).map((l) => l.leaseId)).toEqual(['2.1'])
  })

  it("keeps leases a repeat answered and its consumer extended when the give-back comes after the attempt's deadline", async () => {
    const q = await queue()
    await enqueue(q, 0, ...['a', 'b'].map((b) => ({ body: text(b) })))
    const ask = {
      type: 'lease',
      consumerId: 'c1',
      max: 1,
      visibilityMs: 100,
      attempt: 'y',
      repeat: true,
    } as const
    // The first call's answer is lost (it was cancelled); the client's repeat gets the lease,
    // and its consumer extends it past the attempt's deadline (1,100).
    expect(leasesOf(await q.apply(ask, 1_000)).map((l) => l.leaseId)).toEqual(['1.1'])
    expect(leasesOf(await q.apply(ask, 1_010)).map((l) => l.leaseId)).toEqual(['1.1'])
    expect(await q.apply({ type: 'extend', leaseIds: ['1.1'], visibilityMs: 1_000 }, 1_020)).toMatchObject({
      statuses: ['ok'],
    })
    // The first call's give-back is applied late, once the attempt's record is gone: the lease
    // is the repeat's consumer's until 2,020, so it changes nothing.
    const giveBack = { type: 'nack', leaseIds: ['1.1'], release: true, attempt: 'y', lapses: true } as const
    expect(await q.apply(giveBack, 1_100)).toEqual({ type: 'nack', statuses: ['expired'] })
    // Another consumer gets the next message, not the one still held.
    expect((await lease(q, 1_101, 5)).map((l) => l.leaseId)).toEqual(['2.1'])
    expect(await q.apply({ type: 'ack', leaseIds: ['1.1'] }, 1_200)).toEqual({
      type: 'ack',
      statuses: ['ok'],
    })
  })

  it("releases, as before format level 38, a late give-back's leases still held when it does not lapse", async () => {
    const q = await queue()
    await enqueue(q, 0, { body: text('a') })
    const ask = {
      type: 'lease',
      consumerId: 'c1',
      max: 1,
      visibilityMs: 100,
      attempt: 'y',
      repeat: true,
    } as const
    expect(leasesOf(await q.apply(ask, 1_000)).map((l) => l.leaseId)).toEqual(['1.1'])
    expect(leasesOf(await q.apply(ask, 1_010)).map((l) => l.leaseId)).toEqual(['1.1'])
    await q.apply({ type: 'extend', leaseIds: ['1.1'], visibilityMs: 1_000 }, 1_020)
    // A replica of an earlier version applies it so: every replica must, until the level rises.
    const giveBack = { type: 'nack', leaseIds: ['1.1'], release: true, attempt: 'y' } as const
    expect(await q.apply(giveBack, 1_100)).toEqual({ type: 'nack', statuses: ['ok'] })
    expect((await lease(q, 1_101, 5)).map((l) => l.leaseId)).toEqual(['1.2'])
  })

  it("answers a repeat-only lease with its attempt's leases still held, and otherwise leases nothing", async () => {
    const q = await queue()
    await enqueue(q, 0, ...['a', 'b', 'c'].map((b) => ({ body: text(b) })))
    const ask = { type: 'lease', consumerId: 'c1', max: 2, visibilityMs: 100, attempt: 'z' } as const
    const only = { ...ask, repeatOnly: true } as const
    // Nothing leased under the attempt yet: an empty answer, and no record made.
    expect(await q.apply(only, 1_000)).toEqual({ type: 'lease', leases: [] })
    const first = leasesOf(await q.apply(ask, 1_010))
    expect(first.map((l) => l.leaseId)).toEqual(['1.1', '2.1'])
    // The same leases again, whatever its max, and nothing more; counted as an answer (its
    // give-back no longer releases them).
    expect(await q.apply({ ...only, max: 1 }, 1_020)).toEqual({ type: 'lease', leases: first })
    expect(await q.apply({ type: 'nack', leaseIds: ['1.1'], release: true, attempt: 'z' }, 1_030)).toEqual({
      type: 'nack',
      statuses: ['expired'],
    })
    // Once they are settled, nothing: message 3 stays ready for the next lease.
    await q.apply({ type: 'ack', leaseIds: ['1.1', '2.1'] }, 1_040)
    expect(await q.apply(only, 1_050)).toEqual({ type: 'lease', leases: [] })
    expect((await lease(q, 1_060, 5)).map((l) => l.leaseId)).toEqual(['3.1'])
    // It repeats an attempt: without one it is refused, and changes nothing.
    const r = await q.apply({ ...only, attempt: undefined }, 1_070)
    expect(r.type).toBe('rejected')
    expect((r as { error: Error }).error.message).toMatch(/repeat-only lease needs the attempt/)
  })

  it('survives a reopen from the engine with identical behaviour', async () => {
    const q = await queue({ maxDeliveries: 3 })
    await enqueue(
      q,
      0,
      { body: text('a'), weight: 3 },
      { body: text('b'), weight: 1 },
      { body: text('c'), weight: 3 },
    )
    await lease(q, 1, 1, 10)
    const reopened = await DirectPartition.open(engine, PREFIX, { maxDeliveries: 99 }) // stored config wins
    expect(reopened.partition.config.maxDeliveries).toBe(3)
    expect(await reopened.stats(5)).toEqual(await q.stats(5))
    // weight 1 (pass 0) goes before weight 3 (pass 1/3); message 1 is back at the head of weight 3
    const a = await lease(reopened, 11, 5)
    expect(a.map((l) => [l.messageId, l.deliveryCount])).toEqual([
      [2, 1],
      [1, 2],
      [3, 1],
    ])
  })

  it('deletes ready messages that outlived the message TTL, at the lease that reaches them or by a tick', async () => {
    const q = await queue({ messageTtlMs: 1000 })
    await enqueue(q, 0, { body: text('old1') }, { body: text('old2'), weight: 3 })
    await enqueue(q, 600, { body: text('young') })
    expect(await q.ttlDue(999)).toBe(false)
    expect(await q.ttlDue(1000)).toBe(true)
    // The lease at 1000 reaches all three: the two that are 1000 ms old are deleted, not delivered.
    const got = await lease(q, 1000, 10, 100)
    expect(got.map((l) => new TextDecoder().decode(l.body))).toEqual(['young'])
    expect((await q.stats(1000)).messages).toBe(1)
    // Its lease runs out at 1100: back in ready, 500 ms old. A tick at 1599 keeps it, 1600 deletes it.
    await q.apply({ type: 'tick' }, 1599)
    expect((await q.stats(1599)).weights.find((w) => w.weight === 1)?.ready).toBe(1)
    expect(await q.ttlDue(1600)).toBe(true)
    await q.apply({ type: 'tick' }, 1600)
    expect((await q.stats(1600)).messages).toBe(0)
    expect((await q.stats(1600)).counters).toMatchObject({
      enqueued: 3,
      delivered: 1,
      expired: 1,
      discarded: 3,
    })
    expect(await q.ttlDue(5000)).toBe(false)
    expect(await lease(q, 1700)).toEqual([])
    // Nothing of the messages is left (records, bodies, ready, lease and delay index entries).
    const left = (await dump()).map(([k]) => k[PREFIX.length] as number)
    expect(left.filter((tag) => [0x10, 0x11, 0x20, 0x21, 0x22, 0x24].includes(tag))).toEqual([])
  })

  it('deletes by a tick only a head run of outlived messages, and nothing without a TTL', async () => {
    const q = await queue({ messageTtlMs: 1000, expiryBatchMax: 2 })
    await enqueue(q, 0, ...Array.from({ length: 5 }, () => ({ body: text('x') })))
    await enqueue(q, 800, { body: text('y') })
    await q.apply({ type: 'tick' }, 1000) // at most 2 per tick
    expect((await q.stats(1000)).messages).toBe(4)
    await q.apply({ type: 'tick' }, 1001)
    await q.apply({ type: 'tick' }, 1002)
    expect((await q.stats(1002)).messages).toBe(1) // the one enqueued at 800 stays until 1800
    await q.apply({ type: 'configure', config: { messageTtlMs: 0 } }, 1003)
    await q.apply({ type: 'tick' }, 9000)
    expect((await q.stats(9000)).messages).toBe(1)
    expect(await q.ttlDue(9000)).toBe(false)
  })

  it("restarts a redriven message's TTL at the redrive (restartTtl), keeping its enqueue time", async () => {
    const q = await queue({ messageTtlMs: 1000, maxDeliveries: 1 })
    await enqueue(q, 0, { body: text('a') }, { body: text('b') }, { body: text('c') })
    expect(await lease(q, 0, 3, 20)).toHaveLength(3)
    await q.apply({ type: 'tick' }, 20) // all three die at their deadline, 20 ms old
    expect(q.deadCount()).toBe(3)
    await q.apply({ type: 'configure', config: { maxDeliveries: 3 } }, 21)
    // An operator redrives old dead letters 5 s later: each has the whole TTL again.
    expect(idsOf(await q.apply({ type: 'redriveDead', max: 2, restartTtl: true }, 5000))).toEqual([1, 2])
    const back = await lease(q, 5000, 1, 100)
    expect(back.map((l) => [l.messageId, l.enqueuedAtMs, l.deliveryCount])).toEqual([[1, 0, 2]])
    await q.apply({ type: 'tick' }, 5100) // its lease expires: ready again, from its record
    const r = await queue() // and the TTL's start survives a reopen
    expect((await r.listReady(10)).map((m) => [m.messageId, m.enqueuedAtMs])).toEqual([
      [1, 0],
      [2, 0],
    ])
    expect(await r.ttlDue(5999)).toBe(false)
    await r.apply({ type: 'tick' }, 5999)
    expect((await r.stats(5999)).counters.discarded).toBe(0)
    expect(await r.ttlDue(6000)).toBe(true)
    await r.apply({ type: 'tick' }, 6000)
    expect((await r.stats(6000)).counters.discarded).toBe(2)
    // A redrive without the flag (as every entry written before it existed) decides as before:
    // the TTL counts from the enqueue, so the lease that reaches message 3 deletes it.
    expect(idsOf(await r.apply({ type: 'redriveDead', max: 2 }, 6001))).toEqual([3])
    expect(await lease(r, 6002)).toEqual([])
    expect((await r.stats(6002)).counters.discarded).toBe(3)
  })
})
