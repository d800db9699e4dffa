import type { Durability } from '@mq/raft-core'
import type { BatchOp, Engine } from './engine'
import { ClosedError, InvalidArgumentError, OverloadedError, WriteFailedError } from './errors'
import { Histogram, type HistogramSnapshot, powersOfTwo } from './histogram'
import { checkOps, opBytes } from './write-batch'

export interface GroupCommitOptions {
  /** Soft bound on ops staged and not yet handed to the engine (hard bound: twice). Default 200,000. */
  readonly stagedOpsMax?: number
  /** Soft bound on key and value bytes staged, not yet handed to the engine (hard: twice). Default 64 MiB. */
  readonly stagedBytesMax?: number
  /** `write()` calls waiting for staging room, at most; one more rejects. Default 1,024. */
  readonly roomWaitersMax?: number
  /** Cycles a `write()` waits for room before it gives up with OverloadedError. Default 64. */
  readonly roomWaitCyclesMax?: number
  /** The clock for latency figures, in milliseconds. Default `performance.now`. */
  readonly nowMs?: () => number
  /**
   * Runs a batch start later, so that every caller woken by the last batch (and everything
   * else already queued on the event loop) can stage into the next one first. Default
   * `setImmediate`: one event-loop turn, microseconds when idle.
   */
  readonly schedule?: (start: () => void) => void
  /**
   * How long ops staged by `write()` alone (a state machine's, which need not be durable
   * before anything) may wait for a `flush()` to carry them before they get a batch of their
   * own, in milliseconds. Default 5. 0: a batch of their own at once (as `flush()` does).
   */
  readonly lazyFlushMs?: number
  /**
   * Called once per durable batch with its figures, for an observer outside this package
   * (a metrics exporter). Must not throw; a throw is caught and ignored.
   */
  readonly onBatch?: (batch: GroupCommitBatch) => void
  /**
   * Stamps every batch with a sequence number and hears when it is durable, so that a write-
   * ahead log that later loses synced batches is detected at the next open (DurabilityMark).
   * Not owned: close it after the group commit.
   */
  readonly mark?: BatchMark
}

/** The group commit's side of a durability mark (see DurabilityMark). */
export interface BatchMark {
  /** The op to add to the next batch, and the sequence number it carries. */
  stamp(): { op: BatchOp; seq: number }
  /** The batch stamped `seq` was written with fsync. Must return at once and not throw. */
  durable(seq: number): void
}

/** One durable group-commit batch: ops and key+value bytes written, and its synced write time. */
export interface GroupCommitBatch {
  readonly ops: number
  readonly bytes: number
  readonly fsyncMs: number
}

/** A point-in-time copy of the group commit's figures. */
export interface GroupCommitStats {
  /** Batches written (each one engine write with one fsync). */
  readonly batches: number
  readonly opsWritten: number
  readonly bytesWritten: number
  /** Ops and bytes staged for the next batch, and their soft bounds (the hard bounds are twice). */
  readonly stagedOps: number
  readonly stagedBytes: number
  readonly stagedOpsMax: number
  readonly stagedBytesMax: number
  /** Ops of the batch being written now (0 when idle). */
  readonly inFlightOps: number
  /** `write()` calls waiting for staging room. */
  readonly roomWaiters: number
  /** Staging calls rejected with OverloadedError. */
  readonly overloads: number
  /** Batches the engine failed to write (after the first, the commit is failed for good). */
  readonly failures: number
  /** Ops per batch. */
  readonly batchOps: HistogramSnapshot
  /** Key and value bytes per batch. */
  readonly batchBytes: HistogramSnapshot
  /** Time from handing a batch to the engine (sync: true) to its resolution, in ms. */
  readonly fsyncLatencyMs: HistogramSnapshot
}

interface Deferred {
  readonly promise: Promise<void>
  resolve(): void
  reject(err: Error): void
}

function deferred(): Deferred {
  let resolve!: () => void
  let reject!: (err: Error) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  // A cycle's failure reaches every flush() caller; nobody awaiting it is not an error.
  promise.catch(() => {})
  return { promise, resolve, reject }
}

