import type { LogStorage } from './storage'
import type { Entry, Snapshot } from './types'

/** Returned by RaftLog.term() for an index it cannot answer (compacted or beyond the log). */
export const TERM_UNKNOWN = -1

/**
 * A replica's log: the durable part read through LogStorage, plus an unstable tail of
 * entries (and possibly a received snapshot) that the caller has not yet persisted (etcd's
 * raftLog + unstable).
 *
 * Invariants: applied <= applying <= committed <= lastIndex(); unstable entries are
 * consecutive from `unstableOffset`; a received snapshot, while unstable, replaces
 * everything up to its index.
 */
export class RaftLog {
  readonly storage: LogStorage
  unstableOffset: number
  unstable: Entry[] = []
  unstableSnapshot: Snapshot | null = null
  /**
   * Entries up to this index were handed to the caller for persisting (in a Ready not yet
   * advanced, or already stable): the next Ready carries only the entries after it. A
   * truncation below it pulls it back, so the overwriting entries are handed out again.
   */
  inProgressTo: number
  /** The unstable snapshot was handed to the caller (in a Ready not yet advanced). */
  snapshotInProgress = false
  committed: number
  /** Applied as confirmed by advance(). */
  applied: number
  /** Handed to the caller in a Ready for applying; >= applied. */
  applying: number
  /** No committed entries are handed out for applying meanwhile (RawNode.pauseApplying). */
  applyPaused = false

  constructor(storage: LogStorage, committed: number, applied: number) {
    this.storage = storage
    this.unstableOffset = storage.lastIndex() + 1
    this.inProgressTo = this.unstableOffset - 1
    this.committed = committed
    this.applied = applied
    this.applying = applied
  }

  firstIndex(): number {
    if (this.unstableSnapshot !== null) return this.unstableSnapshot.meta.index + 1
    return this.storage.firstIndex()
  }

  lastIndex(): number {
    if (this.unstable.length > 0) return this.unstableOffset + this.unstable.length - 1
    if (this.unstableSnapshot !== null) return this.unstableSnapshot.meta.index
    return this.storage.lastIndex()
  }

  /** The term at `index`, or TERM_UNKNOWN when it is compacted or beyond the last entry. */
  term(index: number): number {
    if (index > this.lastIndex()) return TERM_UNKNOWN
    if (index >= this.unstableOffset) {
      const e = this.unstable[index - this.unstableOffset]
      if (e !== undefined) return e.term
    }
    const snap = this.unstableSnapshot
    if (snap !== null) {
      if (index === snap.meta.index) return snap.meta.term
      return TERM_UNKNOWN
    }
    if (index < this.storage.firstIndex() - 1) return TERM_UNKNOWN
    return this.storage.term(index)
  }

  lastTerm(): number {
    return this.term(this.lastIndex())
  }

  matchTerm(index: number, term: number): boolean {
    const t = this.term(index)
    return t !== TERM_UNKNOWN && t === term
  }

