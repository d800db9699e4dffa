import { randomUUID } from 'node:crypto'
import { setMaxListeners } from 'node:events'
import {
  CONSUMER_ID_BYTES_MAX,
  LEASE_VISIBILITY_MS_MAX,
  LeaseOutcome,
  type LeaseResult,
  LONG_POLL_MS_MAX,
  leaseHoldMs,
  type MqError,
  QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS,
  type QueueRoute,
} from '@mq/protocol'
import { backoffMs, delay } from './backoff'
import { Delivery } from './delivery'
import { checkBoolean, checkInteger, definedOnly } from './option-checks'
import { mayHaveActed, PartitionNotFoundError, type Router } from './router'
import { resentResults, SettleBatcher, type Settlement } from './settle-batcher'
import { unary } from './unary'

export interface ConsumerOptions {
  /**
   * Messages leased and not yet settled, at most (buffered plus handed out). Acks and nacks
   * waiting to be sent (behind the call of their partition and kind that is out) count apart:
   * past as many again, the consumer leases no more until some go.
   */
  readonly prefetch: number
  /** The lease length asked for; 0 takes the queue's visibility timeout. */
  readonly visibilityMs: number
  /**
   * How long one lease request waits on the broker for a message (long poll; the server caps
   * it, at 30 s by default). 0: it does not wait, and an idle partition is asked again after a
   * backoff that grows with each empty answer (the client's `backoff`, 25 ms to 1 s); so is
   * one answered empty in less than half its wait (a server past its long-poll limit).
   */
  readonly waitMs: number
  /** Extend held leases before they end, until `extendMaxMs` after the delivery. */
  readonly autoExtend: boolean
  readonly extendMaxMs: number
  /** Identifies the consumer in the broker's leases. */
  readonly consumerId: string
  /** Told about retriable failures the consumer rides out (it keeps going). */
  readonly onError: (error: unknown) => void
}

/** The deliveries of one lease response, held under one timer. */
interface HeldLease {
  /** Its deliveries: all at first, those still held after each extension. */
  deliveries: readonly Delivery[]
  /** How many of them are still held. */
  live: number
  timer: ReturnType<typeof setTimeout> | undefined
  /**
   * When the earliest lease of the ones still held ends at the latest (performance.now()): the
   * visibility, less what the group's clock may take off it in real time (`leaseHoldMs`: a
   * leader catching the group's clock up runs it up to 1 % fast), counted from when the lease
   * request, or the last extension that succeeded for all of them, was sent. The broker's
   * lease began after that (it counts from when it applied the request), so this never comes
   * later than the broker's deadline.
   */
  deadlineMs: number
  /** Whether the consumer still extends it (autoExtend, within extendMaxMs). */
  extending: boolean
  /**
   * Unextended, its buffered deliveries leave the buffer this long before `deadlineMs`
   * (GIVE_BACK_MARGIN_MS_MAX); none is handed out within it either.
   */
  giveBackMarginMs: number
}

/** One partition's fetch loop. */
interface Fetcher {
  readonly partition: number
  done: Promise<void>
  /**
   * Its partition's acks wait for its next lease, which carries them (ack_lease_ids): set while
   * it leases without waiting (a busy partition), so that an ack rides with a lease instead of
   * taking a call of its own.
   */
  carrying: boolean
  /** The room its lease under way holds (counted in Consumer.#leasing). */
  reserved: number
}

/**
 * The room of acks held for their partition's next lease (Fetcher.carrying): counted against
 * prefetch for the other partitions, and free for that lease, so that the partition whose
 * messages were settled leases next with their acks (another busy partition took the room
 * first, and the acks went in Ack calls of their own: 4 % of them rode with a lease in the
 * consume benchmark).
 */
class AckRoom {
  readonly #byPartition = new Map<number, number>()
  #total = 0

  add(partition: number): void {
    this.#byPartition.set(partition, (this.#byPartition.get(partition) ?? 0) + 1)
    this.#total++
  }

  /** The room kept for `partition`. */
  of(partition: number): number {
    return this.#byPartition.get(partition) ?? 0
  }

  /** The room kept for the partitions other than `partition`. */
  others(partition: number): number {
    return this.#total - (this.#byPartition.get(partition) ?? 0)
  }

  /** Frees `partition`'s room; whether it had any. */
  clear(partition: number): boolean {
    const n = this.#byPartition.get(partition) ?? 0
    if (n === 0) return false
    this.#byPartition.delete(partition)
    this.#total -= n
    return true
  }
}

/** A monotonic clock for lease deadlines (a wall-clock step must not stretch one). */
const now = (): number => performance.now()

/** The soonest an extension that failed for a passing reason (a failover) is tried again. */
const EXTEND_RETRY_MIN_MS = 100
/**
 * How long before a lease's local deadline its buffered deliveries (never handed out) are given
 * back when it is not extended: a tenth of the visibility, at most this. The release must reach
 * the broker before the lease ends there, through a settle batch that may be under way; the
 * local deadline alone is only ~1 % early (`leaseHoldMs`).
 */
