import { type BatchOp, compareKeys, type KeyValue, type KvReader } from '@mq/kv-storage'
import { BoundedCache } from './bounded-cache'
import { Slab, utf8, utf8Length } from './bytes'
import type {
  Command,
  CommandResult,
  DeadMessage,
  EnqueueCommand,
  Lease,
  LeaseCommand,
  LeaseStatus,
  QueueStats,
  StoredMessage,
  WeightStats,
} from './commands'
import { CommandType, LeaseStatus as Status } from './commands'
import {
  QUEUE_CONFIG_DEFAULT,
  type QueueConfig,
  resolveConfig,
  retryBackoffMs,
  SchedulingMode,
} from './config'
import {
  InvalidArgumentError,
  invariant,
  LimitExceededError,
  OutOfOrderSequenceError,
  QueueError,
  SequenceGapError,
} from './errors'
import { ExpiryKind, idValue, type KeySpan, KeyTag, PartitionKeys, ReadyBand } from './keys'
import { parseLeaseId } from './lease-id'
import { Overlay } from './overlay'
import { READ_AHEAD_BUDGET, type ReadAheadBudget } from './read-ahead-budget'
import {
  type AttemptRecord,
  decodeAttempt,
  decodeBody,
  decodeConfig,
  decodeCount,
  decodeDedup,
  decodeIdList,
  decodeMeta,
  decodeProducer,
  decodeReadyValue,
  decodeState,
  decodeWeight,
  decodeWindowHeader,
  encodeAttempt,
  encodeBody,
  encodeConfig,
  encodeCount,
  encodeDedup,
  encodeIdList,
  encodeMeta,
  encodeProducer,
  encodeReadyValue,
  encodeState,
  encodeWeight,
  encodeWindowHeader,
  INLINE_BODY_BYTES_MAX,
  idRuns,
  loadWindowChunk,
  type MessageBody,
  type MessageMeta,
  MessageState,
  messageBytes,
  newWindow,
  PARTITION_STATE_INITIAL,
  type PartitionState,
  PRODUCER_BATCHES_KEPT,
  type ProducerBatch,
  type ProducerRecord,
  runIds,
  type ShareWindow,
  windowAt,
  windowChunk,
  windowChunks,
  windowPush,
} from './records'
import { type SchedulerMark, WeightedScheduler } from './scheduler'
import { parseWeight, WEIGHT_MAX, WEIGHT_MIN } from './weight'

/** Applies whose ops may stay unreleased (not yet written) at once: the overlay's bound. */
export const PENDING_APPLIES_MAX = 65_536

/**
 * Lease groups whose live counts are kept in memory (a cache of what the engine holds):
 * an ack or nack of a recently leased group then needs no read of its count.
 */
export const LIVE_COUNTS_CACHED_MAX = 4_096
/**
 * Producer records cached (producer id → its record, or null when it has none), written
 * through like the live counts: an idempotent producer's next batch needs no engine read
 * (a LevelDB read from the apply path is the slowest single step of an enqueue).
 */
export const PRODUCERS_CACHED_MAX = 1_024
/**
 * Message records cached (message id → its record's bytes as last written), written through
 * like the live counts: the lease writes each leased message's record, so the ack, nack or
 * extend that follows (on every replica) needs no engine read of it. Enough for the leases a
 * partition usually has in flight; an ack of an older lease reads the engine, as before.
 * Each entry holds a copy of its record (in RECORD_COPY_SLAB_BYTES slabs); records above
 * MESSAGE_META_CACHED_BYTES_MAX (a large inline body) are not cached, so a partition's cache
 * holds under ~1 MB when its entries leave about in the order they came, 4 MiB at most.
 */
export const MESSAGE_METAS_CACHED_MAX = 2_048
/** The largest message record cached (record fields plus an inline body). */
export const MESSAGE_META_CACHED_BYTES_MAX = 320
/**
 * The size of the slabs the cached record copies come from (their own: a view into the
 * shared slab would keep 16 KiB of short-lived keys and values alive per entry). A copy with
 * an ArrayBuffer of its own cost ~1 µs per leased message on every replica (V8 allocates a
 * backing store per buffer; ~6% of a lease and ack); a slab of 2 KiB holds 6 to 12 copies.
 * A slab lives while any copy in it is cached: at most 2 KiB per cached entry.
 */
const RECORD_COPY_SLAB_BYTES = 2 * 1024
const recordCopies = new Slab(RECORD_COPY_SLAB_BYTES)
/**
 * Turns of ordered keys cached (key → its turn record as stored, or null: the key has none),
 * written through like the producer records: an enqueue or ack of a recent key reads none.
 */
export const TURNS_CACHED_MAX = 4_096

/**
 * Decodes UTF-8 names (producer ids, ordered keys) read back from keys; a leading U+FEFF is
 * kept (`ignoreBOM`: by default decode drops it, and two keys that differ by it became one).
 */
const TEXT = new TextDecoder('utf-8', { ignoreBOM: true })

/** Longest consumer id, producer id, dedup key, message key or lease attempt, in UTF-8 bytes. */
export const NAME_BYTES_MAX = 256
/** Body bytes one listing (listReady, listDead) returns, at most (beyond its first message). */
export const LIST_BYTES_MAX = 4 * 1024 * 1024

/**
 * The most body bytes (at the queue's largest message) a lease that its byte budget may cut
 * reads at a time. 64 MiB made the e2e large-message run (3 MiB bodies, a 4 MiB limit) take
 * 32 s instead of 2.8 s: every replica's apply read 48 MiB for the 15 MiB it handed out.
 */
export const LEASE_READ_BYTES_MAX = 16 * 1024 * 1024
/**
 * Ready weights whose oldest age `stats` reads, at most: the heaviest ones (those of largest
 * target share). Each is one engine read (~0.1 ms on LevelDB): a partition holding messages of
 * 1,000 weights took 100-140 ms per `stats`, and a node's /metrics scrape reads every
 * partition it leads.
 */
export const STATS_AGES_MAX = 64

/**
 * Due lease groups the first read of an expiry takes; each further read takes twice as many as
 * the one before, at most as many as entries are still wanted (every group holds one at
 * least). An expiry then reads at most about twice the groups it expires (plus the first one
 * left, which tells the next deadline), whatever their sizes: a single read of expiryBatchMax
 * groups took 1,000 groups of 1,000 leases (3.9 MB) to expire one of them, and the next apply
 * read the rest again (400 groups falling due: 80,601 group values read, 307 MiB).
 */
const EXPIRY_GROUPS_READ_FIRST = 2

/**
 * Read-ahead of a weight's ready head (QueuePartition.readyAhead): a lease of n messages of one
 * weight reads up to this many of its entries (4n at most, and no more than are ready), keeps
 * those it does not take and serves the next leases from them without an engine read. Each
 * bounded read is an iterator and two trips to LevelDB's thread pool on every replica.
 */
const READY_AHEAD_ENTRIES_MAX = 512
/** Bytes (keys and values, with the buffers they keep alive) read ahead per weight, at most. */
const READY_AHEAD_BYTES_MAX = 128 * 1024
/** Weights whose read-ahead a partition keeps, at most; a lease of more weights reads none ahead. */
const READY_AHEAD_WEIGHTS_MAX = 4

/** What one apply produced. */
export interface Applied {
  readonly result: CommandResult
  /** The writes to put into the same engine batch as the apply index, in order. */
  readonly ops: BatchOp[]
  /** Pass to `release` once `ops` (and every earlier apply's) are written to the engine. */
  readonly generation: number
  /**
   * Messages of ordered keys that got their key's turn in this apply (made ready, or delayed
   * until their not-before time): an ack, say, may make a message ready then.
   */
  readonly turnsPassed: number
}

const EMPTY_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

/**
 * The state machine of one queue partition. All state lives in a kv engine under `prefix`;
 * memory holds only per-weight counters, the scheduler (both bounded by the 1,000 weights),
 * the share window and the pending writes not yet released.
 *
 * Contract: `apply` calls are serialised (never two at once); given the same commands and
 * timestamps from the same state, every replica returns the same results and the same ops.
 * Reads (`stats`, `listDead`) see every applied command, flushed or not; call them between
 * applies, not during one. If the engine fails a read during an apply, the in-memory state
 * is no longer trustworthy: drop the partition and open it again from the engine.
 */
export class QueuePartition {
  private readonly keys: PartitionKeys
  private readonly overlay: Overlay
  private configValue: QueueConfig
  private readonly scheduler: WeightedScheduler
  private readonly st: PartitionState
  private readonly ready = new Float64Array(WEIGHT_MAX + 1)
  private readonly delayed = new Float64Array(WEIGHT_MAX + 1)
  private readonly leased = new Float64Array(WEIGHT_MAX + 1)
  private readonly dead = new Float64Array(WEIGHT_MAX + 1)
  /** Σ dead (what `deadCount` answers without a loop over the weights). */
  private deadTotal = 0
  /**
   * Per weight, a key no ready key of that weight lies below (undefined: the span's start).
   * Reads of a weight's head start there instead of at the span's start, so they do not walk
   * the tombstones of the entries leased before (an LSM engine keeps them until compaction:
   * a long drain's range reads grew with every lease). Kept in memory, a bound and no more:
   * raised past each run taken from the head, lowered by any entry made ready below it.
   */
  private readonly readyFloor = new Array<Uint8Array | undefined>(WEIGHT_MAX + 1)
  /**
   * Per weight, the ready entries that come first from its floor on, in key order (`entries`
   * from `next`), as a lease read them ahead: exactly what a read of the span would return
   * first. Taking the head (a lease) moves `next` on; any other write in the weight's ready
   * span at or below the last entry held drops it (a put above it changes none of them).
   * Memory only: a hit and a miss give the same entries, so replicas stay identical.
   */
  private readonly readyAhead = new Map<
    number,
    { readonly entries: KeyValue[]; next: number; readonly bytes: number }
  >()
  /** Bounds the read-ahead of every partition of the process together (read-ahead-budget.ts). */
  private readonly aheadBudget: ReadAheadBudget
  /** What the budget calls to have this partition keep no read-ahead. */
  private readonly dropAhead = () => this.readyAhead.clear()
  /** Bytes an entry of the last read ahead kept alive, on average (sizes the next read). */
  private readyEntryBytes = 256
  private readonly dirtyWeights = new Set<number>()
  /** Live counts of lease groups (group → count), as stored; see LIVE_COUNTS_CACHED_MAX. */
  private readonly liveCounts = new BoundedCache<number, number>(LIVE_COUNTS_CACHED_MAX)
  /** Producer records as stored (null: none); see PRODUCERS_CACHED_MAX. */
  private readonly producers = new BoundedCache<string, ProducerRecord | null>(PRODUCERS_CACHED_MAX)
  /** Turn records of ordered keys as stored (null: none); see TURNS_CACHED_MAX. */
  private readonly turnRecords = new BoundedCache<string, readonly [number, number, number] | null>(
    TURNS_CACHED_MAX,
  )
  /** Message records as stored (absent ones are not cached); see MESSAGE_METAS_CACHED_MAX. */
  private readonly messageMetas = new BoundedCache<number, Uint8Array>(MESSAGE_METAS_CACHED_MAX)
  private window: ShareWindow
  private windowDirty = false
  private configDirty: boolean
  /** Lower bounds of the earliest entry of each time index (Infinity: empty). */
  private nextDeadlineMs = Number.POSITIVE_INFINITY
  private nextDueMs = Number.POSITIVE_INFINITY
  private nextExpiryMs = Number.POSITIVE_INFINITY
  private generation = 0
  private ops: BatchOp[] = []
  private applying = false
  /**
   * Messages of ordered keys that left for good (acked, dead-lettered, deleted) during the
   * current phase of an apply, with their keys: each hands its key's turn on (passTurns).
   */
  private departed: [id: number, key: Uint8Array][] = []
  /** Turns handed on during the current apply (Applied.turnsPassed). */
  private turnsPassed = 0
  /**
   * Messages the message TTL may still delete in the current apply (expiryBatchMax at its
   * start): the heads of the weights by a tick, and waiting messages as their turn comes when
   * the tick asks for it (ttlWaiting).
   */
  private ttlBudget = 0
  /** Whether the current apply deletes outlived waiting messages as their turn comes (TickCommand.ttlWaiting). */
  private ttlWaiting = false