  /** Raft §5.4.1: a candidate's log is at least as up to date as ours. */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm()
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex())
  }

  /**
   * Entries in [lo, hi), at most `bytesMax` bytes of data beyond the first entry. Requires
   * firstIndex() <= lo <= hi <= lastIndex() + 1.
   */
  slice(lo: number, hi: number, bytesMax: number): Entry[] {
    if (lo >= hi) return []
    const out: Entry[] = []
    let bytes = 0
    if (lo < this.unstableOffset) {
      const storageHi = Math.min(hi, this.unstableOffset)
      const stored = this.storage.entries(lo, storageHi, bytesMax)
      for (const e of stored) {
        out.push(e)
        bytes += e.data.length
      }
      if (out.length < storageHi - lo) return out
    }
    const from = Math.max(lo, this.unstableOffset)
    for (let i = from; i < hi; i++) {
      const e = this.unstable[i - this.unstableOffset]!
      if (out.length > 0 && bytes + e.data.length > bytesMax) break
      out.push(e)
      bytes += e.data.length
    }
    return out
  }

  /**
   * Appends entries after a truncation at entries[0].index when needed (§5.3). Returns the
   * index of the first entry that was dropped (lastIndex()+1 when nothing was dropped).
   * Requires entries[0].index > committed.
   */
  truncateAndAppend(entries: readonly Entry[]): number {
    const first = entries[0]!.index
    if (first <= this.committed) {
      throw new Error(
        `RaftLog: truncation at ${first} would drop committed entries (committed ${this.committed})`,
      )
    }
    const last = this.lastIndex()
    if (first === this.unstableOffset + this.unstable.length) {
      for (const e of entries) this.unstable.push(e)
    } else if (first <= this.unstableOffset) {
      this.unstableOffset = first
      this.unstable = entries.slice()
    } else {
      this.unstable = this.unstable.slice(0, first - this.unstableOffset)
      for (const e of entries) this.unstable.push(e)
    }
    if (this.inProgressTo > first - 1) this.inProgressTo = first - 1
    return Math.min(first, last + 1)
  }

  /**
   * Returns the index of the first entry in `entries` whose term differs from ours (or that
   * we do not have), or 0 when we hold all of them.
   */
  findConflict(entries: readonly Entry[]): number {
    const last = this.lastIndex()
    for (const e of entries) {
      if (e.index > last) return e.index // beyond our log: new, nothing more to compare
      if (!this.matchTerm(e.index, e.term)) return e.index
    }
    return 0
  }

  /**
   * The largest index <= `index` whose term is <= `term` (or the first index we cannot
   * look behind). Used for fast backtracking on a rejected App (§5.3).
   */
  findConflictByTerm(index: number, term: number): number {
    let i = Math.min(index, this.lastIndex())
    const floor = this.firstIndex() - 1
    while (i > floor) {
      const t = this.term(i)
      if (t === TERM_UNKNOWN || t <= term) return i
      i--
    }
    return i
  }

  commitTo(index: number): void {
    if (index <= this.committed) return
    if (index > this.lastIndex()) {
      throw new Error(`RaftLog.commitTo(${index}) is beyond the last index ${this.lastIndex()}`)
    }
    this.committed = index
  }

  /**
   * Entries committed and not yet handed out for applying, at most `bytesMax` bytes; none
   * while `applyPaused`.
   */
  nextCommitted(bytesMax: number): Entry[] {
    const lo = Math.max(this.applying + 1, this.firstIndex())
    if (lo > this.committed || this.unstableSnapshot !== null || this.applyPaused) return []
    return this.slice(lo, this.committed + 1, bytesMax)
  }

  hasNextCommitted(): boolean {
    return this.unstableSnapshot === null && !this.applyPaused && this.committed > this.applying
  }

  /** Unstable entries not yet handed out for persisting (see inProgressTo). */
  entriesToPersist(): Entry[] {
    const from = Math.max(this.inProgressTo + 1, this.unstableOffset)
    return this.unstable.slice(from - this.unstableOffset)
  }

  hasEntriesToPersist(): boolean {
    return this.unstableOffset + this.unstable.length - 1 > this.inProgressTo
  }

  /** The caller took the unstable tail for persisting (it is in a Ready now). */
  persistingAll(): void {
    this.inProgressTo = this.unstableOffset + this.unstable.length - 1
  }

  /**
   * The caller persisted entries up to (index, term): drop them from the unstable tail. A
   * term that no longer matches means those entries were overwritten meanwhile (a later
   * Ready carries their replacements), so nothing becomes stable.
   */
  stableTo(index: number, term: number): void {
    if (index < this.unstableOffset) return
    const e = this.unstable[index - this.unstableOffset]
    if (e === undefined || e.term !== term) return
    this.unstable = this.unstable.slice(index + 1 - this.unstableOffset)
    this.unstableOffset = index + 1
    if (this.inProgressTo < index) this.inProgressTo = index
  }

  /** The caller installed the received snapshot at `index`. */
  stableSnapshotTo(index: number): void {
    if (this.unstableSnapshot !== null && this.unstableSnapshot.meta.index === index) {
      this.unstableSnapshot = null
      this.snapshotInProgress = false
    }
  }

  /** Replaces the whole log by a received snapshot (§7); its entries come from the leader next. */
  restore(snapshot: Snapshot): void {
    this.committed = snapshot.meta.index
    this.applying = snapshot.meta.index
    this.unstable = []
    this.unstableOffset = snapshot.meta.index + 1
    this.inProgressTo = snapshot.meta.index
    this.unstableSnapshot = snapshot
    this.snapshotInProgress = false
  }
}
