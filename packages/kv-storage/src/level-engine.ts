import { constants as fsConstants } from 'node:fs'
import { access, mkdir, open as openFile, readdir, rm, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { ClassicLevel } from 'classic-level'
import {
  type BatchOp,
  compareKeys,
  type Engine,
  type EngineSnapshot,
  isEmptyRange,
  type KeyRange,
  type KeyValue,
  lowerBoundOf,
  upperBoundOf,
  type WriteOptions,
} from './engine'
import {
  ClosedError,
  DatabaseCorruptError,
  DirectoryMissingError,
  DirectoryUnwritableError,
  InvalidArgumentError,
  LockedError,
  type OpenError,
  OpenFailedError,
  OverloadedError,
  WriteFailedError,
} from './errors'
import { KeyScratch } from './key-scratch'
import {
  CORRUPT_MARKER,
  dataFilesWithoutCurrent,
  droppedOnRecovery,
  quarantined,
  quarantineTried,
} from './level-recovery'
import { type CorruptionHandler, isNotOpen, type LevelOp, plain, ReadGuard } from './read-guard'
import { valueChecksumsOf } from './value-checksum'
import { checkOps, checkRange } from './write-batch'

type Db = ClassicLevel<Uint8Array, Uint8Array>

/**
 * classic-level's own implementation of the methods abstract-level's public `batch` and
 * `getMany` call after encoding each key and value, cloning each op, running hooks and
 * emitting events. This engine's keys and values are always Uint8Array (the `view` encoding is
 * the identity), it uses no hooks or events, and it checks ops and the open state itself, so it
 * calls them directly. A write goes through a chained batch's native `_put`/`_del` (one native
 * call per op with its key and value as arguments): about half the event-loop time of
 * `_batch`, which reads each op object's properties from native code, and no op objects made
 * for the sealed values (a batch of 256 puts cost about 4 times less CPU this way than through
 * the public `batch`; the server's hottest path).
 */
interface LevelImplementation {
  _chainedBatch(): LevelChainedBatch
  _getMany(keys: readonly Uint8Array[], options: typeof VIEW_READ): Promise<(Uint8Array | undefined)[]>
}
interface LevelChainedBatch {
  _put(key: Uint8Array, value: Uint8Array): void
  _del(key: Uint8Array): void
  _write(options: { sync: boolean }): Promise<void>
  /** The public close: detaches the batch from its database (its native part goes on GC). */
  close(): Promise<void>
}
const VIEW_READ = { fillCache: true, keyEncoding: 'view', valueEncoding: 'view' } as const

function implementation(db: Db): LevelImplementation {
  return db as unknown as LevelImplementation
}

/**
 * The memtable size by default: 32 MiB, not LevelDB's 4 MiB. Every level-0 table is merged
 * with all of level 1 it overlaps, and a Raft log and queue state spread over the whole key
 * space overlap all of it: with 4 MiB memtables (~0.5 MB tables, the values compress well)
 * each level-0 compaction rewrote ~11 MB of level 1 to merge ~2 MB. Measured against 3 nodes
 * (`mq-bench produce -n 1200000 -w 1024 --partitions 1`): 23.3 vs 36.5 µs of server CPU per
 * message. Costs up to two memtables of memory (the one being written to a table) and a longer
 * log replay when the database opens after a crash.
 */
const WRITE_BUFFER_BYTES_DEFAULT = 32 * 1024 * 1024

export interface LevelEngineOptions {
  /**
   * Create the database (and its directory, but never the directory's parent) when it does
   * not exist. Default true. With false, a missing database fails with DirectoryMissingError.
   */
  readonly createIfMissing?: boolean
  /** LevelDB's block cache, in bytes. Default 8 MiB (LevelDB's default). */
  readonly cacheBytes?: number
  /** LevelDB's memtable size before it is written to a table, in bytes. Default WRITE_BUFFER_BYTES_DEFAULT. */
  readonly writeBufferBytes?: number
  /** Writes queued behind the one in flight, at most; one more rejects with OverloadedError. Default 10,000. */
  readonly writesPendingMax?: number
  /**
   * Whether a new database stores each value with a CRC32C of its key and bytes, checked on
   * every read (value-checksum.ts). Default true. An existing database keeps its format.
   */
  readonly valueChecksums?: boolean
  /**
   * Called once when a read finds damaged data (a value failing its checksum, or a corrupt
   * LevelDB block), after the database was quarantined; the read rejects with CorruptRecordError.
   */
  readonly onCorruption?: CorruptionHandler
}

/**
 * The durable Engine: LevelDB through classic-level 3, binary keys and values.
 *
 * Writes are serialised (one batch at a time, in call order), so a `clear` op can be
 * turned into deletes of the keys the range holds at that moment and the whole batch stays
 * one atomic LevelDB write. A read issued after `write()` resolves sees the write.
 * Open with `LevelEngine.open(path)`; every open failure is an OpenError naming the path.
 */
export class LevelEngine implements Engine {
  private closed = false
  private writeChain: Promise<unknown> = Promise.resolve()
  private writesPending = 0
  /** The write LevelDB failed, if one did: every later write fails with it (see writeNow). */
  private writeFailure: WriteFailedError | undefined
  private readonly snapshots = new Set<LevelSnapshot>()
  /** Its reads' iterator trips under way, and its snapshots': close() waits for them (see Trips). */
  private readonly trips = new Trips()
  private readonly gate: ReadGate = {
    isOpen: () => !this.closed,
    trips: this.trips,
    closedError: () => new ClosedError(`database at ${this.path} is closed`),
  }

  private constructor(
    /** The absolute path of the database directory. */
    readonly path: string,
    private readonly db: Db,
    private readonly writesPendingMax: number,
    private readonly guard: ReadGuard,
  ) {}

  /** Whether this database's values carry checksums (new databases do, by default). */
  get valueChecksums(): boolean {
    return this.guard.checksums
  }

  /**
   * Opens (or creates) the database at `path`. Throws LockedError when another process
   * holds it, DirectoryMissingError when the directory (or its parent) is missing or not a
   * directory, DirectoryUnwritableError when it cannot be created or written,
   * DatabaseCorruptError when its files are damaged, OpenFailedError otherwise. On failure
   * nothing is left behind: a directory this call created is removed again, and so is what
   * it added to a directory that held no database; an existing database keeps its files
   * (LevelDB may only rotate its informational LOG).
   */
  static async open(path: string, options: LevelEngineOptions = {}): Promise<LevelEngine> {
    const abs = resolve(path)
    const createIfMissing = options.createIfMissing ?? true
    const created = await prepareDirectory(abs, createIfMissing)
    // What the directory held before, to undo a failed open that found no database there. Not
    // listable (EMFILE, say): no open, since a database there would pass for a new one (its
    // files removed by that undo, or a checksum marker written into it).
    let before: string[] = []
    try {
      if (!created) before = await readdir(abs)
    } catch (err) {
      throw new OpenFailedError(abs, `cannot open database at ${path}: cannot list it: ${describe(err)}`, {
        cause: err,
      })
    }
    const marker = created ? undefined : await quarantined(abs)
    if (marker !== undefined) {
      throw new DatabaseCorruptError(
        abs,
        `cannot open database at ${path}: it was quarantined (${CORRUPT_MARKER}) when an earlier open found damaged data: ${marker.trim()}`,
      )
    }
    const orphans = dataFilesWithoutCurrent(before)
    if (orphans.length > 0) {
      throw new DatabaseCorruptError(
        abs,
        `cannot open database at ${path}: it holds LevelDB data (${orphans.slice(0, 5).join(', ')}${orphans.length > 5 ? ', …' : ''}) but no CURRENT file, and opening it would start an empty database over them (LevelDB deletes the tables it does not know): restore CURRENT (one line naming the newest MANIFEST-* file), or rebuild the node from a replica`,
      )
    }
    let checksums: boolean
    try {
      checksums = await valueChecksumsOf(abs, !before.includes('CURRENT'), options.valueChecksums ?? true)
    } catch (err) {
      if (created) await rm(abs, { recursive: true, force: true })
      throw new OpenFailedError(abs, `cannot open database at ${path}: ${describe(err)}`, { cause: err })
    }
    const db: Db = new ClassicLevel<Uint8Array, Uint8Array>(abs, {
      keyEncoding: 'view',
      valueEncoding: 'view',
      cacheSize: options.cacheBytes ?? 8 * 1024 * 1024,
      writeBufferSize: options.writeBufferBytes ?? WRITE_BUFFER_BYTES_DEFAULT,
    })
    try {
      await db.open({ createIfMissing, errorIfExists: false })
    } catch (err) {
      const error = openError(abs, err)
      // Locked: another process or handle holds the database there, which it may have created
      // since this call looked (two starts on one data dir): its files, not this call's to undo.
      if (!(error instanceof LockedError)) {
        if (created) await rm(abs, { recursive: true, force: true })
        else if (!before.includes('CURRENT')) await removeNewEntries(abs, before)
      }
      throw error
    }
    const dropped = await droppedOnRecovery(abs).catch(async (err: Error) => {
      await db.close().catch(() => {})
      throw new OpenFailedError(abs, `cannot open database at ${path}: ${err.message}`, { cause: err })
    })
    if (dropped.length > 0) {
      await db.close().catch(() => {})
      // LevelDB has deleted the damaged log and kept the rest: the marker is the only evidence
      // left. Tried again, as a read's quarantine is (read-guard.ts): one refused write let the
      // open fail with the disk's error and the next open succeed without the dropped records.
      const failure = await quarantineTried(abs, dropped)
      throw new DatabaseCorruptError(
        abs,
        failure === undefined
          ? `cannot open database at ${path}: LevelDB dropped damaged records while recovering (${dropped[0]?.trim()}); data written before may be missing, so the database is quarantined (${CORRUPT_MARKER}): rebuild it from a replica`
          : `cannot open database at ${path}: LevelDB dropped damaged records while recovering (${dropped[0]?.trim()}); data written before may be missing, and the quarantine marker ${CORRUPT_MARKER} could not be written (${failure.message}): the database would open again without them, do not use it: rebuild it from a replica`,
      )
    }
    const guard = new ReadGuard(abs, checksums, options.onCorruption)
    return new LevelEngine(abs, db, options.writesPendingMax ?? 10_000, guard)
  }

  async get(key: Uint8Array): Promise<Uint8Array | undefined> {
    this.checkOpen()
    checkKey(key)
    return this.guard.run(async () => this.guard.value(key, await this.db.get(key)))
  }

  async getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    this.checkOpen()
    for (const key of keys) checkKey(key)
    if (keys.length === 0) return []
    return this.guard.run(async () => {
      if (this.db.status !== 'open') throw new ClosedError(`database at ${this.path} is closed`)
      const stored = await implementation(this.db)._getMany(keys, VIEW_READ)
      return stored.map((v, i) => this.guard.value(keys[i] as Uint8Array, v))
    })
  }

  async range(range: KeyRange): Promise<KeyValue[]> {
    this.checkOpen()
    checkRange(range)
    return this.guard.run(() => readRange(this.db, range, undefined, this.guard, this.gate))
  }

  async keys(range: KeyRange): Promise<Uint8Array[]> {
    this.checkOpen()
    checkRange(range)
    return this.guard.run(() => readKeys(this.db, range, undefined, this.gate))
  }

  /**
   * Applies `ops` as one atomic LevelDB batch, after every earlier write. With `sync` the
   * batch is fsynced before this resolves. Rejects with ClosedError after close,
   * InvalidArgumentError for a malformed op (nothing applied), OverloadedError when
   * `writesPendingMax` writes are queued already, WriteFailedError when LevelDB fails (and for
   * every later write: reopen the engine).
   */
  async write(ops: readonly BatchOp[], options: WriteOptions): Promise<void> {
    this.checkOpen()
    checkOps(ops)
    if (this.writesPending >= this.writesPendingMax) {
      throw new OverloadedError(
        `database at ${this.path}: ${this.writesPending} writes are queued (writesPendingMax); retry when they finish`,
      )
    }
    // With no write pending the batch starts at once (the common case: the group commit
    // keeps one write in flight); otherwise it runs after the last one, in call order.
    const run =
      this.writesPending === 0
        ? this.writeNow(ops, options.sync)
        : this.writeChain.then(() => this.writeNow(ops, options.sync))
    this.writesPending++
    const settled = run.then(
      () => {
        this.writesPending--
      },
      () => {
        this.writesPending--
      },
    )
    this.writeChain = settled
    return run
  }

  async snapshot(): Promise<EngineSnapshot> {
    this.checkOpen()
    // Writes are serialised; a snapshot sees every write whose promise has resolved.
    const snap = new LevelSnapshot(
      this.guard,
      this.db,
      this.db.snapshot(),
      (s) => this.snapshots.delete(s),
      new Trips(this.trips),
    )
    this.snapshots.add(snap)
    return snap
  }

  /**
   * Waits for queued writes, closes open snapshots, waits for the iterator trips under way (a
   * read in flight then fails with ClosedError at its next trip, or completes) and closes the
   * database. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.writeChain
    for (const snap of [...this.snapshots]) await snap.close()
    // No trip starts now (every reader is closed); a snapshot closed by its owner just before
    // (so no longer in the set) may still have one under way: it is counted here too.
    await this.trips.drained()
    await this.db.close()
  }

  private async writeNow(ops: readonly BatchOp[], sync: boolean): Promise<void> {
    if (this.writeFailure) throw this.writeFailure
    if (this.db.status !== 'open') throw new ClosedError(`database at ${this.path} is closed`)
    let writing = false
    try {
      const levelOps = ops.some((op) => op.type === 'clear')
        ? await expandClears(this.db, ops)
        : (ops as readonly LevelOp[])
      if (levelOps.length === 0) return
      writing = true
      await writeBatch(this.db, levelOps, this.guard, sync)
    } catch (err) {
      if (isNotOpen(err)) throw new ClosedError(`database at ${this.path} is closed`, { cause: err })
      const error = new WriteFailedError(
        `write to the database at ${this.path} failed: ${describe(err)}${writing ? '; it takes no more writes: open it again' : ''}`,
        { cause: err },
      )
      // A LevelDB write that failed (ENOSPC, EIO) may have left part of its record in the log,
      // and LevelDB takes later writes after it (it stops only after a failed sync): the next
      // open reads a later record behind the torn one as part of it, or as damage, and drops
      // it, though its write resolved (synced). Reopened, the torn record is the log's tail.
      if (writing) this.writeFailure = error
      throw error
    }
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError(`database at ${this.path} is closed; open it again`)
  }
}

class LevelSnapshot implements EngineSnapshot {
  private closed = false
  private readonly gate: ReadGate
  constructor(
    private readonly guard: ReadGuard,
    private readonly db: Db,
    private readonly snap: ReturnType<Db['snapshot']>,
    private readonly onClose: (s: LevelSnapshot) => void,
    private readonly trips: Trips,
  ) {
    this.gate = {
      isOpen: () => !this.closed,
      trips,
      closedError: () => new ClosedError('snapshot is closed (or its engine is); take a new one'),
    }
  }

  async get(key: Uint8Array): Promise<Uint8Array | undefined> {
    this.checkOpen()
    checkKey(key)
    return this.guard.run(async () => this.guard.value(key, await this.db.get(key, { snapshot: this.snap })))
  }

  async getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    this.checkOpen()
    for (const key of keys) checkKey(key)
    if (keys.length === 0) return []
    return this.guard.run(async () =>
      (await this.db.getMany(keys as Uint8Array[], { snapshot: this.snap })).map((v, i) =>
        this.guard.value(keys[i] as Uint8Array, v),
      ),
    )
  }

  async range(range: KeyRange): Promise<KeyValue[]> {
    this.checkOpen()
    checkRange(range)
    return this.guard.run(() => readRange(this.db, range, this.snap, this.guard, this.gate))
  }

  async keys(range: KeyRange): Promise<Uint8Array[]> {
    this.checkOpen()
    checkRange(range)
    return this.guard.run(() => readKeys(this.db, range, this.snap, this.gate))
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.onClose(this)
    await this.trips.drained()
    await this.snap.close()
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('snapshot is closed (or its engine is); take a new one')
  }
}

/**
 * Bytes of keys and values one trip to LevelDB's thread pool brings back in a range read (at
 * most TRIP_ENTRIES entries a trip). classic-level's default, 16 KiB, took seven trips (each
 * two thread hand-offs) for a lease of 512 messages of 128 bytes.
 */
const READ_CHUNK_BYTES = 1024 * 1024
/** Entries a trip brings back at most (as classic-level's `all()`: it bounds the event-loop time a trip's rows take). */
const TRIP_ENTRIES = 1_000

/**
 * What a read's iterator trips need from the reader they read through: whether it is still
 * open (a trip never starts once it is not), the count of trips under way (its close waits
 * for them), and the error a read closed under it fails with.
 */
interface ReadGate {
  readonly isOpen: () => boolean
  readonly trips: Trips
  readonly closedError: () => ClosedError
}

/**
 * The iterator trips under way. Reads step their iterators with classic-level's own `_nextv`
 * (see `iterate`), which abstract-level does not see as under way: a close of the database
 * would close such an iterator in the middle of its native read, and classic-level's binding
 * asserts that never happens (`assert(!iterator->nexting_)`: the process aborts). So each trip
 * is counted here (and in its engine's Trips, for a snapshot's), no trip starts once its reader
 * is closed, and a close waits for `drained()` before it closes what the trips read.
 */
class Trips {
  private underWay = 0
  private waiters: (() => void)[] = []

  constructor(private readonly parent?: Trips) {}

  begin(): void {
    this.underWay++
    this.parent?.begin()
  }

  end(): void {
    this.underWay--
    if (this.underWay === 0) for (const waiter of this.waiters.splice(0)) waiter()
    this.parent?.end()
  }

  drained(): Promise<void> {
    if (this.underWay === 0) return Promise.resolve()
    return new Promise((resolve) => this.waiters.push(resolve))
  }
}

type Row = readonly [Uint8Array | undefined, Uint8Array | undefined]

/** classic-level's iterator beneath abstract-level's: its own `_nextv` and `_seek` (nothing of abstract-level's applied). */
interface NativeIterator {
  _nextv(size: number, options: object): Promise<Row[]>
  _seek(target: Uint8Array, options: object): void
  close(): Promise<void>
}
const NO_OPTIONS = {}

/** One trip of `iterator` through LevelDB's thread pool, counted in `gate` (see Trips). */
async function trip(iterator: NativeIterator, size: number, gate: ReadGate): Promise<Row[]> {
  if (!gate.isOpen()) throw gate.closedError()
  gate.trips.begin()
  try {
    return await iterator._nextv(size, NO_OPTIONS)
  } finally {
    gate.trips.end()
  }
}

/**
 * Reads `opts`'s iterator, handing each trip's rows to `take` until it returns false, the
 * limit is reached or the iteration ends. Returns whether LevelDB's status was checked for all
 * the iterator read.
 *
 * LevelDB steps over a table block it cannot read (its iterator saves the failure) and reports
 * it only through the iterator's status, which classic-level checks only when a trip ends the
 * iteration: the range's end, or one entry past the iterator's `limit` (its Increment).
 * abstract-level's `all()`/`nextv()` ask for no more than the limit leaves, so a read stopped by
 * its limit never ended and a damaged block inside it went unreported (its entries missing).
 * Asking for one entry more ends it, but that step goes on past the range's bound over deleted
 * keys until a live one (LevelDB has no upper bound on its iterators): a drained queue's read
 * of 1 stepped over thousands of them (the weighted-queue bench's ordered-key drain ran 13×
 * slower). So at the limit the iterator seeks back onto the last entry read (a synchronous
 * seek through the blocks already loaded; the failure saved stays) and one more trip, which
 * takes no step after a seek, meets the limit at once and checks the status: a damaged block
 * fails it with LEVEL_CORRUPTION. The trips go to classic-level's own `_nextv`, past
 * abstract-level's limit. A read stopped by `take` (its bytes) short of its limit, in a trip
 * that did not end the iteration, is not covered: false is returned (see `checkSpan`).
 */
async function iterate(
  db: Db,
  opts: IteratorOptions,
  gate: ReadGate,
  take: (rows: Row[]) => boolean,
): Promise<boolean> {
  if (!gate.isOpen()) throw gate.closedError()
  let left = opts.limit < 0 ? Number.POSITIVE_INFINITY : opts.limit
  const values = opts.values !== false
  const iterator = db.iterator(opts) as unknown as NativeIterator
  try {
    for (;;) {
      const size = Math.min(left, TRIP_ENTRIES)
      const rows = await trip(iterator, size, gate)
      // Only a trip that ended the iteration returns none (classic-level then makes no trip).
      if (rows.length === 0) return true
      left -= rows.length
      const more = take(rows)
      if (left === 0) {
        // At the limit, the iteration not ended: back onto the last entry read (a seek, so the
        // next trip takes no step), then a trip that the limit ends at once, checking the status.
        if (!gate.isOpen()) throw gate.closedError()
        iterator._seek((rows[rows.length - 1] as Row)[0] as Uint8Array, NO_OPTIONS)
        await trip(iterator, 1, gate)
        return true
      }
      // A trip that ended the iteration (its status checked) leaves nothing to read: no more
      // trips, so a close issued meanwhile does not fail a read that has all its entries.
      if (endedIteration(rows, size, values)) return true
      if (!more) return false
    }
  } finally {
    await iterator.close()
  }
}

/**
 * Whether the trip that brought `rows` (asking for `size`) ended the iteration. classic-level's
 * ReadMany returns before the end only once it holds `size` rows or more than
 * READ_CHUNK_BYTES of keys (and values, when read); short of both, the iteration ended.
 */
function endedIteration(rows: readonly Row[], size: number, values: boolean): boolean {
  if (rows.length >= size) return false
  let bytes = 0
  for (const [k, v] of rows) bytes += (k?.length ?? 0) + (values ? (v?.length ?? 0) : 0)
  return bytes <= READ_CHUNK_BYTES
}

async function readRange(
  db: Db,
  range: KeyRange,
  snapshot: ReturnType<Db['snapshot']> | undefined,
  guard: ReadGuard,
  gate: ReadGate,
): Promise<KeyValue[]> {
  if (range.bytesMax !== undefined && snapshot === undefined && iteratorOptions(range, undefined)) {
    // Its span may be read twice (checkSpan): both reads see the same entries.
    if (!gate.isOpen()) throw gate.closedError()
    const own = db.snapshot()
    try {
      return await readRange(db, range, own, guard, gate)
    } finally {
      await own.close()
    }
  }
  const opts = iteratorOptions(range, snapshot)
  if (opts === undefined) return []
  // Bounded in bytes too: until the entries read hold bytesMax.
  const bytesMax = range.bytesMax ?? Number.POSITIVE_INFINITY
  const out: KeyValue[] = []
  let bytes = 0
  const checked = await iterate(db, opts, gate, (rows) => {
    for (const [k, v] of rows) {
      const key = plain(k) as Uint8Array
      const value = guard.value(key, v) as Uint8Array
      out.push([key, value] as const)
      bytes += key.length + value.length
      if (bytes >= bytesMax) return false
    }
    return true
  })
  if (!checked) await checkSpan(db, range, out, snapshot as ReturnType<Db['snapshot']>, gate)
  return out
}

/**
 * For a read stopped by its bytes short of its limit, in a trip that did not end its
 * iteration (cut at READ_CHUNK_BYTES or TRIP_ENTRIES: a large read): reads the keys of what it
 * returned again, in the same snapshot, limited to their count so that `iterate` checks
 * LevelDB's status at the end. Rejects (LEVEL_CORRUPTION) when a block there cannot be read.
 * Costs a keys-only pass over the blocks the read returned (its values not copied out).
 */
async function checkSpan(
  db: Db,
  range: KeyRange,
  read: readonly KeyValue[],
  snapshot: ReturnType<Db['snapshot']>,
  gate: ReadGate,
): Promise<void> {
  const last = (read[read.length - 1] as KeyValue)[0]
  const span: KeyRange =
    range.reverse === true
      ? { lte: range.lte, lt: range.lt, gte: last, reverse: true, limit: read.length }
      : { gte: range.gte, gt: range.gt, lte: last, limit: read.length }
  const opts = iteratorOptions(span, snapshot) as IteratorOptions
  opts.values = false
  await iterate(db, opts, gate, () => true)
}

/** The keys of `range` (a keys-only iterator: LevelDB's values are not copied out). */
async function readKeys(
  db: Db,
  range: KeyRange,
  snapshot: ReturnType<Db['snapshot']> | undefined,
  gate: ReadGate,
): Promise<Uint8Array[]> {
  const opts = iteratorOptions(range, snapshot)
  if (opts === undefined) return []
  opts.values = false
  const keys: Uint8Array[] = []
  await iterate(db, opts, gate, (rows) => {
    for (const [k] of rows) keys.push(plain(k) as Uint8Array)
    return true
  })
  return keys
}

interface IteratorOptions {
  limit: number
  values?: boolean
  [option: string]: unknown
}

/** The largest iterator limit classic-level's binding reads as it is (an int32). */
const ITERATOR_LIMIT_MAX = 0x7fffffff

/** classic-level's iterator options for `range`; undefined when the range is empty. */
function iteratorOptions(
  range: KeyRange,
  snapshot: ReturnType<Db['snapshot']> | undefined,
): IteratorOptions | undefined {
  const lo = lowerBoundOf(range)
  const hi = upperBoundOf(range)
  if (isEmptyRange(lo, hi) || range.limit === 0) return undefined
  const opts: IteratorOptions = {
    reverse: range.reverse === true,
    // classic-level reads the limit as a 32-bit integer (2^32 became 0, 2^32 + 3 became 3):
    // clamped, it stays a bound no read's entries could reach in memory anyway.
    limit: range.limit === undefined ? -1 : Math.min(range.limit, ITERATOR_LIMIT_MAX),
    highWaterMarkBytes: READ_CHUNK_BYTES,
  }
  if (lo) opts[lo.inclusive ? 'gte' : 'gt'] = lo.key
  if (hi) opts[hi.inclusive ? 'lte' : 'lt'] = hi.key
  if (snapshot) opts.snapshot = snapshot
  return opts
}

/**
 * Ops handed to LevelDB per event-loop turn in a large batch. Each op is copied into the native
 * batch on the calling thread before the write goes to the thread pool: a clear of a partition
 * with 500,000 messages (a deleted queue) held the event loop for seconds, on every replica at
 * once, and every group lost its leader. A larger batch is built a slice at a time.
 */
const SLICE_OPS = 16_384

/** Carries each small key into the native calls (see KeyScratch); writes use it one at a time. */
const keyScratch = new KeyScratch()

/**
 * Writes `ops` as one atomic LevelDB batch (all or nothing), each put's value as `guard.seal`
 * makes it, adding SLICE_OPS ops per event-loop turn.
 */
async function writeBatch(
  db: Db,
  ops: readonly LevelOp[],
  guard: Pick<ReadGuard, 'seal'>,
  sync: boolean,
): Promise<void> {
  const batch = implementation(db)._chainedBatch()
  try {
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i] as LevelOp
      if (op.type === 'put') {
        const value = guard.seal(op.key, op.value)
        batch._put(keyScratch.place(op.key), value)
      } else batch._del(keyScratch.place(op.key))
      if ((i + 1) % SLICE_OPS === 0) await new Promise((resolve) => setImmediate(resolve))
    }
    await batch._write({ sync })
  } finally {
    await batch.close()
  }
}

