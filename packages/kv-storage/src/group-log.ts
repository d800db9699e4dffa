import {
  CompactedError,
  type ConfState,
  EMPTY_HARD_STATE,
  type Entry,
  type HardState,
  type Snapshot,
  SnapshotTooLargeError,
  UnavailableError,
  type WritableLogStorage,
} from '@mq/raft-core'
import { crc32c } from './crc32c'
import type { BatchOp, KvReader } from './engine'
import { ClosedError, CorruptRecordError, InvalidArgumentError } from './errors'
import type { GroupCommit } from './group-commit'
import { decodeTuple } from './key-codec'
import {
  type Decoded,
  decodeChunk,
  decodeClockOffset,
  decodeEntry,
  decodeHardState,
  decodeLogStart,
  decodeSnapshotMeta,
  encodeChunk,
  encodeClockOffset,
  encodeEntry,
  encodeHardState,
  encodeLogStart,
  encodeSnapshotMeta,
  type LogStart,
} from './log-codec'
import {
  clockOffsetKey,
  entriesRange,
  entryKey,
  entryKeyAt,
  entryKeyPrefix,
  hardStateKey,
  logStartKey,
  snapshotChunkKey,
  snapshotChunkRange,
  snapshotMetaKey,
} from './log-keys'

export interface GroupLogLimits {
  /** Snapshot data is stored in chunks of at most this many bytes. */
  readonly snapshotChunkBytes: number
  /** Snapshot data larger than this is refused (it is held in memory, see README). */
  readonly snapshotDataBytesMax: number
  /** Entries read from the engine per page while recovering. */
  readonly recoverPageEntries: number
}

/** The in-memory tail's size: the entries since the last compaction. */
export interface TailStats {
  readonly entries: number
  /** Data bytes of those entries plus a fixed per-entry overhead estimate. */
  readonly bytes: number
}

/** Per-entry memory estimate beyond its data, for TailStats. */
const ENTRY_OVERHEAD_BYTES = 64

const EMPTY_CONF: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [] }
const EMPTY_SNAPSHOT: Snapshot = { meta: { index: 0, term: 0, conf: EMPTY_CONF }, data: new Uint8Array(0) }

/**
 * One Raft group's log in the shared database: raft-core's WritableLogStorage.
 *
 * Reads are synchronous and served from memory: every entry since the last compaction
 * (the "cache of recent entries" is the whole uncompacted tail; its size is bounded by
 * compacting behind snapshots, see `tailStats()`), the hard state, and the latest snapshot
 * with its data. Writes change that memory at once and stage their ops with the
 * database's GroupCommit; they are durable after the next `flush()`. A write that the group
 * commit refuses (OverloadedError) changes nothing.
 *
 * Returned entries are the stored objects: callers must not mutate them or their data.
 *
 * Invariants: entries[i].index = start.index + 1 + i; firstIndex() - 1 = start.index is
 * the last discarded entry (term start.term); snapshot.meta.index >= start.index.
 */
export class GroupLog implements WritableLogStorage {
  private closed = false
  private readonly entryPrefix: Uint8Array

  private constructor(
    readonly groupId: number,
    private readonly commit: GroupCommit,
    private readonly limits: GroupLogLimits,
    private hardState: HardState,
    /** The recorded clock offset (setClockOffset), undefined while none is. */
    private clockOffsetMs: number | undefined,
    private snap: Snapshot,
    /** Chunks the stored snapshot data occupies on disk. */
    private snapChunks: number,
    private start: LogStart,
    private readonly log: Entry[],
    private tailBytes: number,
    /** The membership to report while no snapshot carries one (see `initialState`). */
    private readonly initialConf: ConfState,
  ) {
    this.entryPrefix = entryKeyPrefix(groupId)
  }