/**
 * The synchronous `stage()` (the Raft log's writes, which cannot wait) may fill the staging
 * queue to this many times the soft bound at which the asynchronous `write()` waits.
 */
export const SYNC_STAGE_FACTOR = 2

/** Batches `close()` writes at most for what is staged, flushed or written while it waits. */
const CLOSE_BATCHES_MAX = 16

const LATENCY_BOUNDS_MS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096]

/**
 * Group commit: the one writer of a database. Every group's log store, and any state
 * machine, stages ops here (synchronously, in call order); `flush()` writes everything
 * staged so far as one atomic batch with one fsync (`sync: true`) and resolves every caller
 * that asked since the last batch. While a batch is being written, new stages and flushes
 * gather for the next one, so at most one batch is in flight and the fsync rate, not the
 * caller count, sets the pace.
 *
 * Bounds and back-pressure: `stagedOpsMax` / `stagedBytesMax` are the soft bound of the
 * staging queue, twice that (`SYNC_STAGE_FACTOR`) its hard bound; one batch may be in
 * flight besides (itself at most the hard bound), so memory stays under four times the
 * soft bound. A stage that would pass a bound starts a batch at once when none is in
 * flight. When one is: the asynchronous
 * `write()` (state machines) WAITS at the soft bound for the batch to finish (at most
 * `roomWaitersMax` waiters, each at most `roomWaitCyclesMax` cycles, then OverloadedError);
 * the synchronous `stage()` — and so GroupLog.append and friends, which cannot wait —
 * goes on up to the hard bound and past it REJECTS with OverloadedError (retriable; nothing
 * was staged). One stage larger than the whole bound is accepted when nothing is staged.
 *
 * Failure: if the engine rejects a batch, that batch's flushes reject with
 * WriteFailedError, and so does every later call: the callers' in-memory state (the log
 * tails) may be ahead of the disk, so the store must be reopened (fail-stop).
 */
/**
 * The writes of one writer whose order matters to it (a state machine: each entry's ops carry
 * its applied index). Writes stage in call order, but one that fails — gives up waiting for
 * room (OverloadedError) — hands its turn on, and the next write of another writer must go on;
 * a later write of the same chain must not, or it could be durable while an earlier one never
 * is. Once a write of a chain fails, every later write of the chain, already waiting or new,
 * fails with the same error and stages nothing.
 */
export class WriteChain {
  #failure: unknown
  #failed = false

  /** The error of the chain's first failed write, if one failed. */
  get failure(): unknown {
    return this.#failure
  }

  get failed(): boolean {
    return this.#failed
  }

  /** Records the chain's first failure (later ones keep it). */
  fail(error: unknown): void {
    if (this.#failed) return
    this.#failed = true
    this.#failure = error
  }
}

export class GroupCommit implements Durability {
  private staged: BatchOp[] = []
  private stagedBytes = 0
  /** Resolved when the batch that will carry the currently staged ops is durable. */
  private next: Deferred | undefined
  /** The batch being written, if any. */
  private current: Deferred | undefined
  private inFlightOps = 0
  /**
   * `write()` stages in call order (a state machine's applied index rides with its entry's
   * ops: a later write staged first could be durable while an earlier one is not). Each takes
   * a ticket; it stages only when every earlier ticket is done (staged, or failed).
   */
  private ticketsIssued = 0
  /** Every ticket up to this one is done. */
  private ticketsDone = 0
  /** Tickets done out of order (failed while waiting): counted once the ones before are. */
  private readonly doneAhead = new Set<number>()
  /** The writes waiting (for their turn, or for room), by ticket. */
  private readonly waiting = new Map<number, Deferred>()
  /** Batches finished so far: a waiting write counts its cycles by them. */
  private batchesFinished = 0
  private failed: WriteFailedError | undefined
  private closed = false
  private startScheduled = false
  /** Some `flush()` waits for the staged ops (not only lazy `write()`s). */
  private eager = false
  private lazyTimer: ReturnType<typeof setTimeout> | undefined
  private readonly lazyFlushMs: number

