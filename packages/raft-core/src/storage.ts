import type { ConfState, Entry, HardState, Snapshot } from './types'

/**
 * The read side of a group's durable Raft log, as the core sees it (the shape of etcd's
 * `Storage`). Reads are synchronous: an implementation keeps every entry after the last
 * compaction readable without I/O (kv-storage bounds that tail by compacting behind
 * snapshots). Writes go through the runtime, which persists entries, hard state and
 * snapshots before it lets the core send what depends on them.
 *
 * Invariant: firstIndex() - 1 is the index of the last compacted entry (the snapshot's
 * index, or 0), and firstIndex() - 1 <= lastIndex().
 */
export interface LogStorage {
  /** The persisted hard state and membership, read once when the core starts. */
  initialState(): { hardState: HardState; conf: ConfState }
  /**
   * Returns the entries in [lo, hi), at least one if lo < hi, and no more than `bytesMax`
   * bytes of data beyond the first. Throws CompactedError when lo < firstIndex() and
   * UnavailableError when hi > lastIndex() + 1.
   */
  entries(lo: number, hi: number, bytesMax: number): Entry[]
  /**
   * Returns the term of the entry at `index`, for index in [firstIndex() - 1, lastIndex()]
   * (the term of firstIndex() - 1 is the snapshot's). Throws CompactedError below that
   * range, UnavailableError above it.
   */
  term(index: number): number
  /** The index of the first entry still in the log (the snapshot's index + 1). */
  firstIndex(): number
  /** The index of the last entry in the log (the snapshot's index when the log is empty). */
  lastIndex(): number
  /** The latest snapshot (index 0 and empty data when there is none). */
  snapshot(): Snapshot
}
