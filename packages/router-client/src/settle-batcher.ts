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

  constructor(send: Send, inFlightMax = 1, batchMax = 1000) {
    if (!(inFlightMax >= 1 && batchMax >= 1))
      throw new RangeError('inFlightMax and batchMax must be at least 1')
    this.#send = send
    this.#inFlightMax = inFlightMax
    this.#batchMax = batchMax
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
    return (this.#out.get(kind) ?? 0) < this.#inFlightMax
  }

  #pump(): void {
    for (const [key, group] of [...this.#queued]) {
      while (this.#queued.has(key) && this.#room(group.settlement.kind)) this.#sendNext(key)
    }
  }

  /** Sends up to `batchMax` items queued under `key`. */
  #sendNext(key: string): void {
    const group = this.#queued.get(key) as { settlement: Settlement; items: Item[] }
    const batch = group.items.length <= this.#batchMax ? group.items : group.items.splice(0, this.#batchMax)
    if (batch === group.items) this.#queued.delete(key)
    const kind = group.settlement.kind
    this.#out.set(kind, (this.#out.get(kind) ?? 0) + 1)
    for (const item of batch) item.sent?.()
    const answer = (results: LeaseResult[]): void => {
      const byId = new Map(results.map((r) => [r.leaseId, r]))
      for (const item of batch) {
        const r = byId.get(item.leaseId)
        if (r) item.resolve(r)
        else item.reject(new InternalError(`the broker returned no result for lease ${item.leaseId}`))
      }
    }
    const sending = this.#send(
      group.settlement,
      batch.map((i) => i.leaseId),
    )
      .then(answer)
      // A failed call, or an answer that cannot be read: every caller still hears of it (a
      // promise already resolved ignores the later reject).
      .catch((error: unknown) => {
        for (const item of batch) item.reject(error)
      })
      .finally(() => {
        this.#sending.delete(sending)
        this.#out.set(kind, (this.#out.get(kind) ?? 1) - 1)
        this.#pump()
      })
    this.#sending.add(sending)
  }
}
