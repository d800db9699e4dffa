import { writeSync } from 'node:fs'
import { type FileHandle, open as openFile, readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32c } from './crc32c'
import type { BatchOp, Engine } from './engine'
import { DatabaseCorruptError, InvalidArgumentError } from './errors'
import { CORRUPT_MARKER, quarantineTried } from './level-recovery'
import { batchSeqKey } from './log-keys'

/** The mark's file, in the database directory (LevelDB ignores names that are not its own). */
export const MARK_FILE = 'MQ-DURABLE'

/**
 * Two slots, each alone in its own 4 KiB block: an update rewrites one slot in place, so a
 * write torn by a power cut damages at most that slot and the other still holds an earlier
 * (lower, so still truthful) mark.
 */
const SLOT_BYTES = 4096
const FILE_BYTES = 2 * SLOT_BYTES
/** magic "MQDM" | format 1 | pad ×3 | seq (u32 high, u32 low) | crc32c of the 16 bytes before. */
const RECORD_BYTES = 20
const MAGIC = 0x4d51444d
const FORMAT = 1

/** The sequence number each stamped batch carries, as stored under `batchSeqKey()`. */
function encodeSeq(seq: number): Uint8Array {
  const out = new Uint8Array(8)
  const view = new DataView(out.buffer)
  view.setUint32(0, Math.floor(seq / 2 ** 32))
  view.setUint32(4, seq >>> 0)
  return out
}

function decodeSeq(bytes: Uint8Array): number | undefined {
  if (bytes.length !== 8) return undefined
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const seq = view.getUint32(0) * 2 ** 32 + view.getUint32(4)
  return Number.isSafeInteger(seq) ? seq : undefined
}

function encodeRecord(seq: number): Uint8Array {
  const out = new Uint8Array(RECORD_BYTES)
  const view = new DataView(out.buffer)
  view.setUint32(0, MAGIC)
  view.setUint8(4, FORMAT)
  out.set(encodeSeq(seq), 8)
  view.setUint32(16, crc32c(out, 0, 16))
  return out
}

/** The seq of the slot at `offset`, or undefined when it is not a whole, valid record. */
function decodeRecord(file: Uint8Array, offset: number): number | undefined {
  const rec = file.subarray(offset, offset + RECORD_BYTES)
  if (rec.length !== RECORD_BYTES) return undefined
  const view = new DataView(rec.buffer, rec.byteOffset, rec.byteLength)
  if (view.getUint32(0) !== MAGIC || view.getUint8(4) !== FORMAT) return undefined
  if (view.getUint32(16) !== crc32c(rec, 0, 16)) return undefined
  return decodeSeq(rec.subarray(8, 16))
}

export interface DurabilityMarkOptions {
  /**
   * The mark file is written (to the page cache, synchronously) as every durable batch
   * resolves, and fdatasynced
   * at most once per this many milliseconds (and this long after the last batch, when idle).
   * 0 syncs after every write. Default 100.
   */
  readonly syncIntervalMs?: number
  /** The clock, in milliseconds. Default `performance.now`. */
  readonly nowMs?: () => number
}

export interface DurabilityMarkStats {
  /** The seq of the last batch stamped (handed to the engine). */
  readonly stampedSeq: number
  /** The seq of the last batch known durable (its synced write resolved). */
  readonly durableSeq: number
  /** The seq written to the mark file (in the page cache at least); never above `durableSeq`. */
  readonly markedSeq: number
  /** The seq the mark file holds on disk for certain (fdatasynced); never above `markedSeq`. */
  readonly syncedSeq: number
  readonly markWrites: number
  readonly markSyncs: number
  /** Mark writes or syncs that failed (the mark keeps its earlier value, which stays truthful). */
  readonly markFailures: number
}

/**
 * A durability high-water mark for one database: detects a write-ahead log that lost synced
 * writes — cut short at a record boundary or inside a record, or missing — which LevelDB
 * cannot tell from a crash before the write (it opens without them, silently).
 *
 * How: the group commit stamps every synced batch with the next sequence number (one put of
 * `batchSeqKey()` inside the batch, so it is atomic with it). Once a batch's synced write
 * resolves, its seq is written to the mark file (`MQ-DURABLE`: two checksummed slots,
 * rewritten in place, its own fd) synchronously, a 20-byte write to the page cache, before
 * the batch's callers are told it is durable (so before anything acknowledges or votes on
 * it); the file is fdatasynced in the background, at most every `syncIntervalMs`, never
 * awaited by a caller of `flush()`. Writes go to one slot until a sync with no write during
 * it, then to the other, so at most one slot is ever unsynced: a power cut can tear only that
 * one, and the other holds a synced, valid mark. Because a seq is written only after LevelDB
 * made its batch durable, the mark never claims more than the database holds: neither a
 * process crash nor a power cut can make it quarantine a healthy database.
 *
 * Undetected: after a power cut or kernel crash, the batches of the last `syncIntervalMs`
 * plus one sync (the page cache is gone). After a process crash (the kernel keeps the page
 * cache) every batch a caller saw durable is covered; after `close()`, every batch.
 *
 * `DurabilityMark.open` must run right after the engine opens, before anything writes to it:
 * the database's seq below the mark means synced batches are gone, and it quarantines the
 * database (`MQ-CORRUPT`) and throws DatabaseCorruptError.
 */
