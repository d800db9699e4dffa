import {
  type LeasedMessage,
  LeaseOutcome,
  type LeaseRequest,
  type LeaseResponse,
  LimitExceededError,
  type MqError,
  toGrpcStatus,
  UnavailableError,
} from '@mq/protocol'
import { describe, expect, it, vi } from 'vitest'
import { FakeBroker } from '../test/fake-broker'
import { MqClient } from './client'
import { Consumer } from './consumer'
import type { Delivery } from './delivery'
import type { Router } from './router'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
/** A stand-in connection whose long polls (Connection.polls) go to its `queue` stub too. */
const withPolls = <T extends { queue: unknown }>(c: T) => ({ ...c, polls: c.queue })

/** A router of one queue `q` of one partition, whose leader's Queue calls are `queue`'s. */
const onePartitionRouter = (queue: object) =>
  ({
    options: { attemptMs: 1_000, backoff: { initialMs: 10, maxMs: 100, multiplier: 2 } },
    route: async () => ({ queue: 'q', queueId: 1, routeEpoch: 1, partitions: [{ partition: 0 }] }),
    cachedRoute: () => undefined,
    partition: (_q: string, partition: number, op: (c: unknown, t: unknown) => Promise<unknown>) =>
      op(withPolls({ queue }), { queue: 'q', partition, routeEpoch: 1 }),
  }) as unknown as Router

/** A settle call the fake router was asked for. */
interface SettleCall {
  readonly kind: 'ack' | 'nack' | 'extend'
  readonly leaseIds: readonly string[]
  readonly release?: boolean
}

/**
 * A router stand-in whose partitions hold `ready[p]` messages: a lease takes `latencyMs` (200
 * ms for one that must not wait, 30 otherwise, by default), then up to its max at once, or
 * long-polls (in 5 ms steps) for its wait. Records every lease request, and every settle call,
 * which `settle` answers (by default at once, every lease OK; an MqError it returns fails the
 * call with it, as the router does once it gives up).
 */
function fakeRouter(
  ready: number[],
  latencyMs: (waitMs: number) => number = (waitMs) => (waitMs === 0 ? 200 : 30),
  settle: (call: SettleCall) => Promise<MqError | undefined> = async () => undefined,
) {
  const requests: {
    partition: number
    max: number
    waitMs: number
    visibilityMs: number
    attempt: string
    repeat: boolean
  }[] = []
  const settles: SettleCall[] = []
  let id = 1
  /** A broker of a version before ack_lease_ids: it answers no ack results. */
  const lease = async (partition: number, req: LeaseRequest): Promise<LeaseResponse> => {
    requests.push({
      partition,
      max: req.max,
      waitMs: req.waitMs,
      visibilityMs: req.visibilityMs,
      attempt: req.attempt,
      repeat: req.attemptRepeat,
    })
    await sleep(latencyMs(req.waitMs))
    const deadline = Date.now() + req.waitMs
    while ((ready[partition] ?? 0) === 0 && Date.now() < deadline) await sleep(5)
    const n = Math.min(ready[partition] ?? 0, req.max)
    ready[partition] = (ready[partition] ?? 0) - n
    return {
      messages: Array.from({ length: n }, () => {
        const m = id++
        return { id: m, leaseId: `${m}.1`, body: new Uint8Array(), headers: {}, weight: 1, deliveryCount: 1 }
      }) as unknown as LeasedMessage[],
      ackResults: [],
    }
  }
  type Callback = (e: unknown, r?: unknown) => void
  const settleMethod =
    (kind: SettleCall['kind']) =>
    (req: { leaseIds: string[]; release?: boolean }, _md: unknown, _o: unknown, cb: Callback) => {
      const call: SettleCall = {
        kind,
        leaseIds: req.leaseIds,
        ...(kind === 'nack' ? { release: req.release } : {}),
      }
      settles.push(call)
      void settle(call).then((error) =>
        error
          ? cb(toGrpcStatus(error))
          : cb(null, {
              results: req.leaseIds.map((leaseId) => ({
                leaseId,
                outcome: LeaseOutcome.LEASE_OUTCOME_OK,
                deadlineMs: 0,
              })),
            }),
      )
      return { cancel: () => {} }
    }
  const route = {
    queue: 'q',
    queueId: 1,
    routeEpoch: 1,
    partitions: ready.map((_, partition) => ({ partition })),
    config: { visibilityTimeoutMs: 30_000 },
  }
  const router = {
    options: { attemptMs: 1_000, backoff: { initialMs: 10, maxMs: 100, multiplier: 2 } },
    route: async () => route,
    cachedRoute: () => route,
    partition: (_queue: string, partition: number, op: (c: unknown, t: unknown) => Promise<unknown>) =>
      op(
        withPolls({
          queue: {
            lease: (req: LeaseRequest, _md: unknown, _o: unknown, cb: (e: null, r: unknown) => void) => {
              void lease(partition, req).then((r) => cb(null, r))
              return { cancel: () => {} } // the call grpc-js returns; a close cancels it
            },
            ack: settleMethod('ack'),
            nack: settleMethod('nack'),
            extend: settleMethod('extend'),
          },
        }),
        { queue: 'q', partition, routeEpoch: 1 },
      ),
  }
  return { router: router as unknown as Router, requests, settles }
}