/** Turns each `clear` into deletes of the keys the range holds (stored or put earlier in the batch). */
async function expandClears(db: Db, ops: readonly BatchOp[]): Promise<readonly LevelOp[]> {
  const out: LevelOp[] = []
  for (const op of ops) {
    if (op.type !== 'clear') {
      out.push(op)
      continue
    }
    if (compareKeys(op.gte, op.lt) >= 0) continue
    const inBatch = out.filter(
      (o) => o.type === 'put' && compareKeys(o.key, op.gte) >= 0 && compareKeys(o.key, op.lt) < 0,
    )
    for (const o of inBatch) out.push({ type: 'del', key: o.key })
    const it = db.keys({ gte: op.gte, lt: op.lt })
    try {
      for (;;) {
        const keys = await it.nextv(1024)
        if (keys.length === 0) break
        for (const key of keys) out.push({ type: 'del', key })
      }
    } finally {
      await it.close()
    }
  }
  return out
}

/**
 * Checks the directory before LevelDB touches it: the database directory must exist (or be
 * creatable: its parent exists and is writable), be a directory, and be writable. Returns
 * true when this call created it.
 */
async function prepareDirectory(path: string, createIfMissing: boolean): Promise<boolean> {
  const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return undefined
    throw dirError(path, err)
  })
  if (info) {
    if (!info.isDirectory()) {
      throw new DirectoryMissingError(
        path,
        `cannot open database at ${path}: it exists but is not a directory; point the data dir at a directory`,
      )
    }
    await access(path, fsConstants.R_OK | fsConstants.W_OK | fsConstants.X_OK).catch((err) => {
      throw dirError(path, err)
    })
    return false
  }
  const parent = dirname(path)
  if (!createIfMissing) {
    throw new DirectoryMissingError(
      path,
      `cannot open database at ${path}: it does not exist (and createIfMissing is false); create it or allow creation`,
    )
  }
  const parentInfo = await stat(parent).catch((err: NodeJS.ErrnoException) => {
    throw dirError(parent, err, path)
  })
  if (!parentInfo.isDirectory()) {
    throw new DirectoryMissingError(
      path,
      `cannot open database at ${path}: its parent ${parent} is not a directory; create the parent directory first`,
    )
  }
  try {
    await mkdir(path)
  } catch (err) {
    throw dirError(path, err as NodeJS.ErrnoException)
  }
  await syncDirectory(parent)
  return true
}