  private constructor(
    reader: KvReader,
    prefix: Uint8Array,
    config: QueueConfig,
    configDirty: boolean,
    st: PartitionState,
    aheadBudget: ReadAheadBudget,
  ) {
    this.aheadBudget = aheadBudget
    this.keys = new PartitionKeys(prefix)
    this.overlay = new Overlay(reader, prefix.length)
    this.configValue = config
    this.configDirty = configDirty
    this.st = st
    this.scheduler = new WeightedScheduler(config.scheduling)
    this.window = newWindow(config.shareWindowLeases)
  }

  /**
   * Opens the partition stored under `prefix` in `reader` (empty: a new partition with
   * `config` over the defaults; else the stored config wins). Reads O(weights) keys.
   * Throws InvalidArgumentError for a bad config.
   */
  static async open(
    reader: KvReader,
    prefix: Uint8Array,
    config: Partial<QueueConfig> = {},
    options: { readonly readAheadBudget?: ReadAheadBudget } = {},
  ): Promise<QueuePartition> {
    const keys = new PartitionKeys(prefix)
    const [stateBytes, configBytes, windowBytes] = await reader.getMany([
      keys.state(),
      keys.config(),
      keys.window(),
    ])
    const stored = configBytes !== undefined
    const cfg = stored ? decodeConfig(configBytes) : resolveConfig(QUEUE_CONFIG_DEFAULT, config)
    const st = stateBytes ? decodeState(stateBytes) : { ...PARTITION_STATE_INITIAL }
    const p = new QueuePartition(
      reader,
      prefix,
      cfg,
      !stored,
      st,
      options.readAheadBudget ?? READ_AHEAD_BUDGET,
    )
    if (windowBytes) {
      p.window = decodeWindowHeader(windowBytes)
      const span = keys.tagSpan(KeyTag.Window)
      const chunks = await reader.range({
        gt: keys.window(),
        lt: span.lt,
        limit: windowChunks(p.window.size),
      })
      for (const [k, v] of chunks) loadWindowChunk(p.window, keys.windowChunkOf(k), v)
    }
    const weightSpan = keys.tagSpan(KeyTag.Weight)
    const records = await reader.range({ gte: weightSpan.gte, lt: weightSpan.lt, limit: WEIGHT_MAX + 1 })
    const passes: [number, number][] = []
    for (const [k, v] of records) {
      const w = keys.weightOf(k)
      const r = decodeWeight(v)
      p.ready[w] = r.ready
      p.delayed[w] = r.delayed
      p.leased[w] = r.leased
      p.dead[w] = r.dead
      p.deadTotal += r.dead
      passes.push([w, r.passNum])
    }
    // The weights with ready messages are backlogged with their passes as stored: what a
    // replica that never restarted holds in memory (a snapshot install opens here too).
    const backlogged: number[] = []
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX; w++) if ((p.ready[w] as number) > 0) backlogged.push(w)
    p.scheduler.restore({ passes, virtualNum: st.virtualNum, virtualDen: st.virtualDen }, backlogged)
    p.nextDeadlineMs = await p.firstTime(KeyTag.LeaseDeadline)
    p.nextDueMs = await p.firstTime(KeyTag.Delayed)
    p.nextExpiryMs = await p.firstTime(KeyTag.Expiry)
    return p
  }

  get config(): QueueConfig {
    return this.configValue
  }

  /** The number of pending (applied, not released) keys held in memory. */
  get pendingKeys(): number {
    return this.overlay.size
  }

  /**
   * Applies one command at the leader timestamp `nowMs` (clamped to be non-decreasing).
   * First expires what is due as of now (leases, delayed messages, dedup entries; at most
   * `expiryBatchMax` of each), then runs the command; after each of the two, the turns of
   * ordered keys whose holder left are handed on. A command that is invalid or exceeds a
   * limit returns `{ type: 'rejected', error }` and changes nothing itself.
   * Returns the result, the engine ops, a generation for `release` and the turns passed.
   */
  async apply(command: Command, nowMs: number): Promise<Applied> {
    invariant(!this.applying, 'apply calls are serialised')
    invariant(
      this.overlay.pendingApplies < PENDING_APPLIES_MAX,
      `at most ${PENDING_APPLIES_MAX} applies unreleased: write their ops and call release()`,
    )
    invariant(Number.isSafeInteger(nowMs) && nowMs >= 0, 'nowMs is a non-negative integer')
    // Before `applying` is set: a TypeError past it (reading a null's type) failed every later apply.
    invariant(typeof command === 'object' && command !== null, 'the command is an object')
    this.applying = true
    this.generation++
    this.ops = []
    this.turnsPassed = 0
    this.ttlBudget = this.configValue.expiryBatchMax
    this.ttlWaiting = command.type === CommandType.Tick && command.ttlWaiting === true
    this.overlay.track(this.generation, this.ops)
    try {
      const now = Math.max(nowMs, this.st.lastNowMs)
      this.st.lastNowMs = now
      await this.expireDue(now)
      if (this.departed.length > 0) await this.passTurns(now)
      let result: CommandResult
      try {
        result = await this.execute(command, now)
      } catch (e) {
        if (!(e instanceof QueueError)) throw e
        invariant(this.departed.length === 0, 'a rejected command changes nothing')
        result = { type: 'rejected', error: e }
      }
      if (this.departed.length > 0) await this.passTurns(now)
      this.persist()
      return { result, ops: this.ops, generation: this.generation, turnsPassed: this.turnsPassed }
    } finally {
      this.applying = false
    }
  }

  /** The ops of every apply up to `generation` are in the engine: stop holding them. */
  release(generation: number): void {
    this.overlay.release(generation)
  }

  /**
   * At most how many messages a lease at `nowMs` could find: the ready ones, or Infinity when
   * a lease deadline or a delayed message may be due (the time indexes' lower bounds). A long
   * poll uses it to wait for the next change instead of committing a lease that would come
   * back empty; it promises nothing the other way (a lease decides).
   */
  leasableAtMost(nowMs: number): number {
    if (this.nextDeadlineMs <= nowMs || this.nextDueMs <= nowMs) return Number.POSITIVE_INFINITY
    let n = 0
    for (const w of this.scheduler.backloggedWeights()) n += this.ready[w] as number
    return n
  }

  /**
   * The earliest time a lease deadline or a delayed message may fall due (a lower bound of
   * the time indexes; Infinity when neither holds an entry): a long poll waiting for messages
   * looks again then rather than at its next periodic recheck, so a nack's delay, a retry
   * backoff or a not-before time is kept to the millisecond, not to the recheck.
   */
  nextTimedMs(): number {
    return Math.min(this.nextDeadlineMs, this.nextDueMs)
  }

  /**
   * Per-weight counts, oldest ages and shares as of `nowMs`. Reads one key for each of at most
   * STATS_AGES_MAX ready weights — the lightest half and the heaviest half of them: the
   * lightest get the smallest share (in strict mode none), so their heads are the likeliest to
   * be old — and a weight in between, past that bound, has `oldestAgeMs` 0 (not read).
   */
  async stats(nowMs: number): Promise<QueueStats> {
    const inWindow = new Map<number, number>()
    for (let i = 0; i < this.window.filled; i++) {
      const w = windowAt(this.window, i)
      inWindow.set(w, (inWindow.get(w) ?? 0) + 1)
    }
    const backlogged = this.scheduler.backloggedWeights()
    const total = backlogged.reduce((a, w) => a + w, 0)
    const top = backlogged.reduce((a, w) => Math.max(a, w), 0)
    const strict = this.configValue.scheduling === SchedulingMode.Strict
    const weights: WeightStats[] = []
    // The ready weights whose age is read: up to half the bound from the light end, the rest
    // from the heavy end (all of them while there are no more than the bound).
    const aged = new Set<number>()
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX && aged.size < STATS_AGES_MAX / 2; w++)
      if ((this.ready[w] as number) > 0) aged.add(w)
    for (let w = WEIGHT_MAX; w >= WEIGHT_MIN && aged.size < STATS_AGES_MAX; w--)
      if ((this.ready[w] as number) > 0) aged.add(w)
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX; w++) {
      const ready = this.ready[w] as number
      const delayed = this.delayed[w] as number
      const leased = this.leased[w] as number
      const dead = this.dead[w] as number
      const hits = inWindow.get(w) ?? 0
      if (ready + delayed + leased + dead + hits === 0) continue
      let oldestAgeMs = 0
      if (ready > 0 && aged.has(w)) {
        const [head] = await this.overlay.range(this.readyFrom(w), 1)
        invariant(head, `weight ${w} has a ready head`)
        const entry = decodeReadyValue(head[1])
        const meta = entry.meta ?? (await this.meta(entry.id))
        oldestAgeMs = Math.max(0, nowMs - meta.enqueuedAtMs)
      }
      const targetShare = ready === 0 ? 0 : strict ? (w === top ? 1 : 0) : w / total
      const achievedShare = this.window.filled === 0 ? 0 : hits / this.window.filled
      weights.push({ weight: w, ready, delayed, leased, dead, oldestAgeMs, targetShare, achievedShare })
    }
    const st = this.st
    return {
      weights,
      messages: st.messages,
      waiting: st.waiting,
      windowLeases: this.window.filled,
      counters: {
        enqueued: st.enqueued,
        delivered: st.delivered,
        acked: st.acked,
        nacked: st.nacked,
        expired: st.expired,
        deadLettered: st.deadLettered,
        discarded: st.discarded,
      },
    }
  }

  /** How many messages are dead-lettered (in memory, no read). */
  deadCount(): number {
    return this.deadTotal
  }

  /**
   * The place in the dead-letter list (`DeadMessage.cursor`) of the last message that died so
   * far, or -1 when none ever did: a redrive `through` it moves the messages dead now, and none
   * that dies later.
   */
  deadEnd(): number {
    return this.st.deadOrder - 1
  }

  /** Up to `max` dead-lettered messages, oldest first, after `cursor` when given. */
  async listDead(max: number, cursor?: number): Promise<DeadMessage[]> {
    invariant(Number.isInteger(max) && max >= 0, 'listDead max is a non-negative integer')
    const span = this.keys.tagSpan(KeyTag.Dead)
    const from = cursor === undefined ? span : { gte: this.keys.dead(cursor + 1), lt: span.lt }
    const entries = await this.overlay.range(from, Math.min(max, this.configValue.leaseBatchMax))
    const ids = entries.map(([, v]) => idOf(v))
    const metas = (await this.overlay.getMany(ids.map((id) => this.keys.message(id)))).map((b) =>
      decodeMeta(b as Uint8Array),
    )
    const bodies = await this.listedBodies(ids, metas, LIST_BYTES_MAX, true)
    return bodies.map((body, i) => ({
      ...storedMessage(ids[i] as number, metas[i] as MessageMeta, body),
      cursor: this.keys.deadOrderOf((entries[i] as KeyValue)[0]),
    }))
  }

  /**
   * Up to `max` (at most `leaseBatchMax`) ready messages, without delivering them (a peek):
   * the heaviest weight first, each weight's in the order it delivers them (returned ones
   * ahead of fresh ones, each FIFO). Delayed and leased messages are not listed. A read
   * between applies, as `stats`.
   */
  async listReady(max: number): Promise<StoredMessage[]> {
    invariant(Number.isInteger(max) && max >= 0, 'listReady max is a non-negative integer')
    let left = Math.min(max, this.configValue.leaseBatchMax)
    let bytesLeft = LIST_BYTES_MAX
    const out: StoredMessage[] = []
    for (let w = WEIGHT_MAX; w >= WEIGHT_MIN && left > 0 && bytesLeft > 0; w--) {
      const n = Math.min(left, this.ready[w] as number)
      if (n === 0) continue
      const { ids, metas } = await this.readyHead(w, n)
      const bodies = await this.listedBodies(ids, metas, bytesLeft, out.length === 0)
      for (let i = 0; i < bodies.length; i++) {
        const body = bodies[i] as MessageBody
        out.push(storedMessage(ids[i] as number, metas[i] as MessageMeta, body))
        bytesLeft -= messageBytes(body)
      }
      if (bodies.length < n) break
      left -= n
    }
    return out
  }

  // ---- commands -------------------------------------------------------------------------

  private async execute(cmd: Command, now: number): Promise<CommandResult> {
    switch (cmd.type) {
      case CommandType.Enqueue:
        return this.enqueue(cmd, now)
      case CommandType.Lease:
        return this.lease(cmd, now)
      case CommandType.Ack:
        return { type: 'ack', statuses: await this.settle(cmd.leaseIds, now, 'ack', 0) }
      case CommandType.Nack: {
        const delayMs = cmd.delayMs ?? 0
        checkInt('nack delayMs', delayMs, 0, this.configValue.delayMsMax)
        let superseded = false
        if (cmd.attempt !== undefined) {
          checkName('nack attempt', cmd.attempt)
          // A give-back under an attempt that answered its leases more than once: another call
          // may have handed them out, so they are not the give-back's to return. Nor, with
          // `lapses`, once the attempt's record is gone (the leases' first deadline passed): a
          // lease still held then was extended, by the consumer a repeat answered (the
          // give-back's call answered nobody), and the record that said so is gone with it.
          const made = await this.attemptRecord(utf8(cmd.attempt), now)
          superseded = made === undefined ? cmd.lapses === true : made.answers > 0
        }
        return {
          type: 'nack',
          statuses: await this.settle(cmd.leaseIds, now, 'nack', delayMs, cmd.release === true, superseded),
        }
      }
      case CommandType.Extend: {
        checkInt('extend visibilityMs', cmd.visibilityMs, 1, this.configValue.visibilityMsMax)
        const statuses = await this.settle(cmd.leaseIds, now, 'extend', cmd.visibilityMs)
        const deadlinesMs = statuses.map((s) => (s === Status.Ok ? now + cmd.visibilityMs : undefined))
        return { type: 'extend', statuses, deadlinesMs }
      }
      case CommandType.Tick:
        await this.expireTtl(now)
        return { type: 'tick' }
      case CommandType.RedriveDead: {
        const deadEnd = this.deadEnd()
        const ids = await this.redrive(cmd.max, cmd.restartTtl === true, now, cmd.through)
        return { type: 'redriveDead', ids, deadEnd }
      }
      case CommandType.PurgeDead:
        return { type: 'purgeDead', ids: await this.purge(cmd.max, cmd.through, cmd.after) }
      case CommandType.PurgeReady:
        return { type: 'purgeReady', ids: await this.purgeReady(cmd.max) }
      case CommandType.Configure:
        this.configure(cmd.config)
        return { type: 'configure' }
      default:
        throw new InvalidArgumentError(`unknown command type ${String((cmd as { type: unknown }).type)}`)
    }
  }

  private async enqueue(cmd: EnqueueCommand, now: number): Promise<CommandResult> {
    const cfg = this.configValue
    const msgs = cmd.messages
    if (!Array.isArray(msgs) || msgs.length === 0) {
      throw new InvalidArgumentError('enqueue needs at least one message')
    }
    if (msgs.length > cfg.enqueueBatchMax) {
      throw new InvalidArgumentError(
        `enqueue of ${msgs.length} messages exceeds the batch limit of ${cfg.enqueueBatchMax}; split the batch`,
      )
    }
    const hasProducer = cmd.producerId !== undefined
    if (hasProducer !== (cmd.producerSeq !== undefined)) {
      throw new InvalidArgumentError('producerId and producerSeq come together: set both or neither')
    }
    if (hasProducer) {
      checkName('producerId', cmd.producerId)
      checkInt('producerSeq', cmd.producerSeq, 0, Number.MAX_SAFE_INTEGER)
      if (cmd.producerBase !== undefined)
        checkInt('producerBase', cmd.producerBase, 0, cmd.producerSeq as number)
    } else if (cmd.producerBase !== undefined) {
      throw new InvalidArgumentError('producerBase needs producerId and producerSeq')
    }
    const weights = new Array<number>(msgs.length)
    for (let i = 0; i < msgs.length; i++) {
      try {
        weights[i] = checkMessage(msgs[i] as EnqueueCommand['messages'][number], i, now, cfg)
      } catch (error) {
        // The refusal names the message at fault, so that a producer can send the others again.
        if (error instanceof InvalidArgumentError) throw new InvalidArgumentError(error.message, i)
        throw error
      }
    }

    // Idempotent producer: a remembered sequence returns its original ids.
    let producerName: Uint8Array | undefined
    let kept: readonly ProducerBatch[] = []
    if (hasProducer) {
      const producerId = cmd.producerId as string
      const seq = cmd.producerSeq as number
      producerName = utf8(producerId)
      let rec = this.producers.get(producerId)
      if (rec === undefined) {
        const bytes = await this.overlay.get(this.keys.producer(producerName))
        rec = bytes ? decodeProducer(bytes) : null
        this.producers.set(producerId, rec)
      }
      if (rec && rec.expiresAtMs > now) kept = rec.batches
      const last = kept[kept.length - 1]?.seq
      const hit = kept.find((b) => b.seq === seq)
      if (hit) return { type: 'enqueue', ids: runIds(hit.runs), duplicate: true }
      if (last !== undefined && seq < last) {
        throw new OutOfOrderSequenceError(
          `producer '${producerId}' sent sequence ${seq} after ${last}; use increasing sequences`,
        )
      }
      const base = cmd.producerBase
      if (base !== undefined && base < seq && (last === undefined || seq > last + 1)) {
        throw new SequenceGapError(
          `producer '${producerId}' sent sequence ${seq} before ${last === undefined ? `its earlier ones (from ${base})` : last + 1}, still in flight; retry it once they are answered`,
        )
      }
    }

    // Dedup keys: a live entry, or an earlier message of this batch, gives the original id.
    const dedupIds = new Array<number | undefined>(msgs.length)
    const dedupNames = new Array<Uint8Array | undefined>(msgs.length)
    const lookup: number[] = []
    for (let i = 0; i < msgs.length; i++) {
      const dk = (msgs[i] as EnqueueCommand['messages'][number]).dedupKey
      if (dk !== undefined) {
        dedupNames[i] = utf8(dk)
        lookup.push(i)
      }
    }
    if (lookup.length > 0) {
      const got = await this.overlay.getMany(lookup.map((i) => this.keys.dedup(dedupNames[i] as Uint8Array)))
      for (let j = 0; j < lookup.length; j++) {
        const bytes = got[j]
        if (!bytes) continue
        const rec = decodeDedup(bytes)
        if (rec.expiresAtMs > now) dedupIds[lookup[j] as number] = rec.id
      }
    }
    const firstOfKey = new Map<string, number>()
    let fresh = 0
    for (let i = 0; i < msgs.length; i++) {
      const dk = (msgs[i] as EnqueueCommand['messages'][number]).dedupKey
      if (dk !== undefined && dedupIds[i] === undefined) {
        const first = firstOfKey.get(dk)
        if (first === undefined) firstOfKey.set(dk, i)
        else {
          dedupIds[i] = -1 - first // resolved below, once `first` has its id
          continue
        }
      }
      if (dedupIds[i] === undefined) fresh++
    }
    if (fresh > cfg.queueMessagesMax) {
      // It could never fit, however far consumers catch up: not retriable (a retry of the
      // same batch waited out its whole deadline).
      throw new InvalidArgumentError(
        `a batch of ${fresh} new messages can never fit: the partition holds at most ${cfg.queueMessagesMax} (the queue's length limit over its partitions); send at most ${cfg.queueMessagesMax} at a time`,
      )
    }
    if (this.st.messages + fresh > cfg.queueMessagesMax) {
      throw new LimitExceededError(
        `the partition holds ${this.st.messages} messages; ${fresh} more would exceed its limit of ${cfg.queueMessagesMax} (its share of the queue's max length); retry after consumers catch up`,
      )
    }

    // Ordered keys: the turns of the keys in this batch (a message whose key has a turn waits).
    const turns = this.ordered()
      ? await this.readTurns(
          msgs.flatMap((m, i) => (m.key === undefined || dedupIds[i] !== undefined ? [] : [utf8(m.key)])),
        )
      : undefined

    // No check can fail from here on.
    const ids = new Array<number>(msgs.length)
    for (let i = 0; i < msgs.length; i++) {
      const known = dedupIds[i]
      if (known !== undefined) {
        ids[i] = known >= 0 ? known : (ids[-1 - known] as number)
        continue
      }
      const m = msgs[i] as EnqueueCommand['messages'][number]
      const w = weights[i] as number
      const id = this.st.nextId++
      this.st.enqueued++
      ids[i] = id
      this.st.messages++
      const blob = encodeBody(m.body, m.headers ?? EMPTY_HEADERS, m.key)
      const inline = blob.length <= INLINE_BODY_BYTES_MAX
      if (!inline) this.put(this.keys.body(id), blob)
      const meta: MessageMeta = {
        weight: w,
        state: MessageState.Ready,
        deliveries: 0,
        attempts: 0,
        enqueuedAtMs: now,
        slot: 0,
        band: 0,
        group: 0,
        inlineBody: inline ? blob : undefined,
        orderKey: turns !== undefined && m.key !== undefined ? utf8(m.key) : undefined,
        ttlFromMs: undefined,
      }
      const dueMs = m.notBeforeMs !== undefined && m.notBeforeMs > now ? m.notBeforeMs : 0
      if (!this.takeTurn(id, meta, dueMs, turns)) {
        if (dueMs > 0) this.toDelayed(id, meta, dueMs)
        else this.toReady(id, meta, ReadyBand.Fresh)
      }
      const name = dedupNames[i]
      if (name !== undefined && cfg.dedupWindowMs > 0) {
        const expiresAtMs = now + cfg.dedupWindowMs
        this.put(this.keys.dedup(name), encodeDedup({ id, expiresAtMs }))
        this.addExpiry(expiresAtMs, ExpiryKind.Dedup, name)
      }
    }
    if (producerName !== undefined && cfg.producerWindowMs > 0) {
      const expiresAtMs = now + cfg.producerWindowMs
      const batch = { seq: cmd.producerSeq as number, runs: idRuns(ids) }
      const batches = [...kept, batch].slice(-PRODUCER_BATCHES_KEPT)
      const record = { batches, expiresAtMs }
      this.put(this.keys.producer(producerName), encodeProducer(record))
      this.producers.set(cmd.producerId as string, record)
      this.addExpiry(expiresAtMs, ExpiryKind.Producer, producerName)
    }
    if (turns !== undefined) this.writeTurns(turns)
    return { type: 'enqueue', ids, duplicate: false }
  }

  private async lease(cmd: LeaseCommand, now: number): Promise<CommandResult> {
    const { consumerId, max, visibilityMs, bytesMax, attempt } = cmd
    const cfg = this.configValue
    checkName('consumerId', consumerId)
    if (attempt !== undefined) checkName('lease attempt', attempt)
    checkInt('lease max', max, 1, Number.MAX_SAFE_INTEGER)
    if (max > cfg.leaseBatchMax) {
      throw new InvalidArgumentError(
        `lease of ${max} messages exceeds the limit of ${cfg.leaseBatchMax}; ask for fewer`,
      )
    }
    checkInt('lease visibilityMs', visibilityMs, 1, cfg.visibilityMsMax)
    if (bytesMax !== undefined) checkInt('lease bytesMax', bytesMax, 1, Number.MAX_SAFE_INTEGER)
    if (cmd.repeatOnly === true && attempt === undefined)
      throw new InvalidArgumentError('a repeat-only lease needs the attempt it repeats')
    const attemptName = attempt === undefined ? undefined : utf8(attempt)
    // A repeat-only lease is a repeat (the codec writes it as one).
    if (attemptName !== undefined && (cmd.repeat === true || cmd.repeatOnly === true)) {
      // A repeated attempt whose leases are still held gets them again, and nothing more;
      // counted: a give-back under the attempt no longer undoes any answer (NackCommand.attempt).
      const made = await this.attemptRecord(attemptName, now)
      const again = made === undefined ? [] : await this.attemptLeases(made, now)
      if (made !== undefined && again.length > 0) {
        const answers = made.answers + 1
        this.put(this.keys.attempt(attemptName), encodeAttempt({ ...made, answers }))
        return { type: 'lease', leases: again }
      }
    }
    if (cmd.repeatOnly === true) return { type: 'lease', leases: [] }

    // Decide first (in memory), then read each chosen weight's head run in one range. With a
    // byte budget the decisions can be taken back to where it cuts the lease short (whatever
    // the size limit now: messages stored before it was lowered may be larger).
    const mark = bytesMax === undefined ? undefined : this.scheduler.mark()
    const picks: number[] = []
    const perWeight = new Map<number, number>()
    for (let i = 0; i < max; i++) {
      const w = this.scheduler.next()
      if (w === undefined) break
      picks.push(w)
      perWeight.set(w, (perWeight.get(w) ?? 0) + 1)
      this.ready[w] = (this.ready[w] as number) - 1
      if (this.ready[w] === 0) this.scheduler.deactivate(w)
    }
    if (picks.length === 0) return { type: 'lease', leases: [] }
    const chosen = [...perWeight]
    const ahead = chosen.length <= READY_AHEAD_WEIGHTS_MAX
    const runs = await Promise.all(chosen.map(([w, n]) => this.readyRun(w, n, ahead)))
    const cursor = new Map<number, { entries: (typeof runs)[number]; next: number; base: number }>()
    const ids: number[] = []
    const metas: (MessageMeta | undefined)[] = []
    chosen.forEach(([w, n], j) => {
      const run = runs[j] as (typeof runs)[number]
      invariant(run.length === n, `weight ${w} has ${n} ready entries`)
      cursor.set(w, { entries: run, next: 0, base: ids.length })
      for (const [, v] of run) {
        const entry = decodeReadyValue(v)
        ids.push(entry.id)
        metas.push(entry.meta)
      }
    })
    const metaKeys = ids.map((id) => this.keys.message(id))
    await this.fillMetas(metaKeys, metas)
    // Each pick's place in ids and its ready key, in pick order.
    const at: number[] = []
    const readyKeys: Uint8Array[] = []
    for (const w of picks) {
      const c = cursor.get(w) as { entries: (typeof runs)[number]; next: number; base: number }
      at.push(c.base + c.next)
      readyKeys.push((c.entries[c.next++] as (typeof runs)[number][number])[0])
    }
    // Every body at once without a budget; else in pick order, LEASE_READ_BYTES_MAX worth at
    // the queue's largest message at a time (what is read past the cut is dropped).
    const bodies: (MessageBody | undefined)[] =
      mark === undefined ? await this.bodies(ids, metas as MessageMeta[]) : new Array(ids.length)
    const chunk = Math.max(1, Math.floor(LEASE_READ_BYTES_MAX / cfg.messageBytesMax))
    let read = 0
    let bytes = 0
    const deadlineMs = now + visibilityMs
    const groupSeq = this.st.leaseGroupSeq
    const leases: Lease[] = []
    const group: number[] = []
    /** Per weight, the last ready key taken (delivered or deleted): its new floor. */
    const taken = new Map<number, Uint8Array>()
    let p = 0
    for (; p < picks.length; p++) {
      const w = picks[p] as number
      const i = at[p] as number
      const readyKey = readyKeys[p] as Uint8Array
      const id = ids[i] as number
      const meta = metas[i] as MessageMeta
      invariant(
        meta.state === MessageState.Ready && meta.weight === w,
        `message ${id} is ready in weight ${w}`,
      )
      if (this.outlived(meta, now)) {
        // Older than the message TTL: deleted, not delivered (ready[w] counts it out already).
        // The pick is charged in the passes; the share window (replicated state) leaves it out.
        this.deleteMessage(readyKey, id, meta)
        this.depart(id, meta)
        this.st.discarded++
        taken.set(w, readyKey)
        continue
      }
      if (mark !== undefined) {
        if (p >= read) {
          const next = at.slice(p, p + chunk)
          const got = await this.bodies(
            next.map((k) => ids[k] as number),
            next.map((k) => metas[k] as MessageMeta),
          )
          next.forEach((k, j) => {
            bodies[k] = got[j]
          })
          read = p + next.length
        }
        const size = messageBytes(bodies[i] as MessageBody)
        // Past the budget: this one and the picks after it stay ready where they are.
        if (leases.length > 0 && bytes + size > (bytesMax as number)) break
        bytes += size
      }
      const body = bodies[i] as MessageBody
      this.takeReady(w, readyKey)
      taken.set(w, readyKey)
      meta.deliveries++
      meta.attempts++
      this.st.delivered++
      meta.state = MessageState.Leased
      meta.slot = deadlineMs
      meta.band = 0
      meta.group = groupSeq
      this.putMeta(id, meta, metaKeys[i] as Uint8Array)
      group.push(id, meta.deliveries)
      this.leased[w] = (this.leased[w] as number) + 1
      this.dirtyWeights.add(w)
      this.recordDecision(w)
      leases.push(leaseOf(id, meta, body))
    }
    if (p < picks.length) {
      // Cut at the budget: the decisions go back to the mark and the first p are made again
      // (the same ones), so the picks not taken are charged nothing and stay ready in place.
      for (const w of picks) this.ready[w] = (this.ready[w] as number) + 1
      this.scheduler.rewind(mark as SchedulerMark)
      for (let q = 0; q < p; q++) {
        const w = this.scheduler.next() as number
        invariant(w === picks[q], `the decisions made again are the same (${w} vs ${picks[q]})`)
        this.ready[w] = (this.ready[w] as number) - 1
        if (this.ready[w] === 0) this.scheduler.deactivate(w)
      }
    }
    for (const [w, key] of taken) this.raiseReadyFloor(w, key)
    this.addLeaseGroup(deadlineMs, group)
    if (attemptName !== undefined && group.length > 0) {
      this.put(this.keys.attempt(attemptName), encodeAttempt({ deadlineMs, group: groupSeq, answers: 0 }))
      this.addExpiry(deadlineMs, ExpiryKind.Attempt, attemptName)
    }
    return { type: 'lease', leases }
  }

  /** Attempt `name`'s record while its leases' deadline is ahead. */
  private async attemptRecord(name: Uint8Array, now: number): Promise<AttemptRecord | undefined> {
    const bytes = await this.overlay.get(this.keys.attempt(name))
    if (bytes === undefined) return undefined
    const record = decodeAttempt(bytes)
    return record.deadlineMs > now ? record : undefined
  }

  /**
   * The leases of an attempt's lease group that are still held (not settled, extended, expired
   * or delivered again), as its lease answered them; none once the group is gone.
   */
  private async attemptLeases({ deadlineMs, group }: AttemptRecord, now: number): Promise<Lease[]> {
    const list = await this.overlay.get(this.keys.leaseGroup(deadlineMs, group))
    if (list === undefined) return []
    const members = decodeIdList(list)
    const ids: number[] = []
    const deliveries: number[] = []
    for (let j = 0; j < members.length; j += 2) {
      ids.push(members[j] as number)
      deliveries.push(members[j + 1] as number)
    }
    const metas = new Array<MessageMeta | undefined>(ids.length)
    const got = await this.overlay.getMany(ids.map((id) => this.keys.message(id)))
    const held: number[] = []
    got.forEach((b, i) => {
      const meta = b === undefined ? undefined : decodeMeta(b)
      metas[i] = meta
      if (
        meta !== undefined &&
        meta.state === MessageState.Leased &&
        meta.deliveries === deliveries[i] &&
        meta.group === group &&
        meta.slot > now
      )
        held.push(i)
    })
    const bodies = await this.bodies(
      held.map((i) => ids[i] as number),
      held.map((i) => metas[i] as MessageMeta),
    )
    return held.map((i, k) => leaseOf(ids[i] as number, metas[i] as MessageMeta, bodies[k] as MessageBody))
  }

  /** Ack, nack or extend each lease id; per-id status, no change for a non-ok one. */
  private async settle(
    leaseIds: readonly string[],
    now: number,
    action: 'ack' | 'nack' | 'extend',
    ms: number,
    release = false,
    superseded = false,
  ): Promise<LeaseStatus[]> {
    if (!Array.isArray(leaseIds)) throw new InvalidArgumentError(`${action} needs an array of lease ids`)
    if (leaseIds.length > this.configValue.leaseBatchMax) {
      throw new InvalidArgumentError(
        `${action} of ${leaseIds.length} lease ids exceeds the limit of ${this.configValue.leaseBatchMax}; split it`,
      )
    }
    // Leases that are not the settlement's to settle (NackCommand.attempt).
    if (superseded) return leaseIds.map(() => Status.Expired)
    const parsed = leaseIds.map(parseLeaseId)
    const uniqueIds: number[] = []
    const metaKeys: Uint8Array[] = []
    const keyOf = new Map<number, Uint8Array>()
    for (const p of parsed) {
      if (p === undefined || keyOf.has(p[0])) continue
      const key = this.keys.message(p[0])
      uniqueIds.push(p[0])
      metaKeys.push(key)
      keyOf.set(p[0], key)
    }
    const got = await this.metaRecords(uniqueIds, metaKeys)
    const metas = new Map<number, MessageMeta | undefined>()
    for (let i = 0; i < uniqueIds.length; i++) {
      const b = got[i]
      metas.set(uniqueIds[i] as number, b ? decodeMeta(b) : undefined)
    }
    const groups = await this.readLeaseGroups(parsed, metas, now)
    const statuses: LeaseStatus[] = []
    const extended: number[] = []
    const extendedGroup = this.st.leaseGroupSeq
    /** Lease groups that lose members here: group → [deadlineMs, members leaving]. */
    const leaving = new Map<number, [number, number]>()
    for (const p of parsed) {
      if (p === undefined) {
        statuses.push(Status.Unknown)
        continue
      }
      const [id, delivery] = p
      const meta = metas.get(id)
      if (meta === undefined || delivery < 1 || delivery > meta.deliveries) {
        statuses.push(Status.Unknown)
        continue
      }
      if (delivery < meta.deliveries || meta.state !== MessageState.Leased || meta.slot <= now) {
        statuses.push(Status.Expired)
        continue
      }
      statuses.push(Status.Ok)
      const w = meta.weight
      if (action === 'extend' && meta.slot === now + ms) continue
      // The lease leaves its group: the group's live count drops (below); its entry in the
      // member list stays, and expiry skips entries that no longer hold their lease.
      const out = leaving.get(meta.group)
      if (out === undefined) leaving.set(meta.group, [meta.slot, 1])
      else out[1]++
      if (action === 'extend') {
        meta.slot = now + ms
        meta.group = extendedGroup
        this.putMeta(id, meta, keyOf.get(id) as Uint8Array)
        extended.push(id, delivery)
        continue
      }
      this.leased[w] = (this.leased[w] as number) - 1
      this.dirtyWeights.add(w)
      if (action === 'ack') {
        this.st.acked++
        this.delMeta(id, keyOf.get(id) as Uint8Array)
        if (meta.inlineBody === undefined) this.del(this.keys.body(id))
        this.st.messages--
        this.depart(id, meta)
        metas.set(id, undefined)
        continue
      }
      this.st.nacked++
      if (release) {
        // A give-back: this delivery does not count (nor dead-letters), and takes no backoff.
        meta.attempts--
        if (ms > 0) this.toDelayed(id, meta, now + ms)
        else this.toReady(id, meta, ReadyBand.Returned)
      } else if (ms > 0 && meta.attempts < this.configValue.maxDeliveries) this.toDelayed(id, meta, now + ms)
      else this.retry(id, meta, now)
    }
    this.leaveLeaseGroups(leaving, groups)
    if (extended.length > 0) this.addLeaseGroup(now + ms, extended)
    return statuses
  }

  /**
   * The live counts of the lease groups of every lease in `parsed` that is held now (all
   * that `settle` may take leases out of), by group. Read before the command writes
   * anything, so the overlay has none of this command's writes to index.
   */
  private async readLeaseGroups(
    parsed: readonly (readonly [number, number] | undefined)[],
    metas: ReadonlyMap<number, MessageMeta | undefined>,
    now: number,
  ): Promise<Map<number, number>> {
    const groups: number[] = []
    const seen = new Set<number>()
    for (const p of parsed) {
      if (p === undefined) continue
      const meta = metas.get(p[0])
      if (
        meta === undefined ||
        meta.state !== MessageState.Leased ||
        meta.deliveries !== p[1] ||
        meta.slot <= now ||
        seen.has(meta.group)
      ) {
        continue
      }
      seen.add(meta.group)
      groups.push(meta.group)
    }
    const live = new Map<number, number>()
    const missing: number[] = []
    for (const g of groups) {
      const cached = this.liveCounts.get(g)
      if (cached === undefined) missing.push(g)
      else live.set(g, cached)
    }
    if (missing.length === 0) return live
    const got = await this.overlay.getMany(missing.map((g) => this.keys.leaseLive(g)))
    missing.forEach((g, i) => {
      const b = got[i]
      invariant(b, `lease group ${g} of a held lease has a live count`)
      live.set(g, decodeCount(b))
    })
    return live
  }

  /**
   * Takes leases out of their groups: `leaving` maps group → [deadlineMs, count], `live`
   * the groups' live counts. A group whose count reaches 0 is deleted, member list and
   * count (so expiry never reads the messages of a fully settled group); else only its
   * count is rewritten, a few bytes whatever the group's size.
   */
  private leaveLeaseGroups(
    leaving: ReadonlyMap<number, readonly [number, number]>,
    live: ReadonlyMap<number, number>,
  ): void {
    for (const [group, [deadlineMs, count]] of leaving) {
      const left = (live.get(group) as number) - count
      invariant(left >= 0, `lease group ${group} has the leases leaving it`)
      if (left > 0) this.setLiveCount(group, left)
      else {
        this.liveCounts.delete(group)
        this.del(this.keys.leaseLive(group))
        this.del(this.keys.leaseGroup(deadlineMs, group))
      }
    }
  }

  /**
   * Redrives up to `max` dead letters, oldest first (with `through`, only those at most that
   * place in the list; 0: none); with `restartTtl` their message TTL counts from `now`.
   */
  private async redrive(max: number, restartTtl: boolean, now: number, through?: number): Promise<number[]> {
    // 0 moves nothing: the entry only reports the list's end (deadEnd) as of the log.
    checkInt('redrive max', max, 0, this.configValue.leaseBatchMax)
    const span = this.deadSpan('redrive', through)
    if (max === 0) return []
    const entries = await this.overlay.range(span, max)
    const ids = entries.map(([, v]) => idOf(v))
    const got = await this.overlay.getMany(ids.map((id) => this.keys.message(id)))
    const metas = got.map((b) => decodeMeta(b as Uint8Array))
    // A redriven message of an ordered key arrives again: behind the key's messages, if any.
    const turns = this.ordered()
      ? await this.readTurns(metas.flatMap((m) => (m.orderKey === undefined ? [] : [m.orderKey])))
      : undefined
    entries.forEach(([k], i) => {
      const id = ids[i] as number
      const meta = metas[i] as MessageMeta
      invariant(meta.state === MessageState.Dead, `message ${id} is dead`)
      this.del(k)
      this.dead[meta.weight] = (this.dead[meta.weight] as number) - 1
      this.deadTotal--
      // Its weight's record is written also when it waits behind its key (not ready anywhere).
      this.dirtyWeights.add(meta.weight)
      meta.attempts = 0
      if (restartTtl) meta.ttlFromMs = now
      if (!this.takeTurn(id, meta, 0, turns)) this.toReady(id, meta, ReadyBand.Fresh)
    })
    if (turns !== undefined) this.writeTurns(turns)
    return ids
  }

  /**
   * The keys of places (after, through] of the dead-letter list, each bound checked (named by
   * `command` when out of range); the whole list without them (MAX_SAFE_INTEGER: through its
   * end; 2^53 is still an exact u64 key, above every order).
   */
  private deadSpan(command: string, through?: number, after?: number): KeySpan {
    const span = this.keys.tagSpan(KeyTag.Dead)
    if (through !== undefined) checkInt(`${command} through`, through, 0, Number.MAX_SAFE_INTEGER)
    if (after !== undefined) checkInt(`${command} after`, after, 0, Number.MAX_SAFE_INTEGER - 1)
    return {
      gte: after === undefined ? span.gte : this.keys.dead(after + 1),
      lt: through === undefined ? span.lt : this.keys.dead(through + 1),
    }
  }

  private async purge(max: number, through?: number, after?: number): Promise<number[]> {
    checkInt('purge max', max, 1, this.configValue.leaseBatchMax)
    const entries = await this.overlay.range(this.deadSpan('purge', through, after), max)
    const ids = entries.map(([, v]) => idOf(v))
    const got = await this.overlay.getMany(ids.map((id) => this.keys.message(id)))
    entries.forEach(([k], i) => {
      const id = ids[i] as number
      const meta = decodeMeta(got[i] as Uint8Array)
      invariant(meta.state === MessageState.Dead, `message ${id} is dead`)
      this.dead[meta.weight] = (this.dead[meta.weight] as number) - 1
      this.deadTotal--
      this.deleteMessage(k, id, meta)
    })
    return ids
  }

  /**
   * Deletes a message for good: the index entry that held it (`indexKey`), its record and its
   * body. The caller has taken it off its state's counter.
   */
  private deleteMessage(indexKey: Uint8Array, id: number, meta: MessageMeta): void {
    this.del(indexKey)
    this.delMeta(id)
    if (meta.inlineBody === undefined) this.del(this.keys.body(id))
    this.dirtyWeights.add(meta.weight)
    this.st.messages--
  }

  /**
   * Deletes up to `max` ready messages: first those waiting for their ordered key's turn (by
   * key), then the ready ones, lowest weight first, each weight's head first.
   */
  private async purgeReady(max: number): Promise<number[]> {
    checkInt('purge max', max, 1, this.configValue.leaseBatchMax)
    const ids: number[] = []
    if (this.st.waiting > 0) {
      // The turn of each of their keys stays with its holder (ready, delayed or leased).
      const entries = await this.overlay.range(this.keys.tagSpan(KeyTag.KeyWaiting), max)
      const names = entries.map(([k]) => this.keys.keyWaitingNameOf(k))
      const turns = await this.readTurns(names)
      const { ids: waitingIds, metas } = await this.messagesIn(entries.map(([, v]) => v))
      entries.forEach(([k], i) => {
        const id = waitingIds[i] as number
        const meta = metas[i] as MessageMeta
        invariant(meta.state === MessageState.Waiting, `message ${id} waits for its key's turn`)
        const turn = turns.get(TEXT.decode(names[i] as Uint8Array))
        // Taken from the head of its line (the span is read in key and line order).
        invariant(
          turn !== undefined && turn.head === this.keys.keyWaitingSeqOf(k),
          `waiting message ${id} is at the head of its key's line`,
        )
        turn.head++
        turn.dirty = true
        this.deleteMessage(k, id, meta)
        this.st.waiting--
        ids.push(id)
      })
      this.writeTurns(turns)
    }
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX && ids.length < max; w++) {
      const n = Math.min(this.ready[w] as number, max - ids.length)
      if (n === 0) continue
      const run = await this.readyHead(w, n)
      this.raiseReadyFloor(w, (run.entries[n - 1] as KeyValue)[0])
      run.entries.forEach(([readyKey], i) => {
        const id = run.ids[i] as number
        const meta = run.metas[i] as MessageMeta
        invariant(
          meta.state === MessageState.Ready && meta.weight === w,
          `message ${id} is ready in weight ${w}`,
        )
        this.deleteMessage(readyKey, id, meta)
        this.depart(id, meta)
        ids.push(id)
      })
      this.ready[w] = (this.ready[w] as number) - n
      if (this.ready[w] === 0) this.scheduler.deactivate(w)
    }
    return ids
  }

  private configure(patch: Partial<QueueConfig>): void {
    if (typeof patch !== 'object' || patch === null)
      throw new InvalidArgumentError('configure needs a config object')
    const next = resolveConfig(this.configValue, patch)
    if (next.configVersion < this.configValue.configVersion) return // an older copy of the settings
    if (next.orderedKeys !== this.configValue.orderedKeys) {
      throw new InvalidArgumentError(
        `orderedKeys is set when the partition is created (it is ${this.configValue.orderedKeys}); a configure cannot change it`,
      )
    }
    if (next.scheduling !== this.configValue.scheduling) this.scheduler.setMode(next.scheduling)
    if (next.shareWindowLeases !== this.configValue.shareWindowLeases) {
      for (let c = 0; c < windowChunks(this.window.size); c++) this.del(this.keys.windowChunk(c))
      this.window = newWindow(next.shareWindowLeases)
      this.windowDirty = true
    }
    this.configValue = next
    this.configDirty = true
  }

  // ---- time-driven work -----------------------------------------------------------------

  /** Expires due leases, releases due delayed messages, drops expired dedup/producer entries. */
  private async expireDue(now: number): Promise<void> {
    if (this.nextDeadlineMs <= now) await this.expireLeases(now)
    if (this.nextDueMs <= now) {
      const due = await this.takeDue(KeyTag.Delayed, now)
      this.nextDueMs = due.nextMs
      const metas = due.values.map((v) => (v.length > 0 ? decodeMeta(v) : undefined))
      await this.fillMetas(
        due.ids.map((id) => this.keys.message(id)),
        metas,
      )
      due.ids.forEach((id, i) => {
        const meta = metas[i] as MessageMeta
        invariant(meta.state === MessageState.Delayed, `message ${id} under a due time is delayed`)
        this.del(due.keys[i] as Uint8Array)
        this.delayed[meta.weight] = (this.delayed[meta.weight] as number) - 1
        this.toReady(id, meta, ReadyBand.Fresh)
      })
    }
    if (this.nextExpiryMs <= now) {
      const due = await this.takeDue(KeyTag.Expiry, now)
      this.nextExpiryMs = due.nextMs
      const recordKeys = due.keys.map((k) => {
        const name = this.keys.expiryNameOf(k)
        const kind = this.keys.expiryKindOf(k)
        if (kind === ExpiryKind.Dedup) return this.keys.dedup(name)
        return kind === ExpiryKind.Producer ? this.keys.producer(name) : this.keys.attempt(name)
      })
      const got = await this.overlay.getMany(recordKeys)
      due.keys.forEach((k, i) => {
        this.del(k)
        const bytes = got[i]
        if (!bytes) return
        const kind = this.keys.expiryKindOf(k)
        const expiresAtMs =
          kind === ExpiryKind.Dedup
            ? decodeDedup(bytes).expiresAtMs
            : kind === ExpiryKind.Producer
              ? decodeProducer(bytes).expiresAtMs
              : decodeAttempt(bytes).deadlineMs
        // A record renewed later has a later expiry entry of its own.
        if (expiresAtMs === this.keys.timeOf(k)) {
          this.del(recordKeys[i] as Uint8Array)
          if (this.keys.expiryKindOf(k) === ExpiryKind.Producer) {
            this.producers.set(TEXT.decode(this.keys.expiryNameOf(k)), null)
          }
        }
      })
    }
  }

  /**
   * Whether a message has outlived the message TTL at `now` (never with no TTL): counted from
   * its enqueue, or from the redrive that restarted it.
   */
  private outlived(meta: MessageMeta, now: number): boolean {
    const ttl = this.configValue.messageTtlMs
    return ttl > 0 && (meta.ttlFromMs ?? meta.enqueuedAtMs) + ttl <= now
  }

  /**
   * Deletes the ready messages that outlived the message TTL from the head of each weight (a
   * `tick`'s work): each weight's run of them up to its first younger message, at most
   * `expiryBatchMax` in all (the apply's ttlBudget). One that a younger message precedes (back
   * from a lease, or delayed) goes when it reaches the head, or at the lease that reaches it.
   */
  private async expireTtl(now: number): Promise<void> {
    if (this.configValue.messageTtlMs === 0) return
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX && this.ttlBudget > 0; w++) {
      const ready = this.ready[w] as number
      if (ready === 0) continue
      const head = await this.readyHead(w, 1)
      if (!this.outlived(head.metas[0] as MessageMeta, now)) continue
      const run = await this.readyHead(w, Math.min(ready, this.ttlBudget))
      let n = 0
      while (n < run.entries.length && this.outlived(run.metas[n] as MessageMeta, now)) n++
      this.raiseReadyFloor(w, (run.entries[n - 1] as KeyValue)[0])
      for (let i = 0; i < n; i++) {
        const meta = run.metas[i] as MessageMeta
        invariant(
          meta.state === MessageState.Ready && meta.weight === w,
          `message ${run.ids[i]} is ready in weight ${w}`,
        )
        this.deleteMessage((run.entries[i] as KeyValue)[0], run.ids[i] as number, meta)
        this.depart(run.ids[i] as number, meta)
      }
      this.st.discarded += n
      this.ready[w] = ready - n
      if (this.ready[w] === 0) this.scheduler.deactivate(w)
      this.ttlBudget -= n
    }
  }

  /** The first `n` (≤ ready) entries of weight `w`'s ready sub-queue, with their ids and records. */
  private async readyHead(
    w: number,
    n: number,
  ): Promise<{ entries: KeyValue[]; ids: number[]; metas: MessageMeta[] }> {
    const entries = await this.overlay.range(this.readyFrom(w), n)
    invariant(entries.length === n, `weight ${w} has ${n} ready entries`)
    return { entries, ...(await this.messagesIn(entries.map(([, v]) => v))) }
  }

  /**
   * The ids and records of the messages in index entries that hold them as a ready entry does
   * (ready, waiting): records held in the entry decoded, the others read in one call.
   */
  private async messagesIn(values: readonly Uint8Array[]): Promise<{ ids: number[]; metas: MessageMeta[] }> {
    const ids: number[] = []
    const metas: (MessageMeta | undefined)[] = []
    for (const v of values) {
      const entry = decodeReadyValue(v)
      ids.push(entry.id)
      metas.push(entry.meta)
    }
    await this.fillMetas(
      ids.map((id) => this.keys.message(id)),
      metas,
    )
    return { ids, metas: metas as MessageMeta[] }
  }

  /**
   * Whether a `tick` at `nowMs` would delete messages that outlived the message TTL (a ready
   * head is older): the leader proposes one then. A read between applies, as `stats`.
   */
  async ttlDue(nowMs: number): Promise<boolean> {
    if (this.configValue.messageTtlMs === 0) return false
    for (let w = WEIGHT_MIN; w <= WEIGHT_MAX; w++) {
      if ((this.ready[w] as number) === 0) continue
      const head = await this.readyHead(w, 1)
      if (this.outlived(head.metas[0] as MessageMeta, Math.max(nowMs, this.st.lastNowMs))) return true
    }
    return false
  }

  /**
   * Expires the leases of due lease groups, oldest first: whole groups, until at least
   * expiryBatchMax entries are examined. An entry counts only if the message still holds
   * that very lease (same delivery, same deadline); acked, nacked, extended or re-leased
   * messages left stale entries behind, which are dropped here. Reads the due groups a few at
   * a time (EXPIRY_GROUPS_READ_FIRST), so what it reads is about what it expires; which groups
   * it takes does not depend on how they were read.
   */
  private async expireLeases(now: number): Promise<void> {
    const limit = this.configValue.expiryBatchMax
    const due = this.dueSpan(KeyTag.LeaseDeadline, now)
    const entries: {
      readonly deadlineMs: number
      readonly group: number
      readonly id: number
      readonly delivery: number
    }[] = []
    const groupSeqs: number[] = []
    /** The groups not read yet start here. */
    let from = due.gte
    /** The first group not taken, once read. */
    let left: Uint8Array | undefined
    for (let want = EXPIRY_GROUPS_READ_FIRST; entries.length < limit; want *= 2) {
      const n = Math.min(want, limit - entries.length)
      const groups = await this.overlay.range({ gte: from, lt: due.lt }, n)
      let i = 0
      for (; i < groups.length && entries.length < limit; i++) {
        const [key, value] = groups[i] as (typeof groups)[number]
        const deadlineMs = this.keys.timeOf(key)
        this.del(key)
        const group = this.keys.timedIdOf(key)
        groupSeqs.push(group)
        const members = decodeIdList(value)
        for (let j = 0; j < members.length; j += 2) {
          entries.push({ deadlineMs, group, id: members[j] as number, delivery: members[j + 1] as number })
        }
      }
      if (i < groups.length) left = (groups[i] as (typeof groups)[number])[0]
      if (groups.length > 0) from = successor((groups[groups.length - 1] as (typeof groups)[number])[0])
      if (left !== undefined || groups.length < n) break // the due groups are taken or done
    }
    if (left === undefined) {
      const [first] = await this.overlay.range(
        { gte: from, lt: this.keys.tagSpan(KeyTag.LeaseDeadline).lt },
        1,
      )
      left = first?.[0]
    }
    this.nextDeadlineMs = left === undefined ? Number.POSITIVE_INFINITY : this.keys.timeOf(left)
    if (entries.length === 0) return
    // Expire in (deadline, id) order, whatever the groups' layout.
    entries.sort((a, b) => a.deadlineMs - b.deadlineMs || a.id - b.id)
    const unique = [...new Set(entries.map((e) => e.id))]
    const liveKeys = groupSeqs.map((g) => this.keys.leaseLive(g))
    const got = await this.overlay.getMany([...unique.map((id) => this.keys.message(id)), ...liveKeys])
    const metas = new Map<number, MessageMeta | undefined>()
    unique.forEach((id, j) => {
      const b = got[j]
      metas.set(id, b ? decodeMeta(b) : undefined)
    })
    /** Live leases per group, counted down as they expire: 0 for every group at the end. */
    const live = new Map<number, number>()
    groupSeqs.forEach((g, j) => {
      const b = got[unique.length + j]
      invariant(b, `lease group ${g} has a live count`)
      live.set(g, decodeCount(b))
      this.liveCounts.delete(g)
      this.del(liveKeys[j] as Uint8Array)
    })
    for (const e of entries) {
      const meta = metas.get(e.id)
      if (
        !meta ||
        meta.state !== MessageState.Leased ||
        meta.deliveries !== e.delivery ||
        meta.slot !== e.deadlineMs ||
        meta.group !== e.group
      ) {
        continue
      }
      live.set(e.group, (live.get(e.group) as number) - 1)
      this.leased[meta.weight] = (this.leased[meta.weight] as number) - 1
      this.st.expired++
      // Backed off from the deadline, not from this apply (expiry waits for an entry to run).
      this.retry(e.id, meta, e.deadlineMs)
    }
    for (const [group, n] of live) invariant(n === 0, `lease group ${group} counted its live members`)
  }

  /**
   * A delivery that failed at `failedAtMs` (its lease's deadline, or a nack without a delay):
   * dead-lettered after maxDeliveries attempts, else delayed by the retry backoff from then (a
   * due time already past is released later in the same apply, to the tail of its weight), or
   * ready again at once at the head of its weight when there is none.
   */
  private retry(id: number, meta: MessageMeta, failedAtMs: number): void {
    const cfg = this.configValue
    const backoffMs = retryBackoffMs(cfg, meta.attempts)
    if (meta.attempts >= cfg.maxDeliveries) this.toDead(id, meta)
    else if (backoffMs > 0) this.toDelayed(id, meta, failedAtMs + backoffMs)
    else this.toReady(id, meta, ReadyBand.Returned)
  }

  /** Records one lease group: the (id, delivery) pairs in `members` are due at `deadlineMs`. */
  private addLeaseGroup(deadlineMs: number, members: readonly number[]): void {
    if (members.length === 0) return
    const group = this.st.leaseGroupSeq++
    this.put(this.keys.leaseGroup(deadlineMs, group), encodeIdList(members))
    this.setLiveCount(group, members.length / 2)
    if (deadlineMs < this.nextDeadlineMs) this.nextDeadlineMs = deadlineMs
  }

  private setLiveCount(group: number, live: number): void {
    this.put(this.keys.leaseLive(group), encodeCount(live))
    this.liveCounts.set(group, live)
  }

  /** Up to expiryBatchMax entries of a time index with time ≤ now, and the next entry's time. */
  private async takeDue(
    tag: KeyTag,
    now: number,
  ): Promise<{ keys: Uint8Array[]; values: Uint8Array[]; ids: number[]; nextMs: number }> {
    const limit = this.configValue.expiryBatchMax
    const entries = await this.overlay.range(this.dueSpan(tag, now), limit)
    const keys: Uint8Array[] = []
    const values: Uint8Array[] = []
    const ids: number[] = []
    for (const [k, v] of entries) {
      keys.push(k)
      values.push(v)
      if (tag !== KeyTag.Expiry) ids.push(this.keys.timedIdOf(k))
    }
    // Deleting these is still pending, so the next entry is the (limit+1)-th from the start.
    const [after] =
      entries.length < limit
        ? await this.overlay.range({ gte: this.dueSpan(tag, now).lt, lt: this.keys.tagSpan(tag).lt }, 1)
        : await this.overlay.range(
            { gte: successor(keys[keys.length - 1] as Uint8Array), lt: this.keys.tagSpan(tag).lt },
            1,
          )
    return { keys, values, ids, nextMs: after ? this.keys.timeOf(after[0]) : Number.POSITIVE_INFINITY }
  }

  /** The entries of a time index due at `now`: [tag, tag ‖ u64(now + 1)). */
  private dueSpan(tag: KeyTag, now: number): KeySpan {
    return { gte: this.keys.tagSpan(tag).gte, lt: this.keys.timeBound(tag, now + 1) }
  }

  private async firstTime(tag: KeyTag): Promise<number> {
    const [first] = await this.overlay.range(this.keys.tagSpan(tag), 1)
    return first ? this.keys.timeOf(first[0]) : Number.POSITIVE_INFINITY
  }

  // ---- transitions ----------------------------------------------------------------------

  /**
   * The first `n` entries of weight `w`'s ready span from its floor (n are there): from its
   * read-ahead when that holds n, else read, with more kept ahead when `ahead` (up to 4n, as
   * many as READY_AHEAD_BYTES_MAX holds at the size of the entries read last).
   */
  private async readyRun(w: number, n: number, ahead: boolean): Promise<KeyValue[]> {
    const held = this.readyAhead.get(w)
    if (held !== undefined && held.entries.length - held.next >= n)
      return held.entries.slice(held.next, held.next + n)
    if (this.readyAhead.delete(w)) this.aheadChanged()
    // No more than are ready (this.ready[w] counts the picks out already): a read past the
    // span's last entry would walk whatever tombstones follow it.
    const fits = Math.floor(READY_AHEAD_BYTES_MAX / this.readyEntryBytes)
    const limit = ahead
      ? Math.max(n, Math.min(READY_AHEAD_ENTRIES_MAX, 4 * n, fits, n + (this.ready[w] as number)))
      : n
    const entries = await this.overlay.range(this.readyFrom(w), limit)
    if (!ahead || entries.length === 0) return entries
    // What the entries keep alive: a value may be a view into a larger buffer (a slab).
    let bytes = 0
    let keep = 0
    let kept = 0
    for (const [k, v] of entries) {
      bytes += k.length + v.buffer.byteLength
      if (bytes <= READY_AHEAD_BYTES_MAX) {
        keep++
        kept = bytes
      }
    }
    this.readyEntryBytes = Math.max(1, Math.ceil(bytes / entries.length))
    if (entries.length <= n) return entries
    if (keep > n) {
      if (this.readyAhead.size >= READY_AHEAD_WEIGHTS_MAX) {
        const oldest = this.readyAhead.keys().next()
        if (!oldest.done) this.readyAhead.delete(oldest.value)
      }
      this.readyAhead.set(w, {
        entries: keep < entries.length ? entries.slice(0, keep) : entries,
        next: 0,
        bytes: kept,
      })
      this.aheadChanged()
    }
    return entries.slice(0, n)
  }

  /** Deletes weight `w`'s ready head `key`, taken by a lease (its read-ahead moves past it). */
  private takeReady(w: number, key: Uint8Array): void {
    this.ops.push({ type: 'del', key })
    const held = this.readyAhead.get(w)
    if (held === undefined) return
    const head = held.entries[held.next]
    if (head !== undefined && compareKeys(head[0], key) === 0) {
      held.next++
      if (held.next < held.entries.length) return
    }
    this.readyAhead.delete(w)
    this.aheadChanged()
  }

  /** A write of `key` other than a lease's take: the read-ahead of its weight, if it is a ready key at or below it, goes. */
  private readyWritten(key: Uint8Array, put: boolean): void {
    if (key[this.keys.prefix.length] !== KeyTag.Ready) return
    const w = this.keys.weightOf(key)
    const held = this.readyAhead.get(w)
    if (held === undefined) return
    const last = held.entries[held.entries.length - 1] as KeyValue
    if (!put || compareKeys(key, last[0]) <= 0) {
      this.readyAhead.delete(w)
      this.aheadChanged()
    }
  }

  /** Tells the process's read-ahead budget what this partition keeps now. */
  private aheadChanged(): void {
    let bytes = 0
    for (const held of this.readyAhead.values()) bytes += held.bytes
    this.aheadBudget.hold(this, bytes, this.dropAhead)
  }

  /** Weight `w`'s ready span from its floor (see readyFloor). */
  private readyFrom(w: number): KeySpan {
    const span = this.keys.readySpan(w)
    const floor = this.readyFloor[w]
    return floor === undefined ? span : { gte: floor, lt: span.lt }
  }

  /** A run of weight `w`'s head up to `lastKey` was taken: nothing ready lies at or below it. */
  private raiseReadyFloor(w: number, lastKey: Uint8Array): void {
    const floor = new Uint8Array(lastKey.length + 1) // the least key above lastKey
    floor.set(lastKey)
    this.readyFloor[w] = floor
  }

  /** Puts the message at the tail of `band` in its weight's ready sub-queue. */
  private toReady(id: number, meta: MessageMeta, band: ReadyBand): void {
    const w = meta.weight
    const order = this.st.readyOrder++
    meta.state = MessageState.Ready
    meta.slot = order
    meta.band = band
    meta.group = 0
    const key = this.keys.ready(w, band, order)
    const floor = this.readyFloor[w]
    if (floor !== undefined && compareKeys(key, floor) < 0) this.readyFloor[w] = key
    if (meta.deliveries === 0) {
      // Never delivered: the message lives in its ready entry alone (one write on enqueue).
      this.put(key, encodeReadyValue(id, meta))
    } else {
      this.put(key, encodeReadyValue(id, undefined))
      this.putMeta(id, meta)
    }
    const before = this.ready[w] as number
    this.ready[w] = before + 1
    this.dirtyWeights.add(w)
    if (before === 0) this.scheduler.activate(w)
  }

  private toDelayed(id: number, meta: MessageMeta, dueMs: number): void {
    meta.state = MessageState.Delayed
    meta.slot = dueMs
    meta.band = 0
    meta.group = 0
    if (meta.deliveries === 0) {
      this.put(this.keys.timed(KeyTag.Delayed, dueMs, id), encodeMeta(meta))
    } else {
      this.put(this.keys.timed(KeyTag.Delayed, dueMs, id), EMPTY_VALUE)
      this.putMeta(id, meta)
    }
    this.delayed[meta.weight] = (this.delayed[meta.weight] as number) + 1
    this.dirtyWeights.add(meta.weight)
    if (dueMs < this.nextDueMs) this.nextDueMs = dueMs
  }

  private toDead(id: number, meta: MessageMeta): void {
    const order = this.st.deadOrder++
    this.st.deadLettered++
    meta.state = MessageState.Dead
    meta.slot = order
    meta.band = 0
    meta.group = 0
    this.put(this.keys.dead(order), idValue(id))
    this.putMeta(id, meta)
    this.dead[meta.weight] = (this.dead[meta.weight] as number) + 1
    this.deadTotal++
    this.dirtyWeights.add(meta.weight)
    this.depart(id, meta)
  }

  /**
   * Waits behind the earlier messages of its ordered key, at `seq` in the key's line; `dueMs`
   * (0: none) is kept for its turn.
   */
  private toWaiting(id: number, meta: MessageMeta, dueMs: number, seq: number): void {
    meta.state = MessageState.Waiting
    meta.slot = dueMs
    meta.band = 0
    meta.group = 0
    const key = this.keys.keyWaiting(meta.orderKey as Uint8Array, seq)
    if (meta.deliveries === 0) this.put(key, encodeReadyValue(id, meta))
    else {
      this.put(key, encodeReadyValue(id, undefined))
      this.putMeta(id, meta)
    }
    this.st.waiting++
  }

  // ---- ordered keys ---------------------------------------------------------------------

  private ordered(): boolean {
    return this.configValue.orderedKeys === 1
  }

  /** A message that holds its ordered key's turn left for good: the turn goes on (passTurns). */
  private depart(id: number, meta: MessageMeta): void {
    if (meta.orderKey !== undefined) this.departed.push([id, meta.orderKey])
  }

  /**
   * An arriving message (enqueued, redriven) of an ordered key: with its key's turn free it
   * takes it and goes on as any message (false); else it waits behind the key's messages
   * (true). `turns` holds the turns read for the command (undefined: keys are not ordered).
   */
  private takeTurn(id: number, meta: MessageMeta, dueMs: number, turns: Turns | undefined): boolean {
    if (turns === undefined || meta.orderKey === undefined) return false
    const label = TEXT.decode(meta.orderKey)
    const turn = turns.get(label)
    if (turn === undefined) {
      turns.set(label, { name: meta.orderKey, holder: id, head: 0, tail: 0, dirty: true })
      return false
    }
    turn.dirty = true
    this.toWaiting(id, meta, dueMs, turn.tail++)
    return true
  }

  /**
   * Hands the turn of each departed message's key to the first message in its line (a point
   * read: the turn record says where the line starts): due (its not-before time passed) it
   * joins the tail of its weight, else it is delayed until then; a key with nobody in line
   * loses its turn record. In a tick with `ttlWaiting`, a due one that outlived the message
   * TTL is deleted instead and the turn goes on down the line, while the apply's ttlBudget
   * lasts (the lines are walked a step at a time, one read per step for every key still
   * passing). A key departs at most once per phase (only its turn's holder can depart, and no
   * turn passes before the phase ends).
   */
  private async passTurns(now: number): Promise<void> {
    const departed = this.departed
    this.departed = []
    const turns = await this.readTurns(departed.map(([, name]) => name))
    invariant(turns.size === departed.length, 'a key departs at most once per phase')
    let passing: Turn[] = []
    for (const [id, name] of departed) {
      const turn = turns.get(TEXT.decode(name))
      invariant(turn !== undefined && turn.holder === id, `message ${id} holds its key's turn`)
      turn.dirty = true
      if (turn.head < turn.tail) passing.push(turn)
      else turn.holder = 0 // nobody in line: writeTurns deletes it
    }
    while (passing.length > 0) {
      const heads = passing.map((t) => this.keys.keyWaiting(t.name, t.head))
      const got = await this.overlay.getMany(heads)
      const { ids, metas } = await this.messagesIn(
        got.map((b, i) => {
          invariant(b, `the head of a key's line is stored (${passing[i]?.holder})`)
          return b
        }),
      )
      const onward: Turn[] = []
      passing.forEach((turn, i) => {
        const id = ids[i] as number
        const meta = metas[i] as MessageMeta
        invariant(meta.state === MessageState.Waiting, `message ${id} waits for its key's turn`)
        this.st.waiting--
        turn.head++
        if (this.ttlWaiting && this.ttlBudget > 0 && meta.slot <= now && this.outlived(meta, now)) {
          // Never delivered now: deleted, and the turn goes on to the next in line.
          this.deleteMessage(heads[i] as Uint8Array, id, meta)
          this.st.discarded++
          this.ttlBudget--
          if (turn.head < turn.tail) onward.push(turn)
          else turn.holder = 0
          return
        }
        this.del(heads[i] as Uint8Array)
        this.turnsPassed++
        turn.holder = id
        if (meta.slot > now) this.toDelayed(id, meta, meta.slot)
        else this.toReady(id, meta, ReadyBand.Fresh)
      })
      passing = onward
    }
    this.writeTurns(turns)
  }

  /**
   * The stored turns of the ordered keys `names` (UTF-8), by key, in the order the keys first
   * appear in `names` whatever the cache holds (writeTurns writes them in this order, so every
   * replica's ops come in one order); free keys are absent.
   */
  private async readTurns(names: readonly Uint8Array[]): Promise<Turns> {
    const distinct = new Map<string, Uint8Array>()
    for (const name of names) distinct.set(TEXT.decode(name), name)
    const records = new Map<string, readonly [number, number, number] | null | undefined>()
    const missing: string[] = []
    for (const label of distinct.keys()) {
      const cached = this.turnRecords.get(label)
      records.set(label, cached)
      if (cached === undefined) missing.push(label)
    }
    if (missing.length > 0) {
      const got = await this.overlay.getMany(
        missing.map((l) => this.keys.keyTurn(distinct.get(l) as Uint8Array)),
      )
      missing.forEach((label, i) => {
        const b = got[i]
        const list = b === undefined ? undefined : decodeIdList(b)
        invariant(list === undefined || list.length === 3, 'turn record decodes')
        const record = list === undefined ? null : (list as unknown as readonly [number, number, number])
        this.turnRecords.set(label, record)
        records.set(label, record)
      })
    }
    const turns: Turns = new Map()
    for (const [label, record] of records) {
      if (record) turns.set(label, turnOf(distinct.get(label) as Uint8Array, record))
    }
    return turns
  }

  /** Writes the changed turns (through the cache); a turn whose holder left (0) is deleted. */
  private writeTurns(turns: Turns): void {
    for (const [label, turn] of turns) {
      if (!turn.dirty) continue
      if (turn.holder === 0) {
        this.del(this.keys.keyTurn(turn.name))
        this.turnRecords.set(label, null)
      } else {
        const record = [turn.holder, turn.head, turn.tail] as const
        this.put(this.keys.keyTurn(turn.name), encodeIdList(record))
        this.turnRecords.set(label, record)
      }
      turn.dirty = false
    }
  }

  private addExpiry(expiresAtMs: number, kind: ExpiryKind, name: Uint8Array): void {
    this.put(this.keys.expiry(expiresAtMs, kind, name), EMPTY_VALUE)
    if (expiresAtMs < this.nextExpiryMs) this.nextExpiryMs = expiresAtMs
  }

  private recordDecision(w: number): void {
    windowPush(this.window, w)
    this.windowDirty = true
  }

  /** Fills the holes of `metas` (messages whose index entry holds only their id) from their records. */
  private async fillMetas(keys: readonly Uint8Array[], metas: (MessageMeta | undefined)[]): Promise<void> {
    const missing: number[] = []
    for (let i = 0; i < metas.length; i++) if (metas[i] === undefined) missing.push(i)
    if (missing.length === 0) return
    const got = await this.overlay.getMany(missing.map((i) => keys[i] as Uint8Array))
    missing.forEach((i, j) => {
      const b = got[j]
      invariant(b, 'an index entry that holds only an id has a message record')
      metas[i] = decodeMeta(b)
    })
  }

  /** The bodies of messages `ids` with metas `metas`: inline ones decoded, others read in one call. */
  private async bodies(ids: readonly number[], metas: readonly MessageMeta[]): Promise<MessageBody[]> {
    const out = new Array<MessageBody>(ids.length)
    const apart: number[] = []
    for (let i = 0; i < ids.length; i++) {
      const inline = (metas[i] as MessageMeta).inlineBody
      if (inline === undefined) apart.push(i)
      else out[i] = decodeBody(inline)
    }
    if (apart.length > 0) {
      const got = await this.overlay.getMany(apart.map((i) => this.keys.body(ids[i] as number)))
      apart.forEach((i, j) => {
        const b = got[j]
        invariant(b, `message ${ids[i]} has a body`)
        out[i] = decodeBody(b)
      })
    }
    return out
  }

  /**
   * The bodies of a listing's first messages whose sizes (messageBytes) add up to at most `budget` bytes
   * (and the first whatever its size when `first`): a listing of large messages stops early
   * instead of building an answer of up to leaseBatchMax × messageBytesMax. Bodies stored
   * apart are read one at a time, so at most one beyond the budget is read.
   */
  private async listedBodies(
    ids: readonly number[],
    metas: readonly MessageMeta[],
    budget: number,
    first: boolean,
  ): Promise<MessageBody[]> {
    const out: MessageBody[] = []
    let bytes = 0
    for (let i = 0; i < ids.length; i++) {
      const inline = (metas[i] as MessageMeta).inlineBody
      const stored = inline ?? (await this.overlay.get(this.keys.body(ids[i] as number)))
      invariant(stored, `message ${ids[i]} has a body`)
      const body = decodeBody(stored)
      bytes += messageBytes(body)
      if (bytes > budget && !(first && i === 0)) break
      out.push(body)
    }
    return out
  }

  private async meta(id: number): Promise<MessageMeta> {
    const b = await this.overlay.get(this.keys.message(id))
    invariant(b, `message ${id} exists`)
    return decodeMeta(b)
  }

  // ---- writes ---------------------------------------------------------------------------

  /** Writes message `id`'s record (at `key`, its key) through the record cache. */
  private putMeta(id: number, meta: MessageMeta, key = this.keys.message(id)): void {
    const bytes = encodeMeta(meta)
    this.put(key, bytes)
    // A copy: `bytes` may be a view into the shared slab, which it would keep alive.
    if (bytes.length <= MESSAGE_META_CACHED_BYTES_MAX) {
      const copy = recordCopies.alloc(bytes.length)
      copy.set(bytes)
      this.messageMetas.set(id, copy)
    } else this.messageMetas.delete(id)
  }

  /** Deletes message `id`'s record (at `key`, its key) and forgets it in the record cache. */
  private delMeta(id: number, key = this.keys.message(id)): void {
    this.del(key)
    this.messageMetas.delete(id)
  }

  /** The records of messages `ids` (at `keys`, their keys): cached ones from memory, the rest read. */
  private async metaRecords(
    ids: readonly number[],
    keys: readonly Uint8Array[],
  ): Promise<(Uint8Array | undefined)[]> {
    const out: (Uint8Array | undefined)[] = ids.map((id) => this.messageMetas.get(id))
    const missingAt: number[] = []
    for (let i = 0; i < out.length; i++) if (out[i] === undefined) missingAt.push(i)
    if (missingAt.length === 0) return out
    const got = await this.overlay.getMany(missingAt.map((i) => keys[i] as Uint8Array))
    missingAt.forEach((at, j) => {
      out[at] = got[j]
    })
    return out
  }

  private put(key: Uint8Array, value: Uint8Array): void {
    this.ops.push({ type: 'put', key, value })
    if (this.readyAhead.size > 0) this.readyWritten(key, true)
  }

  private del(key: Uint8Array): void {
    this.ops.push({ type: 'del', key })
    if (this.readyAhead.size > 0) this.readyWritten(key, false)
  }

  /** Writes the state record, every changed weight record, the window and the config. */
  private persist(): void {
    const dirty = this.scheduler.takeDirty()
    for (const w of dirty.weights) this.dirtyWeights.add(w)
    const [vNum, vDen] = this.scheduler.virtualTime()
    this.st.virtualNum = vNum
    this.st.virtualDen = vDen
    this.put(this.keys.state(), encodeState(this.st))
    for (const w of this.dirtyWeights) {
      this.put(
        this.keys.weight(w),
        encodeWeight({
          ready: this.ready[w] as number,
          delayed: this.delayed[w] as number,
          leased: this.leased[w] as number,
          dead: this.dead[w] as number,
          passNum: this.scheduler.passNumOf(w),
        }),
      )
    }
    this.dirtyWeights.clear()
    if (this.windowDirty) {
      this.put(this.keys.window(), encodeWindowHeader(this.window))
      for (const c of this.window.dirtyChunks) this.put(this.keys.windowChunk(c), windowChunk(this.window, c))
      this.window.dirtyChunks.clear()
      this.windowDirty = false
    }
    if (this.configDirty) {
      this.put(this.keys.config(), encodeConfig(this.configValue))
      this.configDirty = false
    }
  }
}

