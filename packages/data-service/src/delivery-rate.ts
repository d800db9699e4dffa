/** Partitions whose buckets a leader keeps at most (the oldest is forgotten: a full bucket again). */
export const DELIVERY_BUCKETS_MAX = 65_536

interface Bucket {
  tokens: number
  atMs: number
}

/**
 * Token buckets that pace a rate-limited queue's deliveries on a data-group leader
 * (QueueConfig.deliveryRate): each partition hands out its share, `ratePerS` = the queue's
 * rate / its partitions, with a burst of one second's worth (at least one message). A lease
 * takes tokens before it is committed and gives back what it did not use. Not replicated: a
 * new leader (or a bucket forgotten past DELIVERY_BUCKETS_MAX) starts full, so a failover may
 * hand out one more second's worth.
 */
export class DeliveryBuckets {
  readonly #buckets = new Map<string, Bucket>()
  readonly #nowMs: () => number
  readonly #entriesMax: number

  constructor(nowMs: () => number = Date.now, entriesMax = DELIVERY_BUCKETS_MAX) {
    this.#nowMs = nowMs
    this.#entriesMax = entriesMax
  }

  /** Takes up to `want` whole tokens of partition `id`; returns how many (0: none now). */
  take(id: string, ratePerS: number, want: number): number {
    const b = this.#refill(id, ratePerS)
    const taken = Math.max(0, Math.min(want, Math.floor(b.tokens)))
    b.tokens -= taken
    return taken
  }

  /** Gives back `n` tokens a lease took and did not use (it found fewer messages). */
  giveBack(id: string, ratePerS: number, n: number): void {
    if (n <= 0) return
    const b = this.#refill(id, ratePerS)
    b.tokens = Math.min(burst(ratePerS), b.tokens + n)
  }

  /** Milliseconds until partition `id` has a whole token again (0: it has one). */
  waitMs(id: string, ratePerS: number): number {
    const b = this.#refill(id, ratePerS)
    return b.tokens >= 1 ? 0 : Math.ceil(((1 - b.tokens) * 1000) / ratePerS)
  }

  #refill(id: string, ratePerS: number): Bucket {
    const now = this.#nowMs()
    let b = this.#buckets.get(id)
    if (b === undefined) {
      if (this.#buckets.size >= this.#entriesMax) {
        const oldest = this.#buckets.keys().next().value
        if (oldest !== undefined) this.#buckets.delete(oldest)
      }
      b = { tokens: burst(ratePerS), atMs: now }
      this.#buckets.set(id, b)
      return b
    }
    b.tokens = Math.min(burst(ratePerS), b.tokens + ((now - b.atMs) * ratePerS) / 1000)
    b.atMs = now
    return b
  }
}

function burst(ratePerS: number): number {
  return Math.max(1, ratePerS)
}