/** Removes what a failed open added to a directory that held no database (LevelDB's LOCK, LOG). */
async function removeNewEntries(dir: string, before: readonly string[]): Promise<void> {
  const now = await readdir(dir).catch(() => [] as string[])
  for (const name of now) {
    if (!before.includes(name)) await rm(join(dir, name), { recursive: true, force: true })
  }
}

/** Makes a new directory entry in `dir` durable (fsync of the directory; skipped where unsupported). */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await openFile(dir, 'r').catch(() => undefined)
  if (!handle) return
  try {
    await handle.sync()
  } catch (error) {
    // Some platforms and filesystems refuse fsync on a directory (EINVAL, ENOTSUP; LevelDB
    // syncs its own files); an I/O error is the disk's, and the new database's entry in its
    // parent may not be durable: the open fails.
    if ((error as NodeJS.ErrnoException).code === 'EIO') throw error
  } finally {
    await handle.close()
  }
}

function dirError(dir: string, err: NodeJS.ErrnoException, dbPath = dir): OpenError {
  const code = err.code ?? ''
  if (code === 'ENOENT' || code === 'ENOTDIR') {
    return new DirectoryMissingError(
      dbPath,
      `cannot open database at ${dbPath}: ${dir} does not exist (${code}); create the parent directory first`,
      { cause: err },
    )
  }
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS') {
    return new DirectoryUnwritableError(
      dbPath,
      `cannot open database at ${dbPath}: ${dir} is not writable (${code}); fix its permissions or choose another data dir`,
      { cause: err },
    )
  }
  return new OpenFailedError(dbPath, `cannot open database at ${dbPath}: ${describe(err)}`, { cause: err })
}