/** What the consumer's timers need: setTimeout, setImmediate, and both clocks. */
const FAKED = ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date', 'performance'] as const

/** Runs `test` under fake timers (restored after, also when it fails). */
async function withFakeTimers(test: () => Promise<void>): Promise<void> {
  vi.useFakeTimers({ toFake: [...FAKED] })
  try {
    await test()
  } finally {
    vi.useRealTimers()
  }
}

/** Whether `promise` settles while fake time advances by `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false
  void promise.then(
    () => {
      settled = true
    },
    () => {
      settled = true
    },
  )
  await vi.advanceTimersByTimeAsync(ms)
  return settled
}

/**
 * Under fake timers: a consumer of 400 ms leases, not extended, is handed message `firstId`
 * within 310 ms; `laterMs` after, the buffered next one is dropped (its lease may have ended),
 * not handed out, and nothing else comes.
 */
async function expectSecondDropped(router: Router, firstId: number, laterMs: number): Promise<void> {
  const consumer = new Consumer(router, 'q', {
    prefetch: 4,
    waitMs: 50,
    visibilityMs: 400,
    autoExtend: false,
  })
  const it = consumer[Symbol.asyncIterator]()
  const first = it.next()
  expect(await settlesWithin(first, 310)).toBe(true)
  expect(((await first).value as Delivery).id).toBe(firstId)
  await vi.advanceTimersByTimeAsync(laterMs)
  expect(await settlesWithin(it.next(), 1_000)).toBe(false)
  await closeAsTimePasses(consumer)
}

/** Closes `consumer` while fake time runs (its fake leases end only as time passes). */
async function closeAsTimePasses(consumer: Consumer): Promise<void> {
  const closing = consumer.close()
  while (!(await settlesWithin(closing, 100))) {}
}

