import { CompactedError, UnavailableError } from './errors'
import type { Durability, WritableLogStorage } from './storage'
import { type ConfState, EMPTY_HARD_STATE, type Entry, type HardState, type Snapshot } from './types'

const EMPTY_CONF: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [] }

/**
 * One copy of a log: the entries after a floor (the last compacted entry), the hard state,
 * and the latest snapshot. Invariant: snapshot.meta.index >= floorIndex.
 */
class LogImage {
  floorIndex: number
  floorTerm: number
  /** entries[i] has index floorIndex + 1 + i. */
  entries: Entry[]
  hardState: HardState
  snapshot: Snapshot
  clockOffsetMs: number | undefined = undefined

  constructor(
    floorIndex: number,
    floorTerm: number,
    entries: Entry[],
    hardState: HardState,
    snapshot: Snapshot,
  ) {
    this.floorIndex = floorIndex
    this.floorTerm = floorTerm
    this.entries = entries
    this.hardState = hardState
    this.snapshot = snapshot
  }

  clone(): LogImage {
    const c = new LogImage(
      this.floorIndex,
      this.floorTerm,
      this.entries.slice(),
      this.hardState,
      this.snapshot,
    )
    c.clockOffsetMs = this.clockOffsetMs
    return c
  }

  lastIndex(): number {
    return this.floorIndex + this.entries.length
  }

  term(index: number): number {
    if (index === this.floorIndex) return this.floorTerm
    return this.entries[index - this.floorIndex - 1]!.term
  }

  append(entries: readonly Entry[]): void {
    const first = entries[0]!.index
    if (first <= this.floorIndex || first > this.lastIndex() + 1) {
      throw new RangeError(
        `MemoryLogStorage.append: first index ${first} outside [${this.floorIndex + 1}, ${this.lastIndex() + 1}]`,
      )
    }
    const keep = first - this.floorIndex - 1
    if (keep < this.entries.length) this.entries.length = keep
    for (let i = 0; i < entries.length; i++) this.entries.push(entries[i]!)
  }

  applySnapshot(snapshot: Snapshot): void {
    const { index, term } = snapshot.meta
    const i = index - this.floorIndex - 1
    const keep = i >= 0 && i < this.entries.length && this.entries[i]!.term === term
    this.entries = keep ? this.entries.slice(i + 1) : []
    this.floorIndex = index
    this.floorTerm = term
    this.snapshot = snapshot
  }

  compact(snapshot: Snapshot, compactIndex: number): void {
    if (compactIndex > this.floorIndex) {
      this.floorTerm = this.term(compactIndex)
      this.entries = this.entries.slice(compactIndex - this.floorIndex)
      this.floorIndex = compactIndex
    }
    if (snapshot.meta.index >= this.snapshot.meta.index) this.snapshot = snapshot
  }
}

type StagedWrite =
  | { kind: 'append'; entries: readonly Entry[] }
  | { kind: 'hardState'; hardState: HardState }
  | { kind: 'clockOffset'; clockOffsetMs: number }
  | { kind: 'snapshot'; snapshot: Snapshot }
  | { kind: 'compact'; snapshot: Snapshot; compactIndex: number }

/**
 * An in-memory WritableLogStorage for tests and the simulator. It keeps two images: the live
 * one every read sees, and the durable one as of the last sync(). crash() throws away what
 * was not synced, as a power cut would.
 *
 * Bounds: the log holds what the caller appended and has not compacted; the staged writes
 * since the last sync are bounded by `stagedWritesMax` (a sync is required before more).
 */
export class MemoryLogStorage implements WritableLogStorage {
  #live: LogImage
  #durable: LogImage
  #staged: StagedWrite[] = []
  /** Writes staged since this storage was made (or last crashed), synced or not. */
  #stagedCount = 0
  /** How many of those are durable. */
  #syncedCount = 0
  readonly #stagedWritesMax: number
  readonly #conf: ConfState

  /** `conf` is the group's initial membership (empty for a replica that waits to be added). */
  constructor(conf: ConfState = EMPTY_CONF, options: { stagedWritesMax?: number } = {}) {
    this.#conf = conf
    const snap: Snapshot = { meta: { index: 0, term: 0, conf }, data: new Uint8Array(0) }
    this.#live = new LogImage(0, 0, [], EMPTY_HARD_STATE, snap)
    this.#durable = new LogImage(0, 0, [], EMPTY_HARD_STATE, snap)
    this.#stagedWritesMax = options.stagedWritesMax ?? 1_000_000
  }