  private readonly stagedOpsMax: number
  private readonly stagedBytesMax: number
  private readonly roomWaitersMax: number
  private readonly roomWaitCyclesMax: number
  private readonly nowMs: () => number
  private readonly schedule: (start: () => void) => void
  private readonly onBatch: ((batch: GroupCommitBatch) => void) | undefined
  private readonly mark: BatchMark | undefined

  private batches = 0
  private opsWritten = 0
  private bytesWritten = 0
  private overloads = 0
  private failures = 0
  private readonly batchOps = new Histogram(powersOfTwo(1, 1 << 20))
  private readonly batchBytes = new Histogram(powersOfTwo(64, 1 << 28))
  private readonly fsyncLatencyMs = new Histogram(LATENCY_BOUNDS_MS)

  constructor(
    private readonly engine: Engine,
    options: GroupCommitOptions = {},
  ) {
    this.stagedOpsMax = positive('stagedOpsMax', options.stagedOpsMax ?? 200_000)
    this.stagedBytesMax = positive('stagedBytesMax', options.stagedBytesMax ?? 64 * 1024 * 1024)
    this.roomWaitersMax = positive('roomWaitersMax', options.roomWaitersMax ?? 1024)
    this.roomWaitCyclesMax = positive('roomWaitCyclesMax', options.roomWaitCyclesMax ?? 64)
    this.nowMs = options.nowMs ?? (() => performance.now())
    this.schedule = options.schedule ?? ((start) => setImmediate(start))
    this.lazyFlushMs = options.lazyFlushMs ?? 5
    if (!Number.isFinite(this.lazyFlushMs) || this.lazyFlushMs < 0)
      throw new InvalidArgumentError('group commit: lazyFlushMs must be a number >= 0')
    this.onBatch = options.onBatch
    this.mark = options.mark
  }

  /**
   * Stages `ops` for the next batch, after everything staged before. Synchronous (the Raft
   * log's path); the ops are durable once a later `flush()` resolves. Allowed up to the hard
   * bound (`SYNC_STAGE_FACTOR` times stagedOpsMax / stagedBytesMax) while a batch is in
   * flight; past it throws OverloadedError and stages nothing. Throws ClosedError after
   * close, WriteFailedError after a failed batch, InvalidArgumentError for a malformed op.
   */
  stage(ops: readonly BatchOp[]): void {
    this.stageWithin(ops, SYNC_STAGE_FACTOR)
  }

  /** True when `ops` more ops of `bytes` bytes can be staged by `stage()` right now. */
  canStage(ops: number, bytes: number): boolean {
    return this.hasRoom(ops, bytes, SYNC_STAGE_FACTOR) || !this.current
  }

  /**
   * Makes everything staged before this call durable: resolves after the batch carrying it
   * is written with fsync (at once when nothing is staged or in flight). Rejects with
   * WriteFailedError when that batch fails, ClosedError after close.
   */
  flush(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed)
    if (this.staged.length === 0) {
      if (this.current) return this.current.promise
      if (this.closed) return Promise.reject(new ClosedError('group commit is closed'))
      return Promise.resolve()
    }
    if (this.closed) return Promise.reject(new ClosedError('group commit is closed'))
    this.next ??= deferred()
    const promise = this.next.promise
    this.eager = true
    this.scheduleBatch()
    return promise
  }