const EMPTY_VALUE = new Uint8Array(0)

/**
 * An ordered key's turn: the message that holds it (ready, delayed or leased; 0 once it left
 * with nobody in line) and the key's line of waiting messages, seqs [head, tail).
 */
interface Turn {
  readonly name: Uint8Array
  holder: number
  head: number
  tail: number
  dirty: boolean
}

function turnOf(name: Uint8Array, [holder, head, tail]: readonly [number, number, number]): Turn {
  return { name, holder, head, tail, dirty: false }
}
/** Turns by key. */
type Turns = Map<string, Turn>

/** The least key greater than `key`. */
function successor(key: Uint8Array): Uint8Array {
  const out = new Uint8Array(key.length + 1)
  out.set(key)
  return out
}

function idOf(value: Uint8Array): number {
  invariant(value.length === 8, 'an index value is an 8-byte id')
  return (
    ((((value[0] as number) << 24) |
      ((value[1] as number) << 16) |
      ((value[2] as number) << 8) |
      (value[3] as number)) >>>
      0) *
      0x1_0000_0000 +
    ((((value[4] as number) << 24) |
      ((value[5] as number) << 16) |
      ((value[6] as number) << 8) |
      (value[7] as number)) >>>
      0)
  )
}

/** Checks message `i` of an enqueue against the partition's config; returns its weight. */
function checkMessage(
  m: EnqueueCommand['messages'][number],
  i: number,
  now: number,
  cfg: QueueConfig,
): number {
  if (typeof m !== 'object' || m === null) throw new InvalidArgumentError(`message ${i} must be an object`)
  const weight = parseWeight(m.weight)
  if (!(m.body instanceof Uint8Array))
    throw new InvalidArgumentError(`message ${i}: body must be a Uint8Array`)
  if (m.headers !== undefined) {
    if (typeof m.headers !== 'object' || m.headers === null) {
      throw new InvalidArgumentError(`message ${i}: headers must be an object of strings`)
    }
    for (const name of Object.keys(m.headers)) {
      if (typeof m.headers[name] !== 'string') {
        throw new InvalidArgumentError(`message ${i}: header '${name}' must be a string`)
      }
    }
  }
  if (m.key !== undefined) checkName(`message ${i} key`, m.key)
  if (m.dedupKey !== undefined) checkName(`message ${i} dedupKey`, m.dedupKey)
  if (m.notBeforeMs !== undefined)
    checkInt(`message ${i} notBeforeMs`, m.notBeforeMs, 0, now + cfg.delayMsMax)
  const size = messageBytes(m)
  if (size > cfg.messageBytesMax) {
    throw new InvalidArgumentError(
      `message ${i} is ${size} bytes (body + headers + key); the limit is ${cfg.messageBytesMax}`,
    )
  }
  return weight
}