const GIVE_BACK_MARGIN_MS_MAX = 1_000

/** Most messages one lease asks for (a queue's default lease batch limit). */
const LEASE_MAX = 1000

/** Most messages a consumer holds (`prefetch`): a hundred leases' worth. */
export const PREFETCH_MAX = 100 * LEASE_MAX

/** Longest `waitMs` taken: the consumer asks for at most LONG_POLL_MS_MAX (30 s), the server's cap. */
const WAIT_MS_MAX = 3_600_000

export const DEFAULT_CONSUMER_OPTIONS: Omit<ConsumerOptions, 'consumerId'> = {
  prefetch: 64,
  visibilityMs: 0,
  waitMs: 5_000,
  autoExtend: true,
  extendMaxMs: 3_600_000,
  onError: () => {},
}

/**
 * Leases messages of one queue from all its partitions and hands them out in order of
 * arrival, as an async iterator. At most `prefetch` messages are leased and unsettled at a
 * time. `close()` stops leasing and gives buffered, never-handed-out messages back at once;
 * `stop()` does the same but goes on extending the handed-out ones until they are settled
 * (a graceful shutdown: stop, let the handlers finish, then close).
 */
export class Consumer implements AsyncIterable<Delivery> {
  readonly queue: string
  readonly #router: Router
  readonly #options: ConsumerOptions
  readonly #buffer: Delivery[] = []
  readonly #batchers = new Map<number, SettleBatcher>()
  /**
   * Leased and not yet settled (nor lapsed), each with the lease response it came in (whose
   * timer runs while one of its deliveries is held here).
   */
  readonly #held = new Map<Delivery, HeldLease>()
  /** How many of `#held` each partition has (partitions holding none are left out). */
  readonly #heldBy = new Map<number, number>()
  /** Settles one delivery (one function for all of them). */
  readonly #settle = (d: Delivery, s: Settlement): Promise<LeaseResult> => this.#settleOne(d, s)
  /** An ack or nack counted in `#unsent` went out: fetchers waiting for that may go. */
  readonly #sent = (): void => {
    this.#unsent--
    this.#wakeFetchersSoon()
  }
  /** Messages asked for by the lease requests in flight (counted against prefetch too). */
  #leasing = 0
  /** The room of acks held for their partition's next lease, kept for that lease. */
  readonly #ackRoom = new AckRoom()
  /**
   * Acks and nacks of held deliveries not sent yet (their room was freed at the call): past
   * prefetch of them, the fetchers wait. One call per partition and kind is out at a time, and
   * nacks of different delays each take a call: nacked with a jittered delay, a backlog was
   * leased as fast as it came (5,000 deliveries while 20 nack calls went, in the test), every
   * nack queued in memory and its lease lapsing before it went.
   */
  #unsent = 0
  /** The fewest messages a fetcher leases at a time while the reader still has some buffered. */
  #refillMin = 1
  #wakeScheduled = false
  /** The iterators waiting for a message (several `for await` loops may share a consumer). */
  readonly #readers: (() => void)[] = []
  #wakeFetchers: (() => void)[] = []
  /** The fetchers waiting for room (or for acks to go: see #fetchLoopOf). */
  readonly #waitingForRoom = new Set<Fetcher>()
  #failure: unknown
  /** No more leasing: stop(), close() or a failure. The iterator ends. */
  #closed = false
  /** stop() was called: leaving the iteration does not close the consumer (its caller does). */
  #stopping = false
  /** close() was called: held deliveries are let go, their extensions end. */
  #ended: Promise<void> | undefined
  readonly #stop = new AbortController()
  #loops: Promise<void> | undefined
  /**
   * The partitions leased from, each by one fetch loop: one is added for every partition the
   * queue's route adds, and one is dropped when a fresh route no longer has its partition.
   */
  readonly #fetchers = new Map<number, Fetcher>()
  /** Fetch loops whose partition is gone and that have not ended yet (stop() waits for them). */
  readonly #retired = new Set<Promise<void>>()
  /** The route the fetchers follow (the router's cached one when last looked at). */
  #route: QueueRoute | undefined

  /** Throws a RangeError naming the first option out of range (undefined ones take defaults). */
  constructor(router: Router, queue: string, options: Partial<ConsumerOptions> = {}) {
    this.#router = router
    this.queue = queue
    this.#options = { ...DEFAULT_CONSUMER_OPTIONS, consumerId: randomUUID(), ...definedOnly(options) }
    checkConsumerOptions(this.#options)
    // Every lease under way and every fetcher backing off listens for stop on this one signal:
    // one per partition, so more than ten is normal, not a leak (each removes its listener).
    setMaxListeners(0, this.#stop.signal)
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Delivery> {
    this.#start()
    try {
      while (true) {
        // Handed-out deliveries stay outstanding until settled (see #settleOne).
        const next = this.#buffer.shift()
        if (next) {
          // One whose lease may have lapsed while it waited in the buffer is dropped, not
          // handed out late: the broker delivers it again, maybe already to another consumer
          // (and, with ordered keys, the key's next message after it). Its deadline is the
          // local bound (HeldLease.deadlineMs): an extension still being retried does not count.
          // Unextended, not within its give-back margin either: a lease answered late (a slow
          // commit) wakes the reader before the give-back timer, due at once, runs, and its
          // messages were handed out with what little was left (until an audit).
          const lease = this.#held.get(next)
          if (lease && now() < lease.deadlineMs - (lease.extending ? 0 : lease.giveBackMarginMs)) yield next
          // Still held (its extension under way): given back, as close() gives back what it
          // never handed out; a lease that did run out answers so, which changes nothing.
          else if (lease) void next.release().catch(() => {})
          continue
        }
        if (this.#failure !== undefined) throw this.#failure
        if (this.#closed) return
        // The buffer ran dry: fetchers holding out for a fuller lease ask for what they can.
        this.#wakeFetchersSoon()
        await new Promise<void>((resolve) => this.#readers.push(resolve))
      }
    } finally {
      // Leaving the loop (break, return, throw) ends the consumer, unless stop() ended it: then
      // whoever stopped it closes it once the handed-out messages are settled.
      if (!this.#stopping || this.#failure !== undefined) await this.close()
    }
  }

  /**
   * Stops leasing and ends the iterator; gives back what was leased but never handed out.
   * Handed-out deliveries stay held, and extended, until they are settled or close() is called.
   */
  async stop(): Promise<void> {
    this.#stopping = true
    this.#closed = true
    this.#stop.abort()
    this.#wake()
    const unhanded = this.#buffer.splice(0).filter((d) => this.#held.has(d))
    await Promise.allSettled(unhanded.map((d) => d.release()))
    await this.#loops
    await Promise.all([...this.#fetchers.values()].map((f) => f.done))
    await Promise.all(this.#retired)
  }

  /**
   * Stops leasing (as stop()), lets go of the handed-out deliveries still unsettled (their
   * extensions end; their leases lapse unless settled before), and resolves once every
   * settlement asked for has had its answer.
   */
  close(): Promise<void> {
    this.#ended ??= (async () => {
      await this.stop()
      for (const lease of this.#held.values()) clearTimeout(lease.timer)
      this.#held.clear()
      this.#heldBy.clear()
      await Promise.all([...this.#batchers.values()].map((b) => b.drain()))
    })()
    return this.#ended
  }

  #start(): void {
    if (this.#loops) return
    this.#loops = this.#firstRoute().then(
      (route) => {
        if (route) this.#leaseFrom(route)
      },
      (error: unknown) => this.#fail(error),
    )
  }

  /**
   * Tells `onError` of a failure the consumer rides out. What `onError` throws is dropped: it
   * must not end a fetch loop or an extension round (an unhandled rejection ends the process:
   * an application whose logger threw crashed at the first failover). So is the rejection of
   * an async `onError` (one whose logger's call failed crashed the same way until an audit).
   */
  #report(error: unknown): void {
    try {
      const reported: unknown = this.#options.onError(error)
      if (reported instanceof Promise) reported.catch(() => {})
    } catch {}
  }

  /**
   * The queue's route, asked for until it comes (undefined: closed meanwhile): a consumer
   * started while the meta group is unavailable waits for it, as a running one rides it out.
   */
  async #firstRoute(): Promise<QueueRoute | undefined> {
    for (let failures = 0; !this.#closed; failures++) {
      try {
        // stop() ends the wait at once (the fetch, which others may share, goes on).
        return await this.#router.route(this.queue, false, undefined, this.#stop.signal)
      } catch (error) {
        if (this.#closed) return undefined
        if (!(error as MqError).retriable) throw error
        this.#report(error)
        await delay(backoffMs(this.#router.options.backoff, failures), this.#stop.signal)
      }
    }
    return undefined
  }

  /**
   * Makes the fetch loops match `route`: one for each of its partitions. Called with the first
   * route, and whenever the router's cached route changed: partitions added to the queue (the
   * broker answers STALE_ROUTE to requests routed before, and the router fetches the route),
   * or the queue deleted and created again with fewer (the loops of the partitions that are
   * gone stop; their leases could only fail, for ever).
   */
  #leaseFrom(route: QueueRoute): void {
    this.#route = route
    if (this.#closed) return
    const current = new Set(route.partitions.map((p) => p.partition))
    let retired = false
    for (const [partition, fetcher] of this.#fetchers) {
      if (current.has(partition)) continue
      this.#fetchers.delete(partition)
      this.#retired.add(fetcher.done)
      void fetcher.done.then(() => this.#retired.delete(fetcher.done))
      retired = true
    }
    // Half of a partition's share of prefetch: leasing one message per settled one would
    // make every lease (a Raft entry) carry a single message under load. Set before the new
    // loops start: each reads it before its first lease.
    const partitions = Math.max(1, current.size)
    this.#refillMin = Math.min(LEASE_MAX, Math.max(1, Math.floor(this.#options.prefetch / (2 * partitions))))
    for (const partition of current) {
      if (this.#fetchers.has(partition)) continue
      const fetcher: Fetcher = { partition, done: Promise.resolve(), carrying: false, reserved: 0 }
      this.#fetchers.set(partition, fetcher)
      fetcher.done = this.#fetchLoop(fetcher, route)
    }
    // A retired loop waiting for room ends once woken.
    if (retired) this.#wakeFetchersSoon()
  }

  /** Follows the router's cached route once it changed (partitions added, or fewer). */
  #followRoute(): void {
    const route = this.#router.cachedRoute(this.queue)
    if (route && route !== this.#route) this.#leaseFrom(route)
  }

  async #fetchLoop(fetcher: Fetcher, route: QueueRoute): Promise<void> {
    try {
      await this.#fetchLoopOf(fetcher, route)
    } finally {
      this.#carry(fetcher, false)
    }
  }

  /**
   * Whether `fetcher`'s next lease carries its partition's acks (Fetcher.carrying); the acks
   * held for it go in an Ack call once it no longer does.
   */
  #carry(fetcher: Fetcher, on: boolean): void {
    if (fetcher.carrying === on) return
    fetcher.carrying = on
    if (on) return
    if (this.#ackRoom.clear(fetcher.partition)) this.#wakeFetchersSoon()
    this.#batcher(fetcher.partition).resume()
  }

  async #fetchLoopOf(fetcher: Fetcher, route: QueueRoute): Promise<void> {
    const { partition } = fetcher
    let failures = 0
    // A busy partition (its last lease brought messages) is asked without waiting, for all the
    // room there is, which its request holds until it returns; an idle one is long-polled for
    // a little (refillMin), holding no room, so that it never keeps the others waiting. Held
    // messages may exceed prefetch by what idle partitions bring at once: (partitions - 1) x refillMin.
    let busy = false
    // Empty answers in a row to leases that did not wait (waitMs 0), or that a long poll got
    // much sooner than its wait (a server past its poll limit answers at once): the next one
    // backs off.
    let empty = 0
    // This loop's lease attempt: kept while its leases fail, since a lease may have been made
    // and its answer lost (a deadline, a failover): asked again under it, the broker answers
    // the leases it made that are still held instead of leaving them until their visibility
    // timeout. A new one once a lease is answered.
    let attempt = randomUUID()
    // When a lease under `attempt` was first sent, once one failed: its leases may date from then.
    let attemptSentAt: number | undefined
    // The visibility the attempt's first request asked for, once one failed: its repeats ask for
    // (and are held by) the same, since the broker answers them the leases that request made,
    // as they were (a raised visibility in a route refreshed meanwhile made the consumer hold
    // 30-s leases as 120-s ones and hand out messages past their end; found by an audit).
    let attemptVisibilityMs: number | undefined
    // Until the consumer closes or the partition is gone from the queue's route.
    while (!this.#closed && this.#fetchers.get(partition) === fetcher) {
      // The room of this partition's acks held for its next lease is its own (AckRoom).
      const space = this.#options.prefetch - this.#held.size - this.#leasing - this.#ackRoom.others(partition)
      if (
        space <= 0 ||
        (space < this.#refillMin && this.#buffer.length > 0) ||
        this.#unsent > this.#options.prefetch
      ) {
        // A busy partition out of room waits for its own acks, which it then carries: the
        // messages it just brought are about to be settled. Acks already waiting, or a wait for
        // anything else (a refill of a slow consumer's room, acks past prefetch to send), let
        // its acks go in Ack calls: a held ack would keep its handler waiting.
        // Waiting before it stops carrying: the acks and nacks that then go at once (unsent past
        // prefetch) wake the fetchers waiting when they go. Until 2026-12-07 (an audit) it waited
        // only after, their wake found none, and the consumer never leased again.
        const woken = new Promise<void>((resolve) => this.#wakeFetchers.push(resolve))
        this.#carry(
          fetcher,
          busy &&
            space <= 0 &&
            !this.#batcher(partition).acksQueued &&
            this.#unsent <= this.#options.prefetch,
        )
        this.#waitingForRoom.add(fetcher)
        await woken
        this.#waitingForRoom.delete(fetcher)
        continue
      }
      const max: number = busy ? Math.min(space, LEASE_MAX) : Math.min(space, this.#refillMin)
      const reserved: number = busy ? max : 0
      // At most the server's long poll (it answers a longer one then): an empty answer at its end
      // is not an early one, and a silent leader's poll is timed out as the server would end it.
      const waitMs: number = busy ? 0 : Math.min(this.#options.waitMs, LONG_POLL_MS_MAX)
      // Sent, not left to the server's default: the extensions are timed by it, so both sides
      // must agree (the queue's visibility may have changed since the loop began).
      const visibilityMs =
        attemptVisibilityMs ??
        (this.#options.visibilityMs ||
          (this.#router.cachedRoute(this.queue) ?? route).config?.visibilityTimeoutMs ||
          QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS)
      this.#leasing += reserved
      fetcher.reserved = reserved
      // The room its acks kept for it goes into this lease (or back to all, not leasing busy).
      this.#ackRoom.clear(partition)
      // When the request that was answered was sent (the earliest of those answered, should
      // more be: retries, probes of other replicas): the leases began after it.
      const requestedAt = now()
      let sentAt = Number.POSITIVE_INFINITY
      // A repeat once a request under the attempt went out: a lease that failed, or the
      // router's retry of this one (at another replica, after a deadline).
      let repeat = attemptSentAt !== undefined
      // The answer was to a repeat: its leases may have been made by an earlier request.
      let answeredRepeat = false
      // A copy of this request may have leased: one answered, or lost after it went out
      // (UNAVAILABLE), or still under way when the call moved on (a silent leader's). One
      // refused (a limit, NOT_LEADER) or never sent leased nothing.
      let mayHaveLeased = false
      let outstanding = 0
      // A lease that does not wait carries the partition's acks queued now, and holds back those
      // settled while it is out for the next one (an Ack call each would cost the leader as much
      // as the lease).
      this.#carry(fetcher, waitMs === 0)
      const carried = waitMs === 0 ? this.#batcher(partition).takeAcks() : undefined
      const ackLeaseIds = carried ? [...carried.leaseIds] : []
      // Copies of the request that may have applied the acks (as the settle batcher counts them).
      let ackCopies = 0
      try {
        const response = await this.#router.partition(
          this.queue,
          partition,
          (connection, target) => {
            const at = now()
            const attemptRepeat = repeat
            repeat = true
            outstanding++
            ackCopies++
            // A long poll goes on the connection's channel for them: it must not hold up the
            // sends, acks and route fetches to the node (Connection.polls).
            const stub = waitMs > 0 ? connection.polls : connection.queue
            return unary(
              stub,
              stub.lease,
              {
                target,
                consumerId: this.#options.consumerId,
                max,
                visibilityMs,
                waitMs,
                attempt,
                attemptRepeat,
                ackLeaseIds,
              },
              // Not cut to the operation's deadline (the router's attemptMs): a long poll may wait
              // longer than it, and one cut short could lose the answer of a lease it made.
              this.#router.options.attemptMs + waitMs,
              // close() cancels a lease under way: a long poll ends at once, and the server
              // gives back what a lease took after the cancel. One that carries acks (it does
              // not wait) is left to finish: their settlements, asked for before, get answers.
              carried ? undefined : this.#stop.signal,
            )
              .then(
                (answer) => {
                  mayHaveLeased = true
                  sentAt = Math.min(sentAt, at)
                  answeredRepeat ||= attemptRepeat
                  return answer
                },
                (error: unknown) => {
                  if (mayHaveActed(error)) mayHaveLeased = true
                  else ackCopies--
                  throw error
                },
              )
              .finally(() => {
                outstanding--
              })
          },
          waitMs,
          carried ? undefined : this.#stop.signal,
        )
        if (carried) {
          // A server of a version before ack_lease_ids answers no results: they go on their own.
          if (response.ackResults.length > 0) carried.answer(response.ackResults, ackCopies > 1)
          else carried.sendAlone(ackCopies > 1)
          // What the acks' answers set off runs before the next lease goes out: an application
          // that closes the consumer once its last ack is done. A lease cancelled as it starts
          // still reaches the broker (grpc-js sends the cancel once its stream is up) and may
          // lease what comes meanwhile, for no one: in the clock-skew e2e test the next message
          // sent went to the next consumer a visibility (20 s) late.
          await new Promise<void>((resolve) => setImmediate(resolve))
        }
        failures = 0
        const answeredSentAt = Number.isFinite(sentAt) ? sentAt : requestedAt
        const leasedSince = answeredRepeat ? (attemptSentAt ?? requestedAt) : answeredSentAt
        attempt = randomUUID()
        attemptSentAt = undefined
        attemptVisibilityMs = undefined
        this.#followRoute()
        busy = response.messages.length > 0
        if (response.messages.length > 0) {
          const deliveries = response.messages.map((m) => new Delivery(partition, m, this.#settle))
          this.#hold(deliveries, visibilityMs, leasedSince)
          for (const d of deliveries) this.#buffer.push(d)
        }
        if (response.messages.length > 0) this.#wakeReaders()
        if (this.#closed) await Promise.allSettled(this.#buffer.splice(0).map((d) => d.release()))
        // A lease that did not wait and found nothing would be sent again at once, for ever; so
        // would a long poll answered empty at once (until an audit: one per round trip).
        const early = waitMs === 0 || now() - requestedAt < waitMs / 2
        empty = response.messages.length === 0 && reserved === 0 && early ? empty + 1 : 0
        if (empty > 0) {
          this.#carry(fetcher, false)
          await delay(backoffMs(this.#router.options.backoff, empty - 1), this.#stop.signal)
        }
      } catch (error) {
        carried?.fail(error)
        this.#carry(fetcher, false)
        if (this.#closed) return
        // Its leases, if any, may date from this request: the next asks again under the attempt.
        // (Refused, it leased nothing: until an audit, leases refused for longer than the
        // visibility dated the next one's answer from the first refused, already lapsed, and
        // it was dropped and given back.)
        if (mayHaveLeased || outstanding > 0) {
          attemptSentAt ??= requestedAt
          attemptVisibilityMs ??= visibilityMs
        }
        this.#followRoute()
        if (error instanceof PartitionNotFoundError) {
          // The queue was deleted and created again with fewer partitions: this loop's
          // partition is gone (the fresh route, just followed, retired the loop), not the
          // consumer. (Were it back in a newer route already, it is asked again.)
          if (this.#fetchers.get(partition) !== fetcher) return
        } else if (!(error as MqError).retriable) {
          this.#fail(error)
          return
        }
        this.#report(error)
        await delay(backoffMs(this.#router.options.backoff, failures++), this.#stop.signal)
      } finally {
        this.#leasing -= reserved
        fetcher.reserved = 0
        // Room this request held and did not fill: fetchers waiting for room may go now.
        if (reserved > 0) this.#wakeFetchersSoon()
      }
    }
  }

  /**
   * Holds the deliveries of one lease response (they share its deadline) under one timer: the
   * next extension of the ones still held, or (without extension) the moment their leases
   * lapse and they stop counting against prefetch. One timer per response, not per message.
   */
  #hold(
    deliveries: readonly Delivery[],
    visibilityMs: number,
    sentAt: number,
    extending = this.#options.autoExtend,
  ): void {
    const lease: HeldLease = {
      deliveries,
      live: deliveries.length,
      timer: undefined,
      deadlineMs: sentAt + leaseHoldMs(visibilityMs),
      extending,
      giveBackMarginMs: Math.min(GIVE_BACK_MARGIN_MS_MAX, Math.floor(visibilityMs / 10)),
    }
    // Half the visibility before the lease's end: the next extension is due.
    const extendAfter = (): number => Math.max(0, lease.deadlineMs - visibilityMs / 2 - now())
    for (const d of deliveries) this.#holdOne(d, lease)
    const giveBack = (): void => {
      // Those never handed out are given back before the leases end (GIVE_BACK_MARGIN_MS_MAX):
      // their lapse would count as a delivery the application never saw, towards the queue's
      // max deliveries and retry backoff (without autoExtend a slow handler let every buffered
      // message lapse so, and dead-lettered them in the end).
      const held = new Set(lease.deliveries.filter((d) => this.#held.get(d) === lease))
      for (const d of this.#buffer) if (held.has(d)) void d.release().catch(() => {})
      this.#dropFromBuffer(held)
    }
    const lapse = (): void => {
      // The leases ran out unsettled: the broker will deliver the messages again.
      giveBack()
      for (const d of lease.deliveries) if (this.#held.get(d) === lease) this.#release(d, lease)
    }
    // Unextended: the buffered ones go back a margin before the end, the rest lapse at it.
    const lapseLater = (): void => {
      lease.extending = false
      const margin = lease.giveBackMarginMs
      lease.timer = setTimeout(
        () => {
          giveBack()
          if (lease.live > 0) lease.timer = setTimeout(lapse, Math.max(0, lease.deadlineMs - now()))
        },
        Math.max(0, lease.deadlineMs - margin - now()),
      )
    }
    const extend = (): void => {
      const live = lease.deliveries.filter((d) => this.#held.get(d) === lease && !d.settled)
      // Settled ones are let go: one message held for long keeps only the others still held.
      lease.deliveries = live
      if (live.length === 0 || this.#ended) return
      if (now() - sentAt > this.#options.extendMaxMs) {
        // No more extensions: they are let go when their leases end (not a visibility from now).
        lapseLater()
        return
      }
      const askedAt = now()
      void Promise.allSettled(live.map((d) => d.extend(visibilityMs))).then((results) => {
        // Failed for a passing reason (a failover outlasting the router's deadline) while the
        // lease still runs: kept, and tried again sooner. Any other failure lets it go.
        let retry = false
        const lost = new Set<Delivery>()
        results.forEach((r, i) => {
          if (r.status === 'fulfilled') return
          const d = live[i] as Delivery
          // Settled meanwhile (acked, nacked, given back): its extension, sent behind another
          // one after the ack was applied, finds no lease, and no lease was lost (until an
          // audit, onError heard of a LeaseLostError for a message acked without fault).
          if (this.#held.get(d) !== lease) return
          this.#report(r.reason)
          if ((r.reason as MqError).retriable && now() < lease.deadlineMs) {
            retry = true
            return
          }
          this.#release(d, lease)
          lost.add(d)
        })
        // Lost ones never handed out leave the buffer now: left there until the reader came to
        // them, they piled up behind a busy reader while the consumer leased in their place
        // (until an audit: 480 with prefetch 4 in a minute, every extension answered EXPIRED).
        if (lost.size > 0) this.#dropFromBuffer(lost)
        if (!retry) lease.deadlineMs = askedAt + leaseHoldMs(visibilityMs)
        if (lease.live === 0 || this.#ended) return
        const nextMs = retry
          ? Math.max(EXTEND_RETRY_MIN_MS, Math.min(visibilityMs / 2, (lease.deadlineMs - now()) / 2))
          : extendAfter()
        lease.timer = setTimeout(extend, nextMs)
      })
    }
    if (extending) lease.timer = setTimeout(extend, extendAfter())
    else lapseLater()
  }

  /** Holds `d` under `lease` (not held yet). */
  #holdOne(d: Delivery, lease: HeldLease): void {
    this.#held.set(d, lease)
    this.#heldBy.set(d.partition, (this.#heldBy.get(d.partition) ?? 0) + 1)
  }

  /** `d` is no longer held (settled or lapsed); its lease's timer goes with its last one. */
  #release(d: Delivery, lease: HeldLease): void {
    this.#held.delete(d)
    const left = (this.#heldBy.get(d.partition) ?? 1) - 1
    if (left > 0) this.#heldBy.set(d.partition, left)
    else this.#heldBy.delete(d.partition)
    lease.live--
    if (lease.live === 0) clearTimeout(lease.timer)
    this.#wakeFetchersSoon()
  }

  /**
   * Takes `gone` out of the buffer, in place: spread into one call (`splice(0, n, ...kept)`),
   * a buffer of more than ~125,000 (prefetch may be 100,000, and a buffer holds more for a
   * while) overflowed the stack.
   */
  #dropFromBuffer(gone: ReadonlySet<Delivery>): void {
    let kept = 0
    for (const d of this.#buffer) if (!gone.has(d)) this.#buffer[kept++] = d
    this.#buffer.length = kept
  }

  #settleOne(d: Delivery, settlement: Settlement): Promise<LeaseResult> {
    if (settlement.kind !== 'extend') {
      const lease = this.#held.get(d)
      if (lease) {
        this.#release(d, lease)
        // Held for its partition's next lease: its room waits for that lease too.
        if (settlement.kind === 'ack' && this.#keepsAckRoom(d.partition)) this.#ackRoom.add(d.partition)
        const { deadlineMs } = lease
        this.#unsent++
        return this.#batcher(d.partition)
          .settle(d.leaseId, settlement, this.#sent)
          .catch((error: unknown) => {
            this.#holdUntil(d, deadlineMs)
            throw error
          })
      }
    } else if (this.#held.get(d)?.extending === false) {
      // Extended by the application (the consumer extends only groups it still extends).
      const askedAt = now()
      return this.#batcher(d.partition)
        .settle(d.leaseId, settlement)
        .then((result) => {
          if (result.outcome === LeaseOutcome.LEASE_OUTCOME_OK)
            this.#holdAgain(d, settlement.extendMs, askedAt)
          return result
        })
    }
    // An ack of one no longer held (its lease lapsed) frees no room, so wakes no fetcher: held for
    // its partition's next lease, a fetcher waiting for room looks again (and lets it go).
    if (settlement.kind === 'ack' && this.#fetchers.get(d.partition)?.carrying) this.#wakeFetchersSoon()
    return this.#batcher(d.partition).settle(d.leaseId, settlement)
  }

  /**
   * Whether the room of an ack of `partition` just settled is kept for the partition's next
   * lease, which carries the ack (AckRoom): while its fetcher carries acks, up to the
   * partition's share of prefetch (what it holds, leases and keeps, against prefetch over the
   * partitions), and past it only while no other partition below its share waits for room:
   * then the room goes to whichever fetcher waits first. Until an audit (2026-12-07) it was
   * always kept, and a busy partition kept what it had while it stayed busy: over four full
   * partitions, prefetch 8, one had 1,997 of 2,000 deliveries; with prefetch 1 (`consume`
   * with concurrency 1) over two, the other partition was never asked again.
   */
  #keepsAckRoom(partition: number): boolean {
    const fetcher = this.#fetchers.get(partition)
    if (!fetcher?.carrying) return false
    const n = this.#fetchers.size
    const used = (f: Fetcher): number =>
      (this.#heldBy.get(f.partition) ?? 0) + f.reserved + this.#ackRoom.of(f.partition)
    if ((used(fetcher) + 1) * n <= this.#options.prefetch) return true
    for (const other of this.#waitingForRoom)
      if (other !== fetcher && used(other) * n < this.#options.prefetch) return false
    return true
  }

  /**
   * `d`, extended by the application for `ms` from `askedAt`, and held by a group the
   * consumer no longer extends (without autoExtend, or past extendMaxMs), leaves it for one of
   * its own, held until that extension's end (it kept counting against prefetch). One the
   * consumer still extends stays in its group: those extensions keep it (and one of them may
   * follow the application's on the broker, which keeps the last; so the application's end
   * would not be the lease's). Until 2026-12-04 the consumer did not follow the application's
   * extensions: such a delivery stopped counting at its first deadline, and the consumer
   * leased more than its prefetch.
   */
  #holdAgain(d: Delivery, ms: number, askedAt: number): void {
    const lease = this.#held.get(d)
    if (lease === undefined || lease.extending || d.settled || this.#ended) return
    this.#release(d, lease)
    this.#hold([d], ms, askedAt, false)
  }

  /**
   * Holds `d` again, unextended, until `deadlineMs` (its lease's end as it was held): an ack or
   * nack of it failed without a result, so it is leased and unsettled again (the application
   * may settle it again) and counts against prefetch until then. Until an audit it did not: a
   * consumer whose acks failed through a failover leased past its prefetch. Not once the
   * consumer stopped leasing.
   */
  #holdUntil(d: Delivery, deadlineMs: number): void {
    if (this.#closed || this.#held.has(d) || now() >= deadlineMs) return
    const lease: HeldLease = {
      deliveries: [d],
      live: 1,
      timer: undefined,
      deadlineMs,
      extending: false,
      giveBackMarginMs: 0,
    }
    this.#holdOne(d, lease)
    lease.timer = setTimeout(() => {
      if (this.#held.get(d) === lease) this.#release(d, lease)
    }, deadlineMs - now())
  }

  /**
   * Wakes the waiting fetchers at the end of this event-loop turn, once: the room freed by a
   * burst of settlements then goes out as one lease instead of one per settled message.
   */
  #wakeFetchersSoon(): void {
    if (this.#wakeScheduled || this.#wakeFetchers.length === 0) return
    this.#wakeScheduled = true
    setImmediate(() => {
      this.#wakeScheduled = false
      for (const wake of this.#wakeFetchers.splice(0)) wake()
    })
  }

  #batcher(partition: number): SettleBatcher {
    let b = this.#batchers.get(partition)
    if (!b) {
      const holdAcks = (): boolean => this.#fetchers.get(partition)?.carrying === true
      b = new SettleBatcher(
        async (settlement, leaseIds) => {
          // Copies of this request sent: retries, and probes of other replicas (Router.partition).
          let sends = 0
          const results = await this.#router.partition(this.queue, partition, async (c, target, ms) => {
            sends++
            const q = c.queue
            const call =
              settlement.kind === 'ack'
                ? unary(q, q.ack, { target, leaseIds }, ms)
                : settlement.kind === 'nack'
                  ? unary(
                      q,
                      q.nack,
                      { target, leaseIds, delayMs: settlement.delayMs, release: settlement.release === true },
                      ms,
                    )
                  : unary(q, q.extend, { target, leaseIds, extendMs: settlement.extendMs }, ms)
            const response = await call.catch((error: unknown) => {
              // Only a copy that may have been applied is a send: answered, or lost (UNAVAILABLE:
              // a deadline, a dropped connection) after it went out. One that never left this
              // process (its connection refused), or that a replica refused (NOT_LEADER, STALE_ROUTE,
              // a limit: nothing appended, as the producer takes it) is no resend: an UNKNOWN
              // answered to the one copy applied means the lease is gone (until audits, that ack
              // resolved as done; after a failover's redirect too).
              if (!mayHaveActed(error)) sends--
              throw error
            })
            return response.results
          })
          return sends > 1 ? resentResults(settlement, results) : results
        },
        { holdAcks },
      )
      this.#batchers.set(partition, b)
    }
    return b
  }

  #fail(error: unknown): void {
    this.#failure ??= error
    this.#closed = true
    this.#stop.abort()
    this.#wake()
  }

  /**
   * Wakes every waiting iterator: each takes a message, or waits again, or ends. (One reader
   * woken alone left a second loop over the consumer waiting for ever, even after close().)
   */
  #wakeReaders(): void {
    for (const wake of this.#readers.splice(0)) wake()
  }

  #wake(): void {
    this.#wakeReaders()
    for (const wake of this.#wakeFetchers.splice(0)) wake()
  }
}

/** Throws a RangeError naming the first option of `o` out of range. */
function checkConsumerOptions(o: ConsumerOptions): void {
  checkInteger('consumer option prefetch', o.prefetch, 1, PREFETCH_MAX)
  // 0 (the queue's), or what the server takes: at most 12 h (a longer one was refused, which
  // failed the consumer's first lease for good).
  checkInteger('consumer option visibilityMs', o.visibilityMs, 0, LEASE_VISIBILITY_MS_MAX)
  checkInteger('consumer option waitMs', o.waitMs, 0, WAIT_MS_MAX)
  checkInteger('consumer option extendMaxMs', o.extendMaxMs, 0, Number.MAX_SAFE_INTEGER, true)
  checkBoolean('consumer option autoExtend', o.autoExtend)
  if (typeof o.consumerId !== 'string' || o.consumerId === '')
    throw new RangeError(`consumer option consumerId must be a non-empty string, got ${String(o.consumerId)}`)
  // Past the partitions' bound every lease of the consumer was refused, at its first lease.
  const idBytes = Buffer.byteLength(o.consumerId)
  if (idBytes > CONSUMER_ID_BYTES_MAX)
    throw new RangeError(
      `consumer option consumerId is ${idBytes} UTF-8 bytes long; the limit is ${CONSUMER_ID_BYTES_MAX}`,
    )
  if (typeof o.onError !== 'function')
    throw new RangeError(`consumer option onError must be a function, got ${String(o.onError)}`)
}