  /**
   * Stages `ops` (waiting for room when the queue is full) and resolves once they are
   * durable: how a state machine adds its own ops to the next cycle and waits for them.
   * Lazily: they ride with the next `flush()`'s batch, and get one of their own only when
   * no flush comes within `lazyFlushMs` (a state machine's writes follow log entries that
   * are durable already, so nothing waits on them but their own caller). With `chain`, it
   * fails without staging once an earlier write of the chain failed (WriteChain).
   */
  async write(ops: readonly BatchOp[], chain?: WriteChain): Promise<void> {
    if (chain?.failed) throw chain.failure
    checkOps(ops)
    let bytes = 0
    for (const op of ops) bytes += opBytes(op)
    const ticket = ++this.ticketsIssued
    const since = this.batchesFinished
    try {
      for (;;) {
        if (chain?.failed) throw chain.failure
        this.checkUsable()
        // In call order; asynchronous writers yield at the soft bound, leaving the room above
        // it to the log.
        if (ticket === this.ticketsDone + 1 && (!this.current || this.hasRoom(ops.length, bytes, 1))) {
          this.stageWithin(ops, 1)
          break
        }
        const cycles = this.batchesFinished - since
        if (cycles >= this.roomWaitCyclesMax || this.waiting.size >= this.roomWaitersMax) {
          this.overloads++
          throw new OverloadedError(
            `group commit write gave up after ${cycles} cycles waiting for staging room ` +
              `(${this.waiting.size} writers waiting); the disk cannot keep up, shed load and retry`,
          )
        }
        const turn = deferred()
        this.waiting.set(ticket, turn)
        try {
          await turn.promise
        } finally {
          this.waiting.delete(ticket)
        }
      }
    } catch (error) {
      // Before the turn passes on (finally): a later write of the chain must see it.
      chain?.fail(error)
      throw error
    } finally {
      this.ticketDone(ticket)
    }
    if (this.lazyFlushMs === 0) return this.flush()
    this.next ??= deferred()
    const promise = this.next.promise
    this.scheduleLazyBatch()
    return promise
  }

  private stageWithin(ops: readonly BatchOp[], factor: number): void {
    this.checkUsable()
    checkOps(ops)
    if (ops.length === 0) return
    let bytes = 0
    for (const op of ops) bytes += opBytes(op)
    if (!this.hasRoom(ops.length, bytes, factor)) {
      if (this.current) {
        this.overloads++
        throw new OverloadedError(
          `group commit staging queue is full (${this.staged.length} ops, ${this.stagedBytes} bytes staged; ` +
            `bounds ${factor * this.stagedOpsMax} ops, ${factor * this.stagedBytesMax} bytes) while a batch is ` +
            'being written; retry after flush() resolves',
        )
      }
      this.startBatch()
    }
    for (const op of ops) this.staged.push(op)
    this.stagedBytes += bytes
  }

  /**
   * Writes what is staged, then refuses further work. Does not close the engine. Idempotent.
   * What is staged, flushed or written while it waits for a batch goes in a later batch before
   * it resolves (up to CLOSE_BATCHES_MAX of them; what comes after is refused): once closed,
   * no batch starts (one flushed during a close used to start after it, and fail once the
   * engine was closed).
   */
  async close(): Promise<void> {
    if (this.closed) return
    for (let round = 0; round < CLOSE_BATCHES_MAX && !this.failed; round++) {
      // A lazy write's batch (`next` without a flush) is written too, not left to its timer.
      if (this.staged.length > 0 || this.next) {
        this.next ??= deferred()
        const pending = this.next
        this.eager = true
        this.scheduleBatch()
        await pending.promise.catch(() => {})
      } else if (this.current) await this.current.promise.catch(() => {})
      else break
    }
    this.closed = true
    const err = new ClosedError('group commit is closed')
    if (this.lazyTimer !== undefined) {
      clearTimeout(this.lazyTimer)
      this.lazyTimer = undefined
    }
    this.next?.reject(err)
    this.next = undefined
    for (const w of this.waiting.values()) w.reject(err)
    if (this.current) await this.current.promise.catch(() => {})
  }

  /** `ticket` staged or failed: the next one in line may stage (it is woken if waiting). */
  private ticketDone(ticket: number): void {
    this.doneAhead.add(ticket)
    while (this.doneAhead.delete(this.ticketsDone + 1)) this.ticketsDone++
    this.waiting.get(this.ticketsDone + 1)?.resolve()
  }

  stats(): GroupCommitStats {
    return {
      batches: this.batches,
      opsWritten: this.opsWritten,
      bytesWritten: this.bytesWritten,
      stagedOps: this.staged.length,
      stagedBytes: this.stagedBytes,
      stagedOpsMax: this.stagedOpsMax,
      stagedBytesMax: this.stagedBytesMax,
      inFlightOps: this.inFlightOps,
      roomWaiters: this.waiting.size,
      overloads: this.overloads,
      failures: this.failures,
      batchOps: this.batchOps.snapshot(),
      batchBytes: this.batchBytes.snapshot(),
      fsyncLatencyMs: this.fsyncLatencyMs.snapshot(),
    }
  }