export class DurabilityMark {
  private stampedSeq: number
  private durableSeq: number
  private markedSeq: number
  private syncedSeq: number
  /** The slot written until the next sync; the other one holds a synced mark. */
  private dirtySlot: number
  private lastSyncMs: number
  private working: Promise<void> | undefined
  /** A sync is running; a write meanwhile keeps the slot dirty after it (see syncMark). */
  private syncing = false
  private writtenDuringSync = false
  private timer: NodeJS.Timeout | undefined
  private markWrites = 0
  private markSyncs = 0
  private markFailures = 0
  private closed = false
  private readonly syncIntervalMs: number
  private readonly nowMs: () => number

  private constructor(
    private readonly file: FileHandle,
    seq: number,
    marked: { seq: number; slot: number },
    options: DurabilityMarkOptions,
  ) {
    this.stampedSeq = seq
    this.durableSeq = seq
    this.markedSeq = marked.seq
    this.syncedSeq = marked.seq
    // The highest mark stays where it is until the other slot has been written and synced.
    this.dirtySlot = 1 - marked.slot
    this.syncIntervalMs = options.syncIntervalMs ?? 100
    if (!(this.syncIntervalMs >= 0)) {
      throw new InvalidArgumentError('durability mark: syncIntervalMs must be a number >= 0')
    }
    this.nowMs = options.nowMs ?? (() => performance.now())
    this.lastSyncMs = this.nowMs()
  }

  /**
   * Checks the database at `dir` (opened as `engine`, nothing written since) against its mark
   * and opens the mark for updates. A database without a mark and without a stamp (new, or
   * written before marks existed) gets one. Throws DatabaseCorruptError, after quarantining
   * the database, when the database's seq is below the mark (synced writes lost), when a
   * stamped database has no mark file, or when no slot of the mark file is valid.
   */
  static async open(
    engine: Engine,
    dir: string,
    options: DurabilityMarkOptions = {},
  ): Promise<DurabilityMark> {
    const stored = await engine.get(batchSeqKey())
    const seq = stored === undefined ? 0 : decodeSeq(stored)
    if (seq === undefined) {
      return refuse(dir, `its batch sequence number is malformed (${stored?.length} bytes)`)
    }
    const path = join(dir, MARK_FILE)
    const read = await readMark(dir)
    if (read === 'missing') {
      if (seq > 0) {
        return refuse(dir, `its durability mark ${MARK_FILE} is missing, though batch ${seq} carries a stamp`)
      }
      await createMarkFile(dir, seq)
      return new DurabilityMark(await openFile(path, 'r+'), seq, { seq, slot: 0 }, options)
    }
    if (read === 'damaged') {
      return refuse(dir, `its durability mark ${MARK_FILE} is damaged (no whole, valid slot)`)
    }
    if (seq < read.seq) {
      return refuse(
        dir,
        `its write-ahead log lost synced writes: LevelDB recovered up to batch ${seq}, but batch ${read.seq} had been made durable (${MARK_FILE}); the log was cut short or removed`,
      )
    }
    const file = await openFile(path, 'r+')
    try {
      // What an earlier process wrote may be in the page cache only: both slots on disk first.
      await file.datasync()
    } catch (err) {
      await file.close()
      throw err
    }
    return new DurabilityMark(file, seq, read, options)
  }

  /** The op that stamps the next batch with its seq, and that seq. Call once per synced batch. */
  stamp(): { op: BatchOp; seq: number } {
    this.stampedSeq++
    return {
      op: { type: 'put', key: batchSeqKey(), value: encodeSeq(this.stampedSeq) },
      seq: this.stampedSeq,
    }
  }

  /**
   * Records that the batch stamped `seq` is durable (its synced write resolved): writes it to
   * the mark file (the page cache) now, and leaves the sync to the background. Never throws:
   * a failed write is counted, the mark keeps its earlier (truthful) value, and the next
   * durable batch or the worker tries again.
   */
  durable(seq: number): void {
    if (seq <= this.durableSeq) return
    this.durableSeq = seq
    if (!this.closed) this.writeMark(seq)
    this.kick()
  }

  /** Writes and syncs the last durable seq (so a clean stop leaves no window), and closes. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearTimeout(this.timer)
    await this.working
    try {
      if (this.markedSeq < this.durableSeq) this.writeMark(this.durableSeq)
      if (this.syncedSeq < this.markedSeq) await this.syncMark()
    } catch {
      // Counted; the mark keeps a truthful earlier value.
    }
    await this.file.close()
  }

  stats(): DurabilityMarkStats {
    return {
      stampedSeq: this.stampedSeq,
      durableSeq: this.durableSeq,
      markedSeq: this.markedSeq,
      syncedSeq: this.syncedSeq,
      markWrites: this.markWrites,
      markSyncs: this.markSyncs,
      markFailures: this.markFailures,
    }
  }

  /** Starts the worker unless it runs (or the mark is closed). */
  private kick(): void {
    if (this.working || this.closed) return
    // Cleared in a callback, which runs after this assignment even when work() has nothing
    // to await (then its own `finally` would run before the assignment and leave it stuck).
    this.working = this.work().finally(() => {
      this.working = undefined
    })
  }