  /**
   * Reads a group's hard state, snapshot and log from `reader` (use a consistent engine
   * snapshot) and verifies them. Throws CorruptRecordError naming the group (and the index,
   * for an entry) when a record fails its checksum or does not decode, when the log has a
   * hole, or when the hard state commits past the last entry.
   */
  static async recover(
    reader: KvReader,
    groupId: number,
    commit: GroupCommit,
    limits: GroupLogLimits,
    initialConf: ConfState = EMPTY_CONF,
  ): Promise<GroupLog> {
    const [hsRec, metaRec, startRec, offsetRec] = await reader.getMany([
      hardStateKey(groupId),
      snapshotMetaKey(groupId),
      logStartKey(groupId),
      clockOffsetKey(groupId),
    ])
    const hardState = hsRec ? must(decodeHardState(hsRec), groupId, 'hard state') : EMPTY_HARD_STATE
    const clockOffsetMs = offsetRec ? must(decodeClockOffset(offsetRec), groupId, 'clock offset') : undefined
    const start = startRec ? must(decodeLogStart(startRec), groupId, 'log start') : { index: 0, term: 0 }
    let snap = EMPTY_SNAPSHOT
    let snapChunks = 0
    if (metaRec) {
      const stored = must(decodeSnapshotMeta(metaRec), groupId, 'snapshot metadata')
      const chunks = await reader.range({ ...snapshotChunkRange(groupId), limit: stored.chunkCount + 1 })
      if (chunks.length !== stored.chunkCount) {
        throw corrupt(
          groupId,
          `snapshot at ${stored.meta.index} has ${chunks.length} chunks, expected ${stored.chunkCount}`,
        )
      }
      const data = new Uint8Array(stored.dataBytes)
      let at = 0
      for (const [i, [, rec]] of chunks.entries()) {
        const bytes = must(decodeChunk(rec), groupId, `snapshot chunk ${i}`)
        if (at + bytes.length > data.length)
          throw corrupt(groupId, 'snapshot chunks hold more bytes than recorded')
        data.set(bytes, at)
        at += bytes.length
      }
      if (at !== stored.dataBytes || crc32c(data) !== stored.dataCrc) {
        throw corrupt(groupId, `snapshot data at index ${stored.meta.index} fails its length or checksum`)
      }
      snap = { meta: stored.meta, data }
      snapChunks = stored.chunkCount
    }
    if (snap.meta.index < start.index) {
      throw corrupt(groupId, `snapshot index ${snap.meta.index} is below the compacted index ${start.index}`)
    }

    const log: Entry[] = []
    let tailBytes = 0
    const all = entriesRange(groupId)
    let from = entryKey(groupId, start.index + 1)
    // Bounded: each page advances past at least one entry, or the loop ends.
    for (let page = 0; ; page++) {
      const rows = await reader.range({ gte: from, lt: all.lt, limit: limits.recoverPageEntries })
      for (const [key, rec] of rows) {
        const index = entryIndexOf(key, groupId)
        const expected = start.index + 1 + log.length
        if (index !== expected) {
          throw new CorruptRecordError(
            `group ${groupId}: the log has a hole: entry ${expected} is missing (next stored is ${index})`,
            { groupId, index: expected },
          )
        }
        const decoded = decodeEntry(rec)
        if (!decoded.ok) {
          throw new CorruptRecordError(`group ${groupId}: entry ${index} is corrupt: ${decoded.reason}`, {
            groupId,
            index,
          })
        }
        const e = decoded.value
        if (e.index !== index) {
          throw new CorruptRecordError(
            `group ${groupId}: entry stored at index ${index} says index ${e.index}`,
            {
              groupId,
              index,
            },
          )
        }
        const prevTerm = log.length > 0 ? (log[log.length - 1] as Entry).term : start.term
        if (e.term < prevTerm) {
          throw new CorruptRecordError(
            `group ${groupId}: entry ${index} has term ${e.term} below ${prevTerm}`,
            {
              groupId,
              index,
            },
          )
        }
        log.push(e)
        tailBytes += e.data.length + ENTRY_OVERHEAD_BYTES
      }
      if (rows.length < limits.recoverPageEntries) break
      from = entryKey(groupId, start.index + 1 + log.length)
      if (page > Number.MAX_SAFE_INTEGER / limits.recoverPageEntries)
        throw new Error('recover: page loop bound')
    }
    const lastIndex = start.index + log.length
    if (hardState.commit > lastIndex) {
      throw corrupt(
        groupId,
        `hard state commit ${hardState.commit} is past the last index ${lastIndex}; the log lost entries it had acknowledged`,
      )
    }
    return new GroupLog(
      groupId,
      commit,
      limits,
      hardState,
      clockOffsetMs,
      snap,
      snapChunks,
      start,
      log,
      tailBytes,
      initialConf,
    )
  }