  private hasRoom(ops: number, bytes: number, factor: number): boolean {
    if (this.staged.length === 0) return true
    return (
      this.staged.length + ops <= factor * this.stagedOpsMax &&
      this.stagedBytes + bytes <= factor * this.stagedBytesMax
    )
  }

  private checkUsable(): void {
    if (this.failed) throw this.failed
    if (this.closed) throw new ClosedError('group commit is closed; reopen the log store')
  }

  /** Starts the next batch soon (see `schedule`), once, unless one is in flight. */
  private scheduleBatch(): void {
    if (this.current || this.startScheduled) return
    this.startScheduled = true
    this.schedule(() => {
      this.startScheduled = false
      if (!this.current && this.next && !this.failed) this.startBatch()
    })
  }

  /** Starts the next batch after `lazyFlushMs` unless a flush starts one first. */
  private scheduleLazyBatch(): void {
    if (this.current || this.startScheduled || this.lazyTimer !== undefined) return
    // Not unref'd: someone awaits the write, and when nothing else keeps the process alive
    // (a node installing a snapshot at start, before it serves) an unref'd timer let the event
    // loop end with the write pending (exit code 13: an unsettled top-level await).
    this.lazyTimer = setTimeout(() => {
      this.lazyTimer = undefined
      this.scheduleBatch()
    }, this.lazyFlushMs)
  }

  /** Hands everything staged to the engine as one synced batch. Requires no batch in flight. */
  private startBatch(): void {
    if (this.current) throw new Error('group commit invariant: one batch in flight at most')
    const ops = this.staged
    const bytes = this.stagedBytes
    const done = this.next ?? deferred()
    this.staged = []
    this.stagedBytes = 0
    this.next = undefined
    this.eager = false
    if (this.lazyTimer !== undefined) {
      clearTimeout(this.lazyTimer)
      this.lazyTimer = undefined
    }
    this.current = done
    this.inFlightOps = ops.length
    // The stamp is the batch's last op (counted in its figures): atomic with the batch.
    const stamp = this.mark?.stamp()
    if (stamp) ops.push(stamp.op)
    const startMs = this.nowMs()
    let writing: Promise<void>
    try {
      writing = this.engine.write(ops, { sync: true })
    } catch (err) {
      // An engine that throws instead of rejecting fails the batch the same way.
      writing = Promise.reject(err)
    }
    writing.then(
      () => {
        const fsyncMs = this.nowMs() - startMs
        this.fsyncLatencyMs.record(fsyncMs)
        try {
          this.onBatch?.({ ops: ops.length, bytes, fsyncMs })
        } catch {
          // An observer's failure must not fail a durable batch.
        }
        this.batchOps.record(ops.length)
        this.batchBytes.record(bytes)
        this.batches++
        this.opsWritten += ops.length
        this.bytesWritten += bytes
        if (stamp) this.mark?.durable(stamp.seq)
        this.finishBatch()
        done.resolve()
        // Flushes that arrived during the write start the next batch, after the callers
        // woken now have had their turn to stage into it; lazy writes alone wait a little.
        if (this.next && !this.failed) {
          if (this.eager) this.scheduleBatch()
          else this.scheduleLazyBatch()
        }
      },
      (err: unknown) => {
        this.failures++
        this.failed = new WriteFailedError(
          `group commit batch of ${ops.length} ops failed to write; the log stores are now failed, reopen them ` +
            `(${err instanceof Error ? err.message : String(err)})`,
          { cause: err },
        )
        this.finishBatch()
        done.reject(this.failed)
        this.next?.reject(this.failed)
        this.next = undefined
      },
    )
  }

  private finishBatch(): void {
    this.current = undefined
    this.inFlightOps = 0
    this.batchesFinished++
    // A failure reaches every waiting write; room reaches the one whose turn it is (the others
    // are woken in turn as the ones before them stage).
    if (this.failed) for (const w of this.waiting.values()) w.reject(this.failed)
    else this.waiting.get(this.ticketsDone + 1)?.resolve()
  }
}

function positive(name: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError(`group commit: ${name} must be an integer >= 1`)
  return n
}
