/**
 * The bytes that partitions' lease read-ahead (QueuePartition.readyAhead) may keep together, in
 * a process. Each partition keeps at most READY_AHEAD_WEIGHTS_MAX × READY_AHEAD_BYTES_MAX
 * (512 KiB); a node hosting thousands of leased partitions would keep hundreds of MB without a
 * bound over them all. An owner says what it keeps after each change (`hold`); past the bound
 * the owners that held longest ago drop theirs (`drop`), the one holding last too when it alone
 * is past it. A read-ahead is a cache only (a lease gets the same entries with or without it),
 * so what is dropped, and when, changes no result. An owner gone without saying so (a partition
 * closed or replaced) counts until it is the oldest and dropped: the bound holds anyway.
 */
export class ReadAheadBudget {
  readonly #bytesMax: number
  #bytes = 0
  /** Owner → what it keeps and how to drop it, oldest hold first (Map order). */
  readonly #held = new Map<object, { readonly bytes: number; readonly drop: () => void }>()

  constructor(bytesMax: number) {
    if (!Number.isInteger(bytesMax) || bytesMax < 0)
      throw new RangeError(`bytesMax must be a non-negative integer, got ${bytesMax}`)
    this.#bytesMax = bytesMax
  }

  /** The bytes kept now, over every owner (at most the bound once `hold` returned). */
  get bytes(): number {
    return this.#bytes
  }

  /** Owners keeping something now. */
  get owners(): number {
    return this.#held.size
  }

  /**
   * `owner` keeps `bytes` now (0: nothing); `drop` makes it keep nothing (called here, never
   * while `owner` calls `hold`, and the owner must not call `hold` from it). Then owners drop
   * theirs, oldest hold first, until the total is within the bound.
   */
  hold(owner: object, bytes: number, drop: () => void): void {
    const before = this.#held.get(owner)
    if (before !== undefined) {
      this.#bytes -= before.bytes
      this.#held.delete(owner)
    }
    if (bytes > 0) {
      this.#held.set(owner, { bytes, drop })
      this.#bytes += bytes
    }
    for (const [oldest, held] of this.#held) {
      if (this.#bytes <= this.#bytesMax) break
      this.#held.delete(oldest)
      this.#bytes -= held.bytes
      held.drop()
    }
  }
}

/** The process's budget: 64 MiB of read-ahead over every partition it hosts. */
export const READ_AHEAD_BUDGET = new ReadAheadBudget(64 * 1024 * 1024)
