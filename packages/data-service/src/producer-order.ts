/** Limits of a ProducerOrder. */
export interface ProducerOrderLimits {
  /** Longest a batch waits for the one before it (then it is proposed anyway). */
  readonly waitMs: number
  /** Producer lanes (producer × partition) remembered; the least recently used goes first. */
  readonly lanesMax: number
  /** Batches of one lane waiting at once; more are proposed without waiting. */
  readonly waitersPerLaneMax: number
}

export const DEFAULT_PRODUCER_ORDER_LIMITS: ProducerOrderLimits = {
  waitMs: 100,
  lanesMax: 4096,
  waitersPerLaneMax: 8,
}

interface Lane {
  /** The highest sequence proposed here. */
  last: number
  /** Waiting batches: sequence → let it go. */
  readonly waiters: Map<number, () => void>
}

/**
 * Puts a pipelining idempotent producer's batches back in sequence order on the leader before
 * they are proposed. The client sends them in order on one HTTP/2 connection, but concurrent
 * streams interleave, and a later request can be complete (and handled) before an earlier
 * one; proposed as it comes, the partition would refuse it (SEQUENCE_GAP) and the client would
 * retry it after a backoff. So a batch whose predecessor is still in flight at the client
 * (base < sequence) and has not been proposed here waits for it, for at most `waitMs`.
 *
 * Best effort and bounded: the partition's apply is what keeps the order (a batch proposed
 * after its wait ran out is refused there); this only spares the refusal and the round trip.
 */
export class ProducerOrder {
  readonly #lanes = new Map<string, Lane>()
  readonly #limits: ProducerOrderLimits

  constructor(limits: Partial<ProducerOrderLimits> = {}) {
    this.#limits = { ...DEFAULT_PRODUCER_ORDER_LIMITS, ...limits }
  }

  /**
   * Undefined when batch `seq` of `lane` may be proposed now; else a promise that resolves
   * when the batch before it has been proposed here, or after `waitMs`.
   */
  turn(lane: string, seq: number, base: number): Promise<void> | undefined {
    if (base >= seq) return undefined
    const l = this.#touch(lane)
    if (l.last >= seq - 1 || l.waiters.has(seq) || l.waiters.size >= this.#limits.waitersPerLaneMax) {
      return undefined
    }
    return new Promise<void>((resolve) => {
      const go = () => {
        clearTimeout(timer)
        l.waiters.delete(seq)
        resolve()
      }
      const timer = setTimeout(go, this.#limits.waitMs)
      l.waiters.set(seq, go)
    })
  }

  /** Records that batch `seq` of `lane` has been proposed; lets the batches after it go. */
  proposed(lane: string, seq: number): void {
    const l = this.#touch(lane)
    if (seq > l.last) l.last = seq
    for (const [waiting, go] of l.waiters) if (waiting - 1 <= l.last) go()
  }

  /** Lanes remembered (tests check the bound with it). */
  get size(): number {
    return this.#lanes.size
  }

  /** The lane, created if new and moved to the most recently used end. */
  #touch(key: string): Lane {
    let l = this.#lanes.get(key)
    if (l) this.#lanes.delete(key)
    else l = { last: -1, waiters: new Map() }
    this.#lanes.set(key, l)
    while (this.#lanes.size > this.#limits.lanesMax) {
      const [oldest, evicted] = this.#lanes.entries().next().value as [string, Lane]
      this.#lanes.delete(oldest)
      for (const go of evicted.waiters.values()) go()
    }
    return l
  }
}
