/**
 * Partitions whose buckets a leader keeps at most: the least recently used is forgotten (a full
 * bucket again when it comes back, which it would be after a second unused anyway).
 */
const DELIVERY_BUCKETS_MAX = 65_536

/** A lease waits for this long's worth of tokens (at least one): one entry per ~100 ms, not per message. */
export const DELIVERY_BATCH_MS = 100

interface Bucket {
  tokens: number
  atMs: number
}

/**
 * Token buckets that pace a rate-limited queue's deliveries on a data-group leader
 * (QueueConfig.deliveryRate): each partition hands out its share, `ratePerS` = the queue's
 * rate / its partitions, with a burst of one second's worth (at least one message: a queue
 * with fewer messages a second than partitions may hand out one per partition at once). A
 * lease takes tokens before it is committed and gives back what it did not use; it takes none
 * until DELIVERY_BATCH_MS worth are there (so a fast rate makes leases of many messages, not
 * one entry per message). Not replicated: a new leader, a partition moved to another group, or
 * a bucket forgotten past DELIVERY_BUCKETS_MAX starts full, so each may hand out one more
 * second's worth. The clock is monotonic (a wall clock stepped back would stall the queue).
 */
export class DeliveryBuckets {
  readonly #buckets = new Map<string, Bucket>()
  readonly #nowMs: () => number
  readonly #entriesMax: number

  constructor(nowMs: () => number = () => performance.now(), entriesMax = DELIVERY_BUCKETS_MAX) {
    this.#nowMs = nowMs
    this.#entriesMax = entriesMax
  }

  /**
   * Takes up to `want` whole tokens of partition `id` once a batch's worth is there (see
   * `batch`); returns how many (0: not yet).
   */
  take(id: string, ratePerS: number, want: number): number {
    const b = this.#refill(id, ratePerS)
    if (b.tokens < batch(ratePerS, want)) return 0
    const taken = Math.min(want, Math.floor(b.tokens))
    b.tokens -= taken
    return taken
  }

  /** Gives back `n` tokens a lease took and did not use (it found fewer messages). */
  giveBack(id: string, ratePerS: number, n: number): void {
    if (n <= 0) return
    const b = this.#refill(id, ratePerS)
    b.tokens = Math.min(burst(ratePerS), b.tokens + n)
  }

  /** Milliseconds until partition `id` has a batch's worth of tokens for `want` (0: it has). */
  waitMs(id: string, ratePerS: number, want: number): number {
    const b = this.#refill(id, ratePerS)
    const needed = batch(ratePerS, want)
    return b.tokens >= needed ? 0 : Math.ceil(((needed - b.tokens) * 1000) / ratePerS)
  }

  #refill(id: string, ratePerS: number): Bucket {
    const now = this.#nowMs()
    let b = this.#buckets.get(id)
    if (b === undefined) {
      if (this.#buckets.size >= this.#entriesMax) {
        const leastRecent = this.#buckets.keys().next().value
        if (leastRecent !== undefined) this.#buckets.delete(leastRecent)
      }
      b = { tokens: burst(ratePerS), atMs: now }
    } else {
      this.#buckets.delete(id) // re-inserted below: the map's order is the order of use
      b.tokens = Math.min(burst(ratePerS), b.tokens + (Math.max(0, now - b.atMs) * ratePerS) / 1000)
      b.atMs = now
    }
    this.#buckets.set(id, b)
    return b
  }
}

function burst(ratePerS: number): number {
  return Math.max(1, ratePerS)
}

/** Tokens a lease waits for: DELIVERY_BATCH_MS worth, at least one, at most what it wants. */
function batch(ratePerS: number, want: number): number {
  return Math.max(1, Math.min(want, Math.floor((ratePerS * DELIVERY_BATCH_MS) / 1000)))
}
