import { InternalError, LeaseOutcome, type LeaseResult } from '@mq/protocol'

/**
 * What to do with a lease: ack it, nack it (with a delay; `release`: a give-back, not a
 * failure) or extend it (by some ms).
 */
export type Settlement =
  | { readonly kind: 'ack' }
  | { readonly kind: 'nack'; readonly delayMs: number; readonly release?: true }
  | { readonly kind: 'extend'; readonly extendMs: number }

/**
 * The results of a settlement whose request went out more than once (a retry after a lost
 * answer, or a copy sent to another replica while the leader was silent): an earlier copy may
 * have been applied, so what a later one finds may be that copy's work. An ack that finds no
 * lease (UNKNOWN: the message is gone) has done what it asked; so has a nack that finds the
 * lease expired or gone (the message was, or will be, delivered again). Those count as OK;
 * anything else stands. Applied only when the request went out more than once: a first answer
 * is taken as it is.
 */
export function resentResults(settlement: Settlement, results: LeaseResult[]): LeaseResult[] {
  if (settlement.kind === 'extend') return results
  return results.map((r) =>
    r.outcome === LeaseOutcome.LEASE_OUTCOME_UNKNOWN ||
    (settlement.kind === 'nack' && r.outcome === LeaseOutcome.LEASE_OUTCOME_EXPIRED)
      ? { ...r, outcome: LeaseOutcome.LEASE_OUTCOME_OK }
      : r,
  )
}

type Send = (settlement: Settlement, leaseIds: string[]) => Promise<LeaseResult[]>

const ACK: Settlement = { kind: 'ack' }

/**
 * Acks taken to travel with another request of their partition (a lease: LeaseRequest's
 * ack_lease_ids). They count as sent once that request has answered or failed, or once their
 * own Ack call goes (`sendAlone`): a server of a version before the field does not take them,
 * so until then they may still be waiting to be sent. Exactly one of `answer`, `fail` and
 * `sendAlone` ends them (later calls do nothing).
 */
export interface CarriedAcks {
  readonly leaseIds: readonly string[]
  /**
   * Hands each ack its result (by lease id). `resent`: the request went out more than once, so
   * the results are read as resentResults reads them.
   */
  answer(results: LeaseResult[], resent: boolean): void
  /** The request failed: every ack fails with `error`. */
  fail(error: unknown): void
  /**
   * The request did not take them (a server of a version before ack_lease_ids answers no
   * results): they go in an Ack call of their own. `resent`: as for `answer` (another copy of
   * the request may have reached a server that took them).
   */
  sendAlone(resent: boolean): void
}

interface Item {
  readonly leaseId: string
  readonly resolve: (r: LeaseResult) => void
  readonly reject: (e: unknown) => void
  /** Told when its request goes out. */
  readonly sent: (() => void) | undefined
}

/**
 * Coalesces the acks, nacks and extends of one partition into batched requests, with at most
 * `inFlightMax` requests in flight per kind of settlement (an extend never waits behind a slow
 * ack): what is settled in one event-loop turn travels together, and under load what arrives
 * while the requests are out waits for the first to come back and goes with it (up to
 * `batchMax` a request), so batches grow with the load and a lone ack is not delayed. Each
 * caller gets its own lease's result.
 */
export class SettleBatcher {
  readonly #send: Send
  readonly #inFlightMax: number
  readonly #batchMax: number
  /** Queued items by settlement (its JSON; 'ack' for an ack), in order of first arrival. */
  readonly #queued = new Map<string, { settlement: Settlement; items: Item[] }>()
  /** Requests out, by settlement kind. */
  readonly #out = new Map<Settlement['kind'], number>()
  /** The requests out, each settled once its callers heard. */
  readonly #sending = new Set<Promise<void>>()
  #scheduled = false
  /** While it says so, acks are not sent on their own: they wait to be carried (takeAcks). */
  readonly #holdAcks: () => boolean

  /**
   * `inFlightMax` calls out per kind of settlement (1), `batchMax` lease ids a call (1,000).
   * `holdAcks`: while true, queued acks wait for takeAcks() instead of going in an Ack call
   * (the partition's lease loop is about to send a lease that carries them); resume() must
   * follow each time it turns false.
   */
  constructor(
    send: Send,
    {
      inFlightMax = 1,
      batchMax = 1000,
      holdAcks = () => false,
    }: { readonly inFlightMax?: number; readonly batchMax?: number; readonly holdAcks?: () => boolean } = {},
  ) {
    if (!(inFlightMax >= 1 && batchMax >= 1))
      throw new RangeError('inFlightMax and batchMax must be at least 1')
    this.#send = send
    this.#inFlightMax = inFlightMax
    this.#batchMax = batchMax
    this.#holdAcks = holdAcks
  }