  initialState(): { hardState: HardState; conf: ConfState; clockOffsetMs?: number } {
    const live = this.#live
    const conf = live.snapshot.meta.index > 0 ? live.snapshot.meta.conf : this.#conf
    return live.clockOffsetMs === undefined
      ? { hardState: live.hardState, conf }
      : { hardState: live.hardState, conf, clockOffsetMs: live.clockOffsetMs }
  }

  entries(lo: number, hi: number, bytesMax: number): Entry[] {
    const live = this.#live
    if (lo <= live.floorIndex)
      throw new CompactedError(`index ${lo} is compacted (first index ${live.floorIndex + 1})`)
    if (hi > live.lastIndex() + 1) throw new UnavailableError(`index ${hi - 1} is beyond the last index`)
    const out: Entry[] = []
    let bytes = 0
    const base = live.floorIndex + 1
    for (let i = lo; i < hi; i++) {
      const e = live.entries[i - base]!
      if (out.length > 0 && bytes + e.data.length > bytesMax) break
      bytes += e.data.length
      out.push(e)
    }
    return out
  }

  term(index: number): number {
    const live = this.#live
    if (index < live.floorIndex) throw new CompactedError(`index ${index} is compacted`)
    if (index > live.lastIndex()) throw new UnavailableError(`index ${index} is beyond the last index`)
    return live.term(index)
  }

  firstIndex(): number {
    return this.#live.floorIndex + 1
  }

  lastIndex(): number {
    return this.#live.lastIndex()
  }

  snapshot(): Snapshot {
    return this.#live.snapshot
  }

  append(entries: readonly Entry[]): void {
    if (entries.length === 0) return
    this.#stage({ kind: 'append', entries })
    this.#live.append(entries)
  }

  setHardState(hardState: HardState): void {
    this.#stage({ kind: 'hardState', hardState })
    this.#live.hardState = hardState
  }

  setClockOffset(clockOffsetMs: number): void {
    this.#stage({ kind: 'clockOffset', clockOffsetMs })
    this.#live.clockOffsetMs = clockOffsetMs
  }

  applySnapshot(snapshot: Snapshot): void {
    this.#stage({ kind: 'snapshot', snapshot })
    this.#live.applySnapshot(snapshot)
  }

  compact(snapshot: Snapshot, compactIndex: number): void {
    if (compactIndex > snapshot.meta.index || compactIndex > this.lastIndex()) {
      throw new RangeError(`compact: index ${compactIndex} is beyond the snapshot or the log`)
    }
    this.#stage({ kind: 'compact', snapshot, compactIndex })
    this.#live.compact(snapshot, compactIndex)
  }

  #stage(w: StagedWrite): void {
    if (this.#staged.length >= this.#stagedWritesMax) {
      throw new RangeError(
        `MemoryLogStorage: more than ${this.#stagedWritesMax} unsynced writes; sync() first`,
      )
    }
    this.#staged.push(w)
    this.#stagedCount++
  }

  /** A mark for sync(): every write staged so far. */
  stageMark(): number {
    return this.#stagedCount
  }

  /**
   * Makes the staged writes durable, in order: all of them, or only those staged before
   * `mark` (from stageMark()) — a pipelined flush covers the writes staged when it started.
   */
  sync(mark = this.#stagedCount): void {
    const d = this.#durable
    let n = 0
    for (const w of this.#staged) {
      if (this.#syncedCount + n >= mark) break
      if (w.kind === 'append') d.append(w.entries)
      else if (w.kind === 'hardState') d.hardState = w.hardState
      else if (w.kind === 'clockOffset') d.clockOffsetMs = w.clockOffsetMs
      else if (w.kind === 'snapshot') d.applySnapshot(w.snapshot)
      else d.compact(w.snapshot, w.compactIndex)
      n++
    }
    this.#staged = n === this.#staged.length ? [] : this.#staged.slice(n)
    this.#syncedCount += n
  }

  /** Drops every write since the last sync(), as a crash would. */
  crash(): void {
    this.#staged = []
    this.#stagedCount = this.#syncedCount
    this.#live = this.#durable.clone()
    this.#durable = this.#live.clone()
  }

  /** Number of writes not yet synced. */
  unsyncedWrites(): number {
    return this.#staged.length
  }
}

/** A Durability over MemoryLogStorages: flush() syncs each of them. */
export class MemoryDurability implements Durability {
  readonly #storages = new Set<MemoryLogStorage>()
  flushes = 0

  register(storage: MemoryLogStorage): void {
    this.#storages.add(storage)
  }

  flush(): Promise<void> {
    this.flushes++
    for (const s of this.#storages) s.sync()
    return Promise.resolve()
  }
}
