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
  /**
   * The persisted hard state and membership, read once when the core starts. For a fresh
   * group (empty log, no snapshot) `conf` is the founding membership: the core then writes it
   * into the log as ConfChange entries 1..n of term 1 (etcd's bootstrap) in its first Ready,
   * so replicas added later learn it from the log. Afterwards the core takes membership from
   * snapshot().meta.conf plus the ConfChange entries in the log. `clockOffsetMs`: the last
   * clock offset recorded (setClockOffset), absent when none was.
   */
  initialState(): { hardState: HardState; conf: ConfState; clockOffsetMs?: number }
  /**
   * Returns the entries in [lo, hi), at least one if lo < hi, and no more than `bytesMax`
   * bytes of data beyond the first. Throws CompactedError when lo < firstIndex() and
   * UnavailableError when hi > lastIndex() + 1.
   */
  entries(lo: number, hi: number, bytesMax: number): Entry[]
  /**
   * Returns the term of the entry at `index`, for index in [firstIndex() - 1, lastIndex()]
   * (firstIndex() - 1 is the last compacted entry: the installed snapshot's index, or the
   * compactIndex of the last compact(), and its real term must stay answerable). Throws CompactedError below that
   * range, UnavailableError above it.
   */
  term(index: number): number
  /** The index of the first entry still in the log (the snapshot's index + 1). */
  firstIndex(): number
  /** The index of the last entry in the log (the snapshot's index when the log is empty). */
  lastIndex(): number
  /**
   * The latest snapshot (index 0 and empty data when there is none). Its index may exceed
   * firstIndex() - 1 when compact() kept entries behind it.
   */
  snapshot(): Snapshot
}

/**
 * A LogStorage the runtime can write. Every write is visible to the reads at once and
 * becomes durable at the next `Durability.flush()` of the database that holds it (group
 * commit: one flush covers the writes of every group staged since the last one).
 */
export interface WritableLogStorage extends LogStorage {
  /**
   * Appends `entries` (consecutive indexes, non-empty). When entries[0].index <=
   * lastIndex(), the conflicting suffix from that index on is truncated first (Raft §5.3).
   * Requires entries[0].index in [firstIndex(), lastIndex() + 1].
   */
  append(entries: readonly Entry[]): void
  /** Records the hard state. */
  setHardState(hardState: HardState): void
  /**
   * Records the group clock minus this node's wall clock, as this replica last knew it
   * (Ready.clockOffsetMs), for initialState() after a restart. Need not be durable before
   * anything: it rides along with the next flush.
   */
  setClockOffset(clockOffsetMs: number): void
  /**
   * Installs `snapshot`: entries up to its index are discarded (all of them when the log
   * does not hold an entry of its index and term), and firstIndex() becomes index + 1.
   */
  applySnapshot(snapshot: Snapshot): void
  /**
   * Records `snapshot` (taken by the state machine at an applied index) and discards the
   * log up to `compactIndex` (<= snapshot.meta.index). Keeps later entries.
   */
  compact(snapshot: Snapshot, compactIndex: number): void
}

/** Makes every staged write durable. Resolves once they are (one fsync for all groups). */
export interface Durability {
  flush(): Promise<void>
}