  /** Requests being sent now. */
  get inFlight(): number {
    let n = 0
    for (const k of this.#out.values()) n += k
    return n
  }

  /** Queues `leaseId` for `settlement`; resolves with its result. `sent`: told when its request goes out. */
  settle(leaseId: string, settlement: Settlement, sent?: () => void): Promise<LeaseResult> {
    const key = settlement.kind === 'ack' ? 'ack' : JSON.stringify(settlement)
    let group = this.#queued.get(key)
    if (!group) {
      group = { settlement, items: [] }
      this.#queued.set(key, group)
    }
    const items = group.items
    const promise = new Promise<LeaseResult>((resolve, reject) =>
      items.push({ leaseId, resolve, reject, sent }),
    )
    if (!this.#scheduled && this.#room(settlement.kind)) {
      this.#scheduled = true
      setImmediate(() => {
        this.#scheduled = false
        this.#pump()
      })
    }
    return promise
  }

  /** Whether acks are queued, not sent yet (takeAcks() would take some). */
  get acksQueued(): boolean {
    return this.#queued.has('ack')
  }

  /** Sends what waits for room now that the acks are no longer held (see the constructor). */
  resume(): void {
    this.#pump()
  }

  /**
   * Takes the acks queued now (up to batchMax; undefined when none) to travel with another
   * request: drain() waits for them to be answered. They count as sent once it has answered
   * (CarriedAcks): until an audit (2026-12-07) they did at once, and with a server of a version
   * before ack_lease_ids, which leaves them to an Ack call after the lease, a consumer whose
   * partitions took turns had up to 104 such acks under way beside its 64 of prefetch.
   */
  takeAcks(): CarriedAcks | undefined {
    const batch = this.#take('ack')
    if (!batch) return undefined
    let ended = false
    let done = (): void => {}
    const carried = new Promise<void>((resolve) => {
      done = resolve
    })
    this.#sending.add(carried)
    const release = (): void => {
      this.#sending.delete(carried)
      done()
    }
    /** Whether this is the first end (the others do nothing); the first counts the acks as sent. */
    const end = (): boolean => {
      if (ended) return false
      ended = true
      for (const item of batch) item.sent?.()
      return true
    }
    const answer = (results: LeaseResult[], resent: boolean): void =>
      answerItems(batch, resent ? resentResults(ACK, results) : results)
    const leaseIds = batch.map((i) => i.leaseId)
    return {
      leaseIds,
      answer: (results, resent) => {
        if (!end()) return
        release()
        answer(results, resent)
      },
      fail: (error) => {
        if (!end()) return
        release()
        rejectItems(batch, error)
      },
      sendAlone: (resent) => {
        if (!end()) return
        // As #sendNext's calls: an answer that cannot be read fails them too.
        void this.#send(ACK, leaseIds)
          .then((results) => answer(results, resent))
          .catch((error: unknown) => rejectItems(batch, error))
          .finally(release)
      },
    }
  }

  /** Sends everything queued now, whatever is in flight (when the consumer closes). */
  flushAll(): void {
    for (const key of [...this.#queued.keys()]) while (this.#queued.has(key)) this.#sendNext(key)
  }

  /** flushAll(), then resolves once every request out (and any queued meanwhile) is answered. */
  async drain(): Promise<void> {
    for (;;) {
      this.flushAll()
      if (this.#sending.size === 0) return
      await Promise.all(this.#sending)
    }
  }

  #room(kind: Settlement['kind']): boolean {
    return (this.#out.get(kind) ?? 0) < this.#inFlightMax && !(kind === 'ack' && this.#holdAcks())
  }

  #pump(): void {
    for (const [key, group] of [...this.#queued]) {
      while (this.#queued.has(key) && this.#room(group.settlement.kind)) this.#sendNext(key)
    }
  }

  /** Up to `batchMax` items queued under `key`, taken off the queue (undefined: none). */
  #take(key: string): Item[] | undefined {
    const group = this.#queued.get(key)
    if (!group) return undefined
    const batch = group.items.length <= this.#batchMax ? group.items : group.items.splice(0, this.#batchMax)
    if (batch === group.items) this.#queued.delete(key)
    return batch
  }

  /** Sends up to `batchMax` items queued under `key`. */
  #sendNext(key: string): void {
    const group = this.#queued.get(key) as { settlement: Settlement; items: Item[] }
    const batch = this.#take(key) as Item[]
    const kind = group.settlement.kind
    this.#out.set(kind, (this.#out.get(kind) ?? 0) + 1)
    for (const item of batch) item.sent?.()
    const sending = this.#send(
      group.settlement,
      batch.map((i) => i.leaseId),
    )
      .then((results) => answerItems(batch, results))
      // A failed call, or an answer that cannot be read: every caller still hears of it (a
      // promise already resolved ignores the later reject).
      .catch((error: unknown) => rejectItems(batch, error))
      .finally(() => {
        this.#sending.delete(sending)
        this.#out.set(kind, (this.#out.get(kind) ?? 1) - 1)
        this.#pump()
      })
    this.#sending.add(sending)
  }
}

/** Hands each item its result, by lease id (one the answer lacks fails). */
function answerItems(batch: readonly Item[], results: readonly LeaseResult[]): void {
  const byId = new Map(results.map((r) => [r.leaseId, r]))
  for (const item of batch) {
    const r = byId.get(item.leaseId)
    if (r) item.resolve(r)
    else item.reject(new InternalError(`the broker returned no result for lease ${item.leaseId}`))
  }
}

/** Fails each item with `error` (one already answered ignores it). */
function rejectItems(batch: readonly Item[], error: unknown): void {
  for (const item of batch) item.reject(error)
}