/** Maps a classic-level open failure to the OpenError that names its cause. */
function openError(path: string, err: unknown): OpenError {
  const cause = (err as { cause?: { code?: string; message?: string } }).cause
  const code = cause?.code
  const detail = cause?.message ?? describe(err)
  if (code === 'LEVEL_LOCKED') {
    return new LockedError(
      path,
      `cannot open database at ${path}: it is locked by another process or handle (${detail}); stop the other user of this data dir or choose another one`,
      { cause: err },
    )
  }
  if (code === 'LEVEL_CORRUPTION') {
    return new DatabaseCorruptError(
      path,
      `cannot open database at ${path}: its files are corrupt (${detail}); restore it from a replica or a backup`,
      { cause: err },
    )
  }
  if (/does not exist \(create_if_missing is false\)/.test(detail)) {
    return new DirectoryMissingError(
      path,
      `cannot open database at ${path}: there is no database in it and createIfMissing is false (${detail})`,
      { cause: err },
    )
  }
  if (/permission denied|read-only file system/i.test(detail)) {
    return new DirectoryUnwritableError(
      path,
      `cannot open database at ${path}: ${detail}; fix its permissions or choose another data dir`,
      { cause: err },
    )
  }
  return new OpenFailedError(path, `cannot open database at ${path}: ${detail}`, { cause: err })
}

function checkKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array)) throw new InvalidArgumentError('key must be a Uint8Array')
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}