function checkInt(what: string, value: unknown, min: number, max: number): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidArgumentError(`${what} must be an integer from ${min} to ${max}, got ${String(value)}`)
  }
}

function checkName(what: string, value: unknown): void {
  // Well-formed: a lone surrogate is stored as U+FFFD, so two names would share one record
  // while the caches keyed by the string kept them apart (a replica that restarted answered
  // otherwise). The command codec never decodes one; a direct caller could pass one.
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    utf8Length(value) > NAME_BYTES_MAX ||
    LONE_SURROGATE.test(value)
  ) {
    throw new InvalidArgumentError(
      `${what} must be a non-empty, well-formed string of at most ${NAME_BYTES_MAX} UTF-8 bytes`,
    )
  }
}

/** In `u` mode a surrogate pair is one code point: this matches lone surrogates only. */
const LONE_SURROGATE = /\p{Surrogate}/u

/** The lease of leased message `id` (its deadline is the record's slot). */
function leaseOf(id: number, meta: MessageMeta, body: MessageBody): Lease {
  return { leaseId: `${id}.${meta.deliveries}`, ...storedMessage(id, meta, body), deadlineMs: meta.slot }
}

/** A listed message: its record and body as stored. */
function storedMessage(messageId: number, meta: MessageMeta, body: MessageBody): StoredMessage {
  return {
    messageId,
    weight: meta.weight,
    body: body.body,
    headers: body.headers,
    key: body.key,
    deliveryCount: meta.deliveries,
    enqueuedAtMs: meta.enqueuedAtMs,
  }
}