describe('Consumer', () => {
  it('leases from a partition that holds nothing while as many others as prefetch stay busy (the acks’ room is theirs)', () =>
    withFakeTimers(async () => {
      // Prefetch 1 (`consume` with concurrency 1) over two partitions, the second never empty:
      // each of its acks kept its room for its own next lease (AckRoom), and the first, once
      // its one message was acked, never leased again (1 of its 5 in 10 s, against 476 of the
      // other's).
      const ready = [5, 1_000_000]
      const { router } = fakeRouter(ready, (waitMs) => (waitMs === 0 ? 20 : 5))
      const consumer = new Consumer(router, 'q', { prefetch: 1, waitMs: 100 })
      const got = [0, 0]
      const reading = (async () => {
        for await (const d of consumer) {
          got[d.partition] = (got[d.partition] ?? 0) + 1
          await d.ack()
        }
      })()
      await vi.advanceTimersByTimeAsync(10_000)
      expect(got[0]).toBe(5)
      expect(got[1]).toBeGreaterThan(100)
      await closeAsTimePasses(consumer)
      await reading
    }))
  it('leases again once acks and nacks past prefetch go at the wake of a fetcher that carried acks', () =>
    withFakeTimers(async () => {
      // A lease brings two messages with prefetch 1 (a repeat of its attempt may bring more
      // than asked); both are nacked at once: two nacks waiting to be sent, past prefetch. The
      // fetcher, woken by their room, waited for them to go and, as it stopped carrying acks,
      // sent them itself: the wake they gave found no fetcher waiting yet, and the consumer
      // never leased again (found by a multi-partition lease simulation, 2026-12-07).
      const leases: number[] = []
      let id = 0
      const leased = (n: number) =>
        Array.from({ length: n }, () => {
          const m = ++id
          return {
            id: m,
            leaseId: `${m}.1`,
            body: new Uint8Array(),
            headers: {},
            weight: 1,
            deliveryCount: 1,
          }
        })
      const ok = (leaseIds: string[]) => ({
        results: leaseIds.map((leaseId) => ({
          leaseId,
          outcome: LeaseOutcome.LEASE_OUTCOME_OK,
          deadlineMs: 0,
        })),
      })
      type Callback = (e: null, r: unknown) => void
      const router = onePartitionRouter({
        lease: (req: LeaseRequest, _md: unknown, _o: unknown, cb: Callback) => {
          leases.push(req.max)
          const n = leases.length === 1 ? 2 : req.max
          setTimeout(() => cb(null, { messages: leased(n), ackResults: [] }), 10)
          return { cancel: () => {} }
        },
        nack: (req: { leaseIds: string[] }, _md: unknown, _o: unknown, cb: Callback) => {
          setTimeout(() => cb(null, ok(req.leaseIds)), 10)
          return { cancel: () => {} }
        },
      })
      const consumer = new Consumer(router, 'q', { prefetch: 1, waitMs: 100 })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 100)).toBe(true)
      const second = it.next()
      expect(await settlesWithin(second, 0)).toBe(true)
      void ((await first).value as Delivery).nack()
      void ((await second).value as Delivery).nack()
      // The nacks go, and a lease brings the next message.
      expect(await settlesWithin(it.next(), 1_000)).toBe(true)
      expect(leases.length).toBeGreaterThan(1)
      await closeAsTimePasses(consumer)
    }))

  it('asks a waiting partition again when another partition’s lease returns less than it held room for', async () => {
    // Partition 0 brings 2 messages and then none; its next lease (asked without waiting,
    // holding the other 6 of room) is slow, and partition 1's long poll ends empty meanwhile
    // and finds no room. Partition 1's messages arrive later. The reader keeps everything
    // unsettled (it acks in batches of 5), so only the room freed by partition 0's lease can
    // wake the fetcher of partition 1.
    const ready = [0, 0]
    const { router } = fakeRouter(ready)
    setTimeout(() => {
      ready[0] = 2
    }, 200)
    setTimeout(() => {
      ready[1] = 5
    }, 1_000)
    const consumer = new Consumer(router, 'q', { prefetch: 8, waitMs: 300, autoExtend: false })
    const got: unknown[] = []
    const reading = (async () => {
      for await (const d of consumer) {
        got.push(d)
        if (got.length === 5) break
      }
    })()
    await Promise.race([reading, sleep(5_000)])
    expect(got.length).toBe(5)
    await consumer.close()
  })

  it('backs off after long polls the server answers empty at once (past its poll limit, on a stale estimate)', () =>
    withFakeTimers(async () => {
      // A server past its long-poll limit answers at once when the partition may have messages:
      // empty while the queue is paused or out of delivery tokens with messages ready, or when
      // a lease (a Raft entry) finds none. Until an audit the consumer polled again at once,
      // here 1,000 requests a second, for as long as that lasted.
      const requests: number[] = []
      const router = onePartitionRouter({
        lease: (req: LeaseRequest, _md: unknown, _o: unknown, cb: (e: null, r: unknown) => void) => {
          requests.push(req.waitMs)
          setTimeout(() => cb(null, { messages: [], ackResults: [] }), 1)
          return { cancel: () => {} }
        },
      })
      const consumer = new Consumer(router, 'q', { waitMs: 5_000, autoExtend: false })
      const next = consumer[Symbol.asyncIterator]().next()
      expect(await settlesWithin(next, 2_000)).toBe(false)
      expect(requests.every((w) => w === 5_000)).toBe(true)
      // Backing off up to 10, 20, 40, 80, then 100 ms (full jitter): some 45 requests in 2 s,
      // not some 2,000.
      expect(requests.length).toBeLessThan(200)
      await closeAsTimePasses(consumer)
    }))

  it("asks for long polls of at most the server's 30 s, whatever its waitMs", () =>
    withFakeTimers(async () => {
      // The server answers a longer one empty at 30 s. Until 2026-12-07 a consumer with a
      // `waitMs` of 120 s took each such answer for an early one and backed off, and its router
      // waited for a silent leader's answer for 120 s (plus leaderSilenceMs), not 30.
      const requests: number[] = []
      const router = onePartitionRouter({
        lease: (req: LeaseRequest, _md: unknown, _o: unknown, cb: (e: null, r: unknown) => void) => {
          requests.push(req.waitMs)
          setTimeout(() => cb(null, { messages: [], ackResults: [] }), Math.min(req.waitMs, 30_000))
          return { cancel: () => {} }
        },
      })
      const partition = vi.spyOn(router, 'partition')
      const consumer = new Consumer(router, 'q', { waitMs: 120_000, autoExtend: false })
      const next = consumer[Symbol.asyncIterator]().next()
      expect(await settlesWithin(next, 95_000)).toBe(false)
      expect(requests).toEqual([30_000, 30_000, 30_000, 30_000])
      expect(partition.mock.calls.map((c) => c[3])).toEqual([30_000, 30_000, 30_000, 30_000])
      await closeAsTimePasses(consumer)
    }))

  it('never asks for more than 1,000 messages in one lease, however large prefetch is', async () => {
    const ready = [5_000, 0]
    const { router, requests } = fakeRouter(ready, () => 1)
    const consumer = new Consumer(router, 'q', { prefetch: 4_096, waitMs: 50, autoExtend: false })
    let n = 0
    for await (const d of consumer) {
      void d.ack().catch(() => {})
      if (++n === 3_000) break
    }
    expect(requests.length).toBeGreaterThan(0)
    expect(Math.max(...requests.map((r) => r.max))).toBeLessThanOrEqual(1_000)
  })
  it('counts a lease from when its request was sent: a buffered message is not handed out once that has run out', () =>
    withFakeTimers(async () => {
      // The answer takes 300 ms (the lease's commit, transit): the leases of a and b, 400 ms
      // long, began at most 100 ms before it came. The reader takes b at 450 ms: its lease
      // may have ended (counted from the answer it would run until 700 ms).
      const { router } = fakeRouter([2], () => 300)
      await expectSecondDropped(router, 1, 140)
    }))

  it("counts a lease answered to a repeat of its attempt from the attempt's first request", () =>
    withFakeTimers(async () => {
      // The router asks twice in one operation (the first request's answer lost at a deadline,
      // say): the repeat's answer, at 300 ms, may hold leases the first request made at 0, 400
      // ms long. The reader takes b at 400 ms: by then it may have ended (counted from the
      // repeat, at 150 ms, it would run until 550 ms).
      const { router, requests } = fakeRouter([4], () => 150)
      const partition = router.partition.bind(router)
      type Op = Parameters<Router['partition']>[2]
      type Callback = (e: unknown, r?: unknown) => void
      // The first request's answer is lost (DEADLINE_EXCEEDED after the lease was made).
      const losing =
        (op: Op): Op =>
        (connection, target, attemptMs) => {
          const c = connection as unknown as { queue: { lease: (...a: unknown[]) => unknown } }
          const queue = {
            ...c.queue,
            lease: (req: unknown, md: unknown, o: unknown, cb: Callback) =>
              c.queue.lease(req, md, o, () => cb({ code: 4, details: 'deadline exceeded' })),
          }
          return op({ ...c, queue, polls: queue } as unknown as typeof connection, target, attemptMs)
        }
      ;(router as { partition: unknown }).partition = (q: string, p: number, op: Op, ...rest: unknown[]) =>
        (partition as (...a: unknown[]) => Promise<unknown>)(q, p, losing(op), ...rest).catch(() =>
          (partition as (...a: unknown[]) => Promise<unknown>)(q, p, op, ...rest),
        )
      // Messages 1 and 2 went with the lost answer.
      await expectSecondDropped(router, 3, 90)
      expect(requests.slice(0, 2).map((r) => r.repeat)).toEqual([false, true])
    }))

  it.each([
    [8_880, true],
    [8_910, false],
  ])(
    'counts a lease of 10 s as 10 s / 1.01 (the group clock may run 1 percent fast), less the 1 s give-back margin: a buffered message taken at %i ms is handed out: %s',
    (atMs, handedOut) =>
      withFakeTimers(async () => {
        const { router } = fakeRouter([2], () => 0)
        const consumer = new Consumer(router, 'q', {
          prefetch: 4,
          waitMs: 50,
          visibilityMs: 10_000,
          autoExtend: false,
        })
        const it = consumer[Symbol.asyncIterator]()
        const first = it.next()
        expect(await settlesWithin(first, 5)).toBe(true)
        await vi.advanceTimersByTimeAsync(atMs - 5)
        expect(await settlesWithin(it.next(), 1)).toBe(handedOut)
        await closeAsTimePasses(consumer)
      }),
  )

  it('gives back an unextended lease’s buffered messages a margin before its end, not at it', () =>
    withFakeTimers(async () => {
      // 30 s leases: the local deadline is 29.70 s (1 % early), the give-back 1 s before it.
      // The reader holds a and never takes b; b goes back with release() by 28.8 s.
      const { router, settles } = fakeRouter([2], () => 1)
      const consumer = new Consumer(router, 'q', {
        prefetch: 4,
        waitMs: 50,
        visibilityMs: 30_000,
        autoExtend: false,
      })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 5)).toBe(true)
      const a = (await first).value as Delivery
      await vi.advanceTimersByTimeAsync(28_600)
      expect(settles.filter((c) => c.kind === 'nack')).toHaveLength(0)
      await vi.advanceTimersByTimeAsync(200)
      expect(settles).toContainEqual({ kind: 'nack', leaseIds: [`${a.id + 1}.1`], release: true })
      // Gone from the buffer: not handed out, though its lease still runs.
      expect(await settlesWithin(it.next(), 500)).toBe(false)
      await closeAsTimePasses(consumer)
    }))

  it('gives back an unextended lease answered within its give-back margin instead of handing it out', () =>
    withFakeTimers(async () => {
      // The answer takes 370 ms (a slow commit): the 400-ms leases end locally at 396 ms, and
      // their messages were due to leave the buffer 40 ms before (a tenth of the visibility).
      // The reader, waiting, is woken before the give-back timer (due at once) runs: a and b
      // are given back, not handed out with 26 ms left that the handler cannot use.
      const { router, settles } = fakeRouter([2], () => 370)
      const consumer = new Consumer(router, 'q', {
        prefetch: 4,
        waitMs: 50,
        visibilityMs: 400,
        autoExtend: false,
      })
      const first = consumer[Symbol.asyncIterator]().next()
      expect(await settlesWithin(first, 1_000)).toBe(false)
      const released = settles.filter((c) => c.kind === 'nack' && c.release).flatMap((c) => c.leaseIds)
      expect(released.sort()).toEqual(['1.1', '2.1'])
      await closeAsTimePasses(consumer)
    }))

  it('keeps counting a delivery the application extended against prefetch until that extension ends', () =>
    withFakeTimers(async () => {
      // prefetch 1, 1 s leases, no auto-extension: the reader extends a by 5 s at 0.5 s. b is
      // leased only once a's extension runs out (~5.45 s), not at a's first deadline (~0.99 s).
      const { router, requests } = fakeRouter([2], () => 1)
      const consumer = new Consumer(router, 'q', {
        prefetch: 1,
        waitMs: 50,
        visibilityMs: 1_000,
        autoExtend: false,
      })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 5)).toBe(true)
      const a = (await first).value as Delivery
      await vi.advanceTimersByTimeAsync(500)
      expect(await settlesWithin(a.extend(5_000), 10)).toBe(true)
      const leases = requests.length
      const second = it.next()
      expect(await settlesWithin(second, 3_000)).toBe(false)
      expect(requests.length).toBe(leases)
      expect(await settlesWithin(second, 2_500)).toBe(true)
      await closeAsTimePasses(consumer)
    }))

  it('goes on extending a delivery the application extended while the consumer extends it (autoExtend)', () =>
    withFakeTimers(async () => {
      // The broker keeps the last extension it applied: had the consumer stopped at the
      // application's (10 s), one of its own sent at the same moment could have ended the
      // lease after 1 s, unextended.
      const { router, settles } = fakeRouter([1], () => 1)
      const consumer = new Consumer(router, 'q', { prefetch: 1, waitMs: 50, visibilityMs: 1_000 })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 5)).toBe(true)
      const a = (await first).value as Delivery
      expect(await settlesWithin(a.extend(10_000), 10)).toBe(true)
      const extends0 = settles.filter((c) => c.kind === 'extend').length
      await vi.advanceTimersByTimeAsync(2_000)
      expect(settles.filter((c) => c.kind === 'extend').length).toBeGreaterThanOrEqual(extends0 + 3)
      expect(await settlesWithin(a.ack(), 10)).toBe(true)
      await closeAsTimePasses(consumer)
    }))

  it('does not hand out a buffered message whose lease ran out while its extension was still being retried', () =>
    withFakeTimers(async () => {
      // Every extension fails, after 1 s (the router retrying through a failover): the one
      // sent at 100 ms is still under way at the leases' end (200 ms) and when the reader
      // takes b (300 ms). b is given back (released), not handed out.
      const { router, settles } = fakeRouter(
        [2],
        () => 10,
        async (call) => {
          if (call.kind !== 'extend') return undefined
          await sleep(1_000)
          return new UnavailableError('gave up after 9 attempts in 1000 ms: the partition is failing over')
        },
      )
      const errors: unknown[] = []
      const consumer = new Consumer(router, 'q', {
        prefetch: 4,
        waitMs: 50,
        visibilityMs: 200,
        onError: (e) => errors.push(e),
      })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 20)).toBe(true)
      const a = (await first).value as Delivery
      await vi.advanceTimersByTimeAsync(280)
      expect(settles.filter((c) => c.kind === 'extend')).toHaveLength(1) // under way
      expect(await settlesWithin(it.next(), 500)).toBe(false)
      expect(settles).toContainEqual({ kind: 'nack', leaseIds: [`${a.id + 1}.1`], release: true })
      await closeAsTimePasses(consumer)
    }))

  it('lets go of a lease past extendMaxMs when it ends, not a visibility after its last extension was due', () =>
    withFakeTimers(async () => {
      // prefetch 1: b is leased only once a's lease (400 ms, never settled, no extension past
      // extendMaxMs 0) stops counting: at 400 ms, so b comes at ~430 ms (it came at ~660).
      const { router } = fakeRouter([2], () => 30)
      const consumer = new Consumer(router, 'q', {
        prefetch: 1,
        waitMs: 50,
        visibilityMs: 400,
        extendMaxMs: 0,
      })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 40)).toBe(true)
      const second = it.next()
      expect(await settlesWithin(second, 350)).toBe(false) // 390 ms
      expect(await settlesWithin(second, 160)).toBe(true) // 550 ms
      await closeAsTimePasses(consumer)
    }))

  it.each([
    ['throws (a logger that fails)', false],
    ['rejects, async (a logger whose call failed)', true],
  ])('rides out failures whose onError %s without an unhandled rejection', async (_, async) => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    try {
      const { router } = fakeRouter([3])
      // The first leases fail as in a failover (retriable): the loop reports them and goes on.
      const partition = router.partition.bind(router)
      let failures = 2
      ;(router as { partition: unknown }).partition = (...args: Parameters<Router['partition']>) =>
        failures-- > 0 ? Promise.reject(new UnavailableError('leader gone')) : partition(...args)
      const reported: unknown[] = []
      const consumer = new Consumer(router, 'q', {
        waitMs: 50,
        onError: (error) => {
          reported.push(error)
          const failure = new Error('logger failed')
          if (async) return Promise.reject(failure)
          throw failure
        },
      })
      const got: Delivery[] = []
      for await (const m of consumer) {
        got.push(m)
        if (got.length === 3) break
      }
      await consumer.close()
      await new Promise((r) => setImmediate(r))
      expect(got).toHaveLength(3)
      expect(reported.length).toBeGreaterThanOrEqual(2)
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
  })

  it('counts a delivery whose ack failed without a result against prefetch again, until its lease ends', () =>
    withFakeTimers(async () => {
      // The ack of message 1 fails (the router gave up during a failover); the others succeed.
      const { router } = fakeRouter(
        [3],
        () => 0,
        async (call) =>
          call.kind === 'ack' && call.leaseIds.includes('1.1') ? new UnavailableError('electing') : undefined,
      )
      const consumer = new Consumer(router, 'q', {
        prefetch: 1,
        waitMs: 50,
        visibilityMs: 400,
        autoExtend: false,
      })
      const it = consumer[Symbol.asyncIterator]()
      const first = it.next()
      expect(await settlesWithin(first, 10)).toBe(true)
      const one = (await first).value as Delivery
      const failed = one.ack().catch((e: unknown) => e)
      expect(await settlesWithin(failed, 10)).toBe(true)
      expect(await failed).toBeInstanceOf(UnavailableError)
      expect(one.settled).toBe(false)
      // Message 2 was leased while the ack was on its way (its room was freed at the call).
      const second = it.next()
      expect(await settlesWithin(second, 10)).toBe(true)
      expect(await settlesWithin(((await second).value as Delivery).ack(), 10)).toBe(true)
      // Message 1 is leased and unsettled again: no room for message 3 until its lease ends
      // (400 ms from its request, less the 1 percent the group clock may run fast).
      const third = it.next()
      expect(await settlesWithin(third, 300)).toBe(false)
      expect(await settlesWithin(third, 200)).toBe(true)
      await closeAsTimePasses(consumer)
    }))

  it('leases no more while more acks and nacks than prefetch wait to be sent (nacks of as many delays, a call each)', () =>
    withFakeTimers(async () => {
      // A backlog, leased at once; each nack call takes 50 ms. Nacks of one delay share a call,
      // but these have one delay each (a jittered backoff): a call each, one at a time.
      const { router, settles } = fakeRouter(
        [1_000_000],
        () => 1,
        () => sleep(50).then(() => undefined),
      )
      const consumer = new Consumer(router, 'q', { prefetch: 10, waitMs: 50, autoExtend: false })
      let delivered = 0
      const reading = (async () => {
        for await (const d of consumer) {
          delivered++
          void d.nack(1_000 + delivered).catch(() => {})
        }
      })()
      await vi.advanceTimersByTimeAsync(1_000)
      // ~20 nacks went out in that second. Before, each nack freed its room at the call, and
      // the consumer went on leasing: 5,000 deliveries, their nacks queued in memory (their
      // leases lapsing meanwhile), for as long as the backlog lasted.
      expect(settles.length).toBeGreaterThanOrEqual(15)
      expect(delivered).toBeLessThanOrEqual(3 * 10 + settles.length)
      await closeAsTimePasses(consumer)
      await reading
    }))

  it('dates a lease from its own request after leases refused for longer than the visibility (nothing was leased)', () =>
    withFakeTimers(async () => {
      const { router, requests, settles } = fakeRouter([1], () => 0)
      // For 1 s every lease is refused before anything is leased (too many long polls, an
      // overloaded leader: LIMIT_EXCEEDED); then one is answered with the message.
      const partition = router.partition.bind(router)
      const refusedUntil = Date.now() + 1_000
      ;(router as { partition: unknown }).partition = (...args: Parameters<Router['partition']>) =>
        Date.now() < refusedUntil
          ? Promise.reject(new LimitExceededError('too many long polls'))
          : partition(...args)
      const consumer = new Consumer(router, 'q', {
        prefetch: 1,
        waitMs: 50,
        visibilityMs: 400,
        onError: () => {},
      })
      const first = consumer[Symbol.asyncIterator]().next()
      // Handed out: its lease began with the request that made it, not 1 s before with the
      // first one refused (it was dropped as lapsed and given back).
      expect(await settlesWithin(first, 1_500)).toBe(true)
      expect(settles.filter((s) => s.kind === 'nack')).toEqual([])
      expect(requests.at(-1)?.repeat).toBe(false)
      expect(await settlesWithin(((await first).value as Delivery).ack(), 10)).toBe(true)
      await closeAsTimePasses(consumer)
    }))

  it('asks again under the same lease attempt after a lease failed (its answer may be lost), under a new one once answered', async () => {
    const { router, requests } = fakeRouter([100], () => 5)
    // The first lease is made, but its answer is lost (a deadline, a failover).
    const partition = router.partition.bind(router)
    let lost = 1
    ;(router as { partition: unknown }).partition = (...args: Parameters<Router['partition']>) => {
      const answer = partition(...args)
      if (lost-- <= 0) return answer
      // Meanwhile the queue's visibility timeout was raised, and the route refreshed.
      const config = router.cachedRoute('q')?.config as { visibilityTimeoutMs: number }
      config.visibilityTimeoutMs = 120_000
      return answer.then(() => Promise.reject(new UnavailableError('answer lost')))
    }
    const consumer = new Consumer(router, 'q', { prefetch: 4, waitMs: 50, onError: () => {} })
    let got = 0
    for await (const m of consumer) {
      await m.ack()
      if (++got === 6) break
    }
    await consumer.close()
    expect(requests.length).toBeGreaterThanOrEqual(3)
    const [lostOne, again, next] = requests.map((r) => r.attempt)
    expect(lostOne).toMatch(/^[0-9a-f-]{36}$/)
    expect(again).toBe(lostOne)
    expect(next).not.toBe(again)
    expect(new Set(requests.slice(1).map((r) => r.attempt)).size).toBe(requests.length - 1)
    // Only the repeat says so (the broker looks for the attempt's leases only then).
    expect(requests.map((r) => r.repeat)).toEqual(requests.map((_, i) => i === 1))
    // The repeat asks for (and holds its answer by) the attempt's visibility: the leases it is
    // answered are those the first request made. A new attempt asks for the new one.
    expect(requests.slice(0, 3).map((r) => r.visibilityMs)).toEqual([30_000, 30_000, 120_000])
  })

  it('leases from 12 partitions at once without a listener-leak warning', async () => {
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.name)
    process.on('warning', onWarning)
    try {
      // Twelve long polls under way, each listening for the consumer's stop.
      const { router, requests } = fakeRouter(Array.from({ length: 12 }, () => 0))
      const consumer = new Consumer(router, 'q', { waitMs: 200 })
      void consumer[Symbol.asyncIterator]().next()
      await vi.waitFor(() => expect(requests.length).toBeGreaterThanOrEqual(12))
      await consumer.close()
      await new Promise((r) => setImmediate(r))
      expect(warnings.filter((w) => w === 'MaxListenersExceededWarning')).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('stops leasing from partitions a queue created again with fewer no longer has, and consumes the others', async () => {
    const broker = new FakeBroker()
    await broker.start()
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 1_000 })
    try {
      broker.addQueue('q', 4)
      const errors: unknown[] = []
      const consumer = client.consumer('q', { prefetch: 8, waitMs: 50, onError: (e) => errors.push(e) })
      const seen: string[] = []
      const reading = (async () => {
        for await (const m of consumer) {
          seen.push(m.text())
          await m.ack()
        }
      })()
      await vi.waitFor(() => expect(broker.leaseRequests.length).toBeGreaterThanOrEqual(4))
      // Deleted and created again with 2 partitions (a new route epoch).
      broker.addQueue('q', 2)
      const epoch = ++broker.epoch
      const routesBefore = broker.calls.filter((c) => c === 'getRoutes').length
      // Long polls under the new route (however long the consumer takes to learn of it: the
      // test once took a fixed 200 ms for it, too short on a busy machine).
      const polls = () => broker.leaseRequests.filter((r) => r.routeEpoch === epoch && r.waitMs > 0)
      await vi.waitFor(() => expect(polls().length).toBeGreaterThan(0), { timeout: 5_000 })
      await sleep(800)
      // Partitions 2 and 3 are not asked about again and again (each attempt a route fetch,
      // then UNAVAILABLE to onError after the deadline, for ever: ~15 route fetches a second).
      expect(broker.calls.filter((c) => c === 'getRoutes').length - routesBefore).toBeLessThanOrEqual(3)
      expect(errors).toEqual([])
      // The refill size is the half share of prefetch of 2 partitions (it stayed that of 4): from
      // each partition's second poll under the new route (the first may be sized before the
      // consumer counts the partitions again).
      for (const partition of [0, 1]) {
        const later = polls()
          .filter((r) => r.partition === partition)
          .slice(1)
        expect(later.length).toBeGreaterThan(0)
        expect(later.map((r) => r.max)).toEqual(later.map(() => 2))
      }
      // The partitions that are left are consumed.
      const producer = client.producer('q', { keyless: 'round-robin' })
      await Promise.all(['x', 'y', 'z', 'w'].map((body) => producer.send({ body })))
      await vi.waitFor(() => expect(seen.sort()).toEqual(['w', 'x', 'y', 'z']))
      await consumer.close()
      await reading
    } finally {
      await client.close()
      broker.stop()
    }
  })
})