  /**
   * The hard state, and the membership of the latest snapshot — or, while there is none
   * (index 0), the `initialConf` the group was opened with (its bootstrap membership).
   * Membership changes after the snapshot are in the log; the core replays them.
   */
  initialState(): { hardState: HardState; conf: ConfState; clockOffsetMs?: number } {
    this.checkOpen()
    const conf = this.snap.meta.index > 0 ? this.snap.meta.conf : this.initialConf
    return this.clockOffsetMs === undefined
      ? { hardState: this.hardState, conf }
      : { hardState: this.hardState, conf, clockOffsetMs: this.clockOffsetMs }
  }

  entries(lo: number, hi: number, bytesMax: number): Entry[] {
    this.checkOpen()
    if (lo < this.firstIndex()) {
      throw new CompactedError(
        `group ${this.groupId}: entry ${lo} is compacted (first index ${this.firstIndex()})`,
      )
    }
    if (hi > this.lastIndex() + 1) {
      throw new UnavailableError(
        `group ${this.groupId}: entries up to ${hi - 1} asked, last index ${this.lastIndex()}`,
      )
    }
    if (lo >= hi) return []
    const base = this.start.index + 1
    const out: Entry[] = [this.log[lo - base] as Entry]
    let bytes = (out[0] as Entry).data.length
    for (let i = lo + 1; i < hi; i++) {
      const e = this.log[i - base] as Entry
      bytes += e.data.length
      if (bytes > bytesMax) break
      out.push(e)
    }
    return out
  }

  term(index: number): number {
    this.checkOpen()
    if (index < this.start.index) {
      throw new CompactedError(
        `group ${this.groupId}: term of ${index} asked, compacted up to ${this.start.index}`,
      )
    }
    if (index > this.lastIndex()) {
      throw new UnavailableError(
        `group ${this.groupId}: term of ${index} asked, last index ${this.lastIndex()}`,
      )
    }
    if (index === this.start.index) return this.start.term
    return (this.log[index - this.start.index - 1] as Entry).term
  }

  firstIndex(): number {
    return this.start.index + 1
  }

  lastIndex(): number {
    return this.start.index + this.log.length
  }

  snapshot(): Snapshot {
    this.checkOpen()
    return this.snap
  }