  /**
   * The one worker: one sync at a time. Syncs when the interval has passed, retries a write
   * that failed, and when caught up sets a timer for the sync still due.
   */
  private async work(): Promise<void> {
    try {
      for (;;) {
        const syncDue = this.syncedSeq < this.markedSeq
        const waitMs = this.lastSyncMs + this.syncIntervalMs - this.nowMs()
        if (syncDue && waitMs <= 0) await this.syncMark()
        else if (this.markedSeq < this.durableSeq) {
          // A write that failed in durable(): again now; on a second failure, the next batch.
          if (!this.writeMark(this.durableSeq)) return
        } else {
          if (syncDue && !this.closed && this.timer === undefined) {
            this.timer = setTimeout(() => {
              this.timer = undefined
              this.kick()
            }, waitMs)
            this.timer.unref()
          }
          return
        }
      }
    } catch {
      // Counted; the mark keeps a truthful earlier value, and the next durable batch retries.
    }
  }

  /** Writes `seq` to the dirty slot, synchronously (page cache); false when the write failed. */
  private writeMark(seq: number): boolean {
    try {
      writeSync(this.file.fd, encodeRecord(seq), 0, RECORD_BYTES, this.dirtySlot * SLOT_BYTES)
    } catch {
      this.markFailures++
      return false
    }
    this.markWrites++
    this.markedSeq = seq
    if (this.syncing) this.writtenDuringSync = true
    return true
  }

  /**
   * Syncs the file. The slots switch only when no write came during the sync: such a write
   * may not be on disk yet, so its slot stays the dirty one (and the other, synced, stays
   * untouched) until a later sync covers it.
   */
  private async syncMark(): Promise<void> {
    const seq = this.markedSeq
    this.syncing = true
    this.writtenDuringSync = false
    try {
      await this.file.datasync()
    } catch (err) {
      this.markFailures++
      throw err
    } finally {
      this.syncing = false
    }
    this.markSyncs++
    this.syncedSeq = seq
    this.lastSyncMs = this.nowMs()
    if (!this.writtenDuringSync) this.dirtySlot = 1 - this.dirtySlot
  }
}

/**
 * What the mark file in `dir` holds: the highest seq among its valid slots and that slot,
 * 'missing' when there is no file, 'damaged' when it has the wrong size or no valid slot.
 */
export async function readMark(dir: string): Promise<{ seq: number; slot: number } | 'missing' | 'damaged'> {
  const bytes = await readFile(join(dir, MARK_FILE)).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw err
  })
  if (bytes === undefined) return 'missing'
  if (bytes.length !== FILE_BYTES) return 'damaged'
  const slots = [decodeRecord(bytes, 0), decodeRecord(bytes, SLOT_BYTES)]
  let best: { seq: number; slot: number } | undefined
  slots.forEach((seq, slot) => {
    if (seq !== undefined && (best === undefined || seq > best.seq)) best = { seq, slot }
  })
  return best ?? 'damaged'
}

/**
 * Quarantines the database at `dir` (as LevelDB's dropped records do, tried again when the
 * disk refuses the marker) and throws DatabaseCorruptError, saying so when no try took.
 */
async function refuse(dir: string, reason: string): Promise<never> {
  const failure = await quarantineTried(dir, [reason], 'its durability mark check failed')
  throw new DatabaseCorruptError(
    dir,
    failure === undefined
      ? `cannot open database at ${dir}: ${reason}; data written before may be missing, so the database is quarantined (${CORRUPT_MARKER}): rebuild it from a replica`
      : `cannot open database at ${dir}: ${reason}; data written before may be missing, and the quarantine marker ${CORRUPT_MARKER} could not be written (${failure.message}): do not use it: rebuild it from a replica`,
  )
}

/** Creates the mark file atomically (both slots at `seq`): a temporary file, synced, renamed, directory synced. */
async function createMarkFile(dir: string, seq: number): Promise<void> {
  const bytes = new Uint8Array(FILE_BYTES)
  const record = encodeRecord(seq)
  bytes.set(record, 0)
  bytes.set(record, SLOT_BYTES)
  const tmp = join(dir, `${MARK_FILE}.tmp`)
  const handle = await openFile(tmp, 'w')
  try {
    await handle.write(bytes, 0, bytes.length, 0)
    await handle.sync()
  } finally {
    await handle.close()
  }
  await rename(tmp, join(dir, MARK_FILE))
  const dirHandle = await openFile(dir, 'r')
  try {
    await dirHandle.sync()
  } catch {
    // Some platforms refuse fsync on a directory.
  } finally {
    await dirHandle.close()
  }
}