  append(entries: readonly Entry[]): void {
    this.checkOpen()
    if (entries.length === 0) return
    const first = (entries[0] as Entry).index
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i] as Entry
      if (e.index !== first + i) {
        throw new InvalidArgumentError(
          `group ${this.groupId}: append entries are not consecutive at ${e.index}`,
        )
      }
      if (!Number.isSafeInteger(e.term) || e.term < 1 || (i > 0 && e.term < (entries[i - 1] as Entry).term)) {
        throw new InvalidArgumentError(
          `group ${this.groupId}: entry ${e.index} has a bad or decreasing term ${e.term}`,
        )
      }
      if (!(e.data instanceof Uint8Array)) {
        throw new InvalidArgumentError(`group ${this.groupId}: entry ${e.index} data is not a Uint8Array`)
      }
      // What the record cannot hold (log-codec: type 0 or 1, a varint up to 2^53 - 1) would be
      // stored all the same and fail the group's next open, or come back changed.
      if ((e.type !== 0 && e.type !== 1) || !Number.isSafeInteger(e.timestampMs) || e.timestampMs < 0) {
        throw new InvalidArgumentError(
          `group ${this.groupId}: entry ${e.index} has a bad type ${e.type} or timestamp ${e.timestampMs}`,
        )
      }
    }
    const last = first + entries.length - 1
    // Entries at or below the compacted index are committed and already covered (etcd does the same).
    if (last <= this.start.index) return
    const skip = Math.max(0, this.start.index + 1 - first)
    const from = first + skip
    if (from > this.lastIndex() + 1) {
      throw new InvalidArgumentError(
        `group ${this.groupId}: append at ${from} leaves a hole after the last index ${this.lastIndex()}`,
      )
    }
    const prevTerm = this.term(from - 1)
    if ((entries[skip] as Entry).term < prevTerm) {
      throw new InvalidArgumentError(
        `group ${this.groupId}: entry ${from} has a term below entry ${from - 1}'s`,
      )
    }
    const ops: BatchOp[] = []
    for (let i = skip; i < entries.length; i++) {
      const e = entries[i] as Entry
      ops.push({ type: 'put', key: this.entryKey(e.index), value: encodeEntry(e) })
    }
    const oldLast = this.lastIndex()
    for (let i = last + 1; i <= oldLast; i++) ops.push({ type: 'del', key: this.entryKey(i) })
    this.commit.stage(ops)
    // Raft §5.3: the conflicting suffix from `from` on is replaced.
    const keep = from - this.start.index - 1
    for (let i = keep; i < this.log.length; i++)
      this.tailBytes -= (this.log[i] as Entry).data.length + ENTRY_OVERHEAD_BYTES
    this.log.length = keep
    for (let i = skip; i < entries.length; i++) {
      const e = entries[i] as Entry
      this.log.push(e)
      this.tailBytes += e.data.length + ENTRY_OVERHEAD_BYTES
    }
  }

  setHardState(hardState: HardState): void {
    this.checkOpen()
    this.commit.stage([{ type: 'put', key: hardStateKey(this.groupId), value: encodeHardState(hardState) }])
    this.hardState = hardState
  }

  setClockOffset(clockOffsetMs: number): void {
    this.checkOpen()
    if (!Number.isSafeInteger(clockOffsetMs)) {
      throw new InvalidArgumentError(`a clock offset is a whole number of milliseconds, got ${clockOffsetMs}`)
    }
    this.commit.stage([
      { type: 'put', key: clockOffsetKey(this.groupId), value: encodeClockOffset(clockOffsetMs) },
    ])
    this.clockOffsetMs = clockOffsetMs
  }

  applySnapshot(snapshot: Snapshot): void {
    this.checkOpen()
    const { index, term } = snapshot.meta
    if (index < this.snap.meta.index) {
      throw new InvalidArgumentError(
        `group ${this.groupId}: snapshot at ${index} is older than the stored one at ${this.snap.meta.index}`,
      )
    }
    const holds = index >= this.firstIndex() && index <= this.lastIndex() && this.term(index) === term
    const dropThrough = holds ? index : this.lastIndex()
    const ops = this.snapshotOps(snapshot)
    for (let i = this.firstIndex(); i <= dropThrough; i++) ops.push({ type: 'del', key: this.entryKey(i) })
    const start = { index, term }
    ops.push({ type: 'put', key: logStartKey(this.groupId), value: encodeLogStart(start) })
    this.commit.stage(ops)
    this.installSnapshot(snapshot)
    this.discardThrough(dropThrough)
    this.start = start
  }

  /**
   * Records `snapshot` and discards the log up to `compactIndex`. A snapshot older than the
   * stored one is not recorded (the log is still compacted), as raft-core's MemoryLogStorage
   * does. Throws InvalidArgumentError unless compactIndex <= snapshot index and <= lastIndex().
   */
  compact(snapshot: Snapshot, compactIndex: number): void {
    this.checkOpen()
    if (compactIndex > snapshot.meta.index || compactIndex > this.lastIndex()) {
      throw new InvalidArgumentError(
        `group ${this.groupId}: compact index ${compactIndex} is beyond the snapshot (${snapshot.meta.index}) or the log (${this.lastIndex()})`,
      )
    }
    const record = snapshot.meta.index >= this.snap.meta.index
    const ops = record ? this.snapshotOps(snapshot) : []
    let start = this.start
    if (compactIndex > this.start.index) {
      start = { index: compactIndex, term: this.term(compactIndex) }
      for (let i = this.firstIndex(); i <= compactIndex; i++) ops.push({ type: 'del', key: this.entryKey(i) })
      ops.push({ type: 'put', key: logStartKey(this.groupId), value: encodeLogStart(start) })
    }
    if (ops.length === 0) return
    this.commit.stage(ops)
    if (record) this.installSnapshot(snapshot)
    this.discardThrough(start.index)
    this.start = start
  }

  /** The size of the in-memory tail; compact behind a snapshot to shrink it. */
  tailStats(): TailStats {
    return { entries: this.log.length, bytes: this.tailBytes }
  }

  /** Refuses every later call (the store closed, or the group was removed). */
  close(): void {
    this.closed = true
  }

  /** The ops that store `snapshot` (metadata and data chunks), replacing the stored one. */
  private snapshotOps(snapshot: Snapshot): BatchOp[] {
    const data = snapshot.data
    if (!(data instanceof Uint8Array))
      throw new InvalidArgumentError(`group ${this.groupId}: snapshot data is not bytes`)
    if (data.length > this.limits.snapshotDataBytesMax) {
      throw new SnapshotTooLargeError(
        `group ${this.groupId}: snapshot data of ${data.length} bytes is above snapshotDataBytesMax ${this.limits.snapshotDataBytesMax}`,
      )
    }
    const chunkBytes = this.limits.snapshotChunkBytes
    const chunkCount = Math.ceil(data.length / chunkBytes)
    const ops: BatchOp[] = []
    const meta = { meta: snapshot.meta, dataBytes: data.length, chunkCount, dataCrc: 0 }
    if (data === this.snap.data && this.snapChunks === chunkCount) {
      // The same bytes are stored already (compaction behind an unchanged snapshot).
      meta.dataCrc = crc32c(data)
    } else {
      meta.dataCrc = crc32c(data)
      for (let c = 0; c < chunkCount; c++) {
        const bytes = data.subarray(c * chunkBytes, Math.min(data.length, (c + 1) * chunkBytes))
        ops.push({ type: 'put', key: snapshotChunkKey(this.groupId, c), value: encodeChunk(bytes) })
      }
    }
    for (let c = chunkCount; c < this.snapChunks; c++)
      ops.push({ type: 'del', key: snapshotChunkKey(this.groupId, c) })
    ops.push({ type: 'put', key: snapshotMetaKey(this.groupId), value: encodeSnapshotMeta(meta) })
    return ops
  }

  private installSnapshot(snapshot: Snapshot): void {
    this.snap = snapshot
    this.snapChunks = Math.ceil(snapshot.data.length / this.limits.snapshotChunkBytes)
  }

  /** Drops the in-memory entries up to and including `index`. */
  private discardThrough(index: number): void {
    const n = Math.min(this.log.length, Math.max(0, index - this.start.index))
    for (let i = 0; i < n; i++) this.tailBytes -= (this.log[i] as Entry).data.length + ENTRY_OVERHEAD_BYTES
    this.log.splice(0, n)
  }

  private entryKey(index: number): Uint8Array {
    return entryKeyAt(this.entryPrefix, index)
  }

  private checkOpen(): void {
    if (this.closed)
      throw new ClosedError(`group ${this.groupId}'s log is closed (store closed or group removed)`)
  }
}

/** The index an entry key names; throws CorruptRecordError for a key of another shape. */
function entryIndexOf(key: Uint8Array, groupId: number): number {
  try {
    const t = decodeTuple(key)
    const index = t[3]
    if (t.length === 4 && typeof index === 'number') return index
  } catch (err) {
    throw new CorruptRecordError(`group ${groupId}: a log key does not decode`, { groupId }, { cause: err })
  }
  throw new CorruptRecordError(`group ${groupId}: a log key has the wrong shape`, { groupId })
}

function must<T>(d: Decoded<T>, groupId: number, what: string): T {
  if (d.ok) return d.value
  throw corrupt(groupId, `${what} is corrupt: ${d.reason}`)
}

function corrupt(groupId: number, message: string): CorruptRecordError {
  return new CorruptRecordError(`group ${groupId}: ${message}`, { groupId })
}
