import {
  appendBytes,
  type BatchOp,
  decodeTuple,
  encodeTuple,
  stateMachineKey,
  stateMachineRange,
} from '@mq/kv-storage'
import {
  type CommandResult,
  type DeadMessage,
  InvalidArgumentError,
  type QueueConfig as PartitionConfig,
  QueuePartition,
  type QueueStats,
  type StoredMessage,
} from '@mq/weighted-queue'
import { type DataCommand, decodeDataCommand } from './data-command'
import type { KeyPair } from './key-pairs'
import { endsLongPolls, wakesLongPolls } from './long-poll-wake'
import { RangeSweeper, type SweepEngine } from './range-sweeper'
import { type PartitionMoves, replacesAborted, staleMove } from './stale-move'

/** The outcome of one data-group entry: the same on every replica. */
export type DataResult =
  | { readonly type: 'opened' | 'dropped' | 'fenced' | 'unfenced' }
  /** `turnsPassed`: messages of ordered keys that got their turn in the apply (when any). */
  | { readonly type: 'applied'; readonly result: CommandResult; readonly turnsPassed?: number }
  /** An import chunk was taken; `complete` once the group holds the partition. */
  | { readonly type: 'imported'; readonly complete: boolean }
  /**
   * The entry changed nothing: it was malformed, named a partition this group does not hold,
   * named a fenced partition (moved or moving away) or one being imported, or was an import
   * chunk out of its session's order; an `open` or a last import chunk whose partition config
   * is refused is malformed.
   */
  | { readonly type: 'refused'; readonly reason: RefusalReason; readonly message: string }

export type RefusalReason = 'malformed' | 'not-held' | 'fenced' | 'importing' | 'import-order'

/** Where an import session stands (persisted, so that a new leader continues or restarts it). */
interface ImportSession {
  readonly moveId: number
  readonly session: string
  readonly next: number
  /** The source leader's term (absent: 0, as in sessions stored before it was recorded). */
  readonly sourceTerm?: number
}

/**
 * Told, after an applied entry that may have made messages of `queue`'s partition `index`
 * ready (wakesLongPolls), its partition; after a snapshot's install (`reload`), nothing: every
 * partition may have changed. Called inside the apply, between the partition's applies (its
 * in-memory state reads as the entry left it); it must not wait, and what it throws is dropped.
 */
export type ReadyListener = (partition?: {
  readonly queue: string
  readonly index: number
  /** The partition left the group's leases (endsLongPolls): every poll of it looks again. */
  readonly gone?: true
}) => void

/** The keys of one partition written while the watch is open (see `watchWrites`). */
export interface WriteWatch {
  /**
   * The keys written since the watch began, relative to the partition's prefix, each once;
   * undefined when more than its bound were, or the partition was dropped, cleared or
   * imported over (anything not made of single-key writes).
   */
  keys(): Uint8Array[] | undefined
  /** Stops watching. */
  close(): void
}

interface WatchState {
  readonly prefix: Uint8Array
  readonly keysMax: number
  keys: Map<string, Uint8Array> | undefined
}

export interface DataApplied {
  readonly result: DataResult
  /** The writes to put in the same storage batch as the apply index. */
  readonly ops: BatchOp[]
  /** Call once `ops` (and every earlier apply's) are in the engine. */
  readonly written: () => void
}

const REGISTRY = 'partitions'
const PARTITION_DATA = 'p'
const FENCED = 'fenced'
const IMPORTING = 'importing'
const IMPORTED = 'imported'
const DROPPED = 'dropped'
const RETIRED = 'retired'
const RETIRED_NEXT = 'retired-next'
const CLOCK_OFFSET = 'clock-offset'
const ABORTED = 'aborted'
/**
 * Partitions of deleted queues a group keeps fenced (its latest retirements): a fence is needed
 * only until every node has let the deleted queue's route go (a heartbeat or two), and keeping
 * every one would grow with each queue ever deleted (temporary queues). Part of what `retire`
 * does on every replica: changing it needs a new format level.
 */
export const RETIRED_MAX = 10_000
/** A retirement's fence is kept at least this long (leader time), however many come after it. */
export const RETIRED_MIN_AGE_MS = 10 * 60_000
/** Keys listed per engine call while exporting (keys only: values are read as they fit). */
const EXPORT_KEYS_PER_READ = 256
/**
 * Bytes of values one engine call may ask for while exporting or reading keys back, counted at
 * the partition's message size limit (a value's size is known only once read): at least one
 * value. With values within that limit, a call of `exportChunk` or `readKeys` reads less than
 * its `bytesMax` + max(VALUES_READ_BYTES_MAX, the limit) of them.
 */
const VALUES_READ_BYTES_MAX = 4 * 1024 * 1024
/** The largest message size limit a partition config may set (weighted-queue's bound). */
const MESSAGE_BYTES_LIMIT_MAX = 16 * 1024 * 1024
const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
const NOTHING = (): void => {}

/**
 * The state machine of one data group: the queue partitions the group holds (claim 6: the
 * leader stores messages and takes them out by weight), each a weighted-queue partition
 * under its own key prefix inside the group's key space, so that removing the group removes
 * them too. Applies the group's log entries in order; deterministic.
 *
 * Keys: (group, 16, 'partitions', queue, index) → the partition's config (the registry);
 * (group, 16, 'p', queue, index, …) → the partition's own state;
 * (group, 16, 'fenced', queue, index) → the partition moved (or is moving) away: it takes
 * no commands and is never opened again here, except by an import;
 * (group, 16, 'importing', queue, index) → an import session under way (JSON);
 * (group, 16, 'imported', queue, index) → the move id of the import that completed;
 * (group, 16, 'dropped', queue, index) → the partition was dropped and its keys are still
 * being deleted (a tombstone; see RangeSweeper). Until they are, the partition is not opened
 * or imported again here (those entries wait for the sweep);
 * (group, 16, 'retired', seq) → [queue, index, leader time]: the fence of a deleted queue's
 * partition, the group's seq-th retirement (`#retire`: the fences of old ones beyond
 * `retiredMax` are lifted; moves' fences stay); (group, 16, 'retired-next') → [next seq];
 * (group, 16, 'clock-offset', queue, index) → ms in decimal (may be negative): how far the partition's clock is from the
 * group's (`partitionTimeMs`), set by the import that brought it here (absent: 0);
 * (group, 16, 'aborted', queue, index) → the id of the latest move from here that was aborted
 * (`unfence`, FORMAT_LEVEL_MOVE_ABORT): a fence, copy or drop of that move or an earlier one is
 * refused from then on.
 */
export class DataGroupMachine {
  readonly groupId: number
  readonly #reader: SweepEngine
  readonly #sweeper: RangeSweeper
  readonly #partitions = new Map<string, QueuePartition>()
  readonly #fenced = new Set<string>()
  /**
   * The move that fenced each partition fenced by a move that named itself (FORMAT_LEVEL_MOVE_IDS;
   * the FENCED key's value): only that move's drop drops it.
   */
  readonly #fencedBy = new Map<string, number>()
  /** The retirements kept (their partitions are fenced) by partition id, oldest first, and the next one's seq. */
  readonly #retired = new Map<
    string,
    { readonly seq: number; readonly queue: string; readonly index: number; readonly atMs: number }
  >()
  #retiredNext = 1
  readonly #retiredMax: number
  readonly #imports = new Map<string, ImportSession>()
  readonly #imported = new Map<string, number>()
  /** The latest aborted move from here per partition (the ABORTED key's value). */
  readonly #aborted = new Map<string, number>()
  /** The partitions whose clock is not the group's: partition time = group time + offset. */
  readonly #clockOffsets = new Map<string, number>()
  readonly #watches = new Map<string, Set<WatchState>>()
  readonly #readyListeners = new Set<ReadyListener>()
  #applying: Promise<unknown> = Promise.resolve()
  /** The largest leader timestamp applied here since open (clockMs). */
  #clockMs = 0

  private constructor(
    groupId: number,
    engine: SweepEngine,
    sweepPageKeys?: number,
    retiredMax = RETIRED_MAX,
  ) {
    this.groupId = groupId
    this.#retiredMax = Math.max(1, retiredMax)
    this.#reader = engine
    this.#sweeper = new RangeSweeper(engine, sweepPageKeys)
  }

  /**
   * Opens the group's state machine from what `engine` holds (empty: a new group), and goes on
   * deleting the keys of partitions dropped before (their tombstones). The machine reads the
   * engine; it writes it only to delete dropped partitions' keys (in the background, a page
   * of `sweepPageKeys` at a time); every other write is returned as ops. `retiredMax` (tests)
   * is how many retirements the group keeps.
   */
  static async open(
    groupId: number,
    engine: SweepEngine,
    sweepPageKeys?: number,
    retiredMax?: number,
  ): Promise<DataGroupMachine> {
    const machine = new DataGroupMachine(groupId, engine, sweepPageKeys, retiredMax)
    await machine.#load()
    return machine
  }

  /**
   * The key ranges of dropped partitions whose keys are not all deleted yet: garbage, which a
   * snapshot leaves out (their tombstones, which it carries, have them swept where it lands).
   */
  garbageRanges(): { gte: Uint8Array; lt: Uint8Array }[] {
    return this.#sweeper.pendingRanges()
  }

  /** Resolves once every sweep of a dropped partition begun so far has ended. */
  swept(): Promise<void> {
    return this.#sweeper.settled()
  }

  /** Stops deleting dropped partitions' keys (the tombstones stay for the next open). */
  close(): Promise<void> {
    return this.#sweeper.stop()
  }

  /** The partitions this group holds, as `queue/index`. */
  partitionIds(): string[] {
    return [...this.#partitions.keys()].sort()
  }

  /** The partitions this group holds and serves (not fenced: moved or moving away), as `queue/index`. */
  servedPartitionIds(): string[] {
    return this.partitionIds().filter((id) => !this.#fenced.has(id))
  }

  /**
   * The partitions being imported into this group (a move under way, or one abandoned when its
   * queue was deleted), as `queue/index`: not held yet, their keys partly written.
   */
  importIds(): string[] {
    return [...this.#imports.keys()].sort()
  }

  /** Whether this group holds `queue`'s partition `index`. */
  holds(queue: string, index: number): boolean {
    return this.#partitions.has(idOf(queue, index))
  }

  /** Whether `queue`'s partition `index` is fenced here (moved or moving away). */
  fenced(queue: string, index: number): boolean {
    return this.#fenced.has(idOf(queue, index))
  }

  /**
   * The moves this group last took part in for a partition: the one that fenced it here (as a
   * move's source; FORMAT_LEVEL_MOVE_IDS), the one whose import it completed last and the one
   * it is importing. Move ids only grow: a request of an older move is stale (stale-move.ts).
   */
  movesOf(queue: string, index: number): PartitionMoves {
    const id = idOf(queue, index)
    const fencedBy = this.#fencedBy.get(id)
    const imported = this.#imported.get(id)
    const importing = this.#imports.get(id)?.moveId
    const aborted = this.#aborted.get(id)
    return {
      ...(fencedBy !== undefined ? { fencedBy } : {}),
      ...(imported !== undefined ? { imported } : {}),
      ...(importing !== undefined ? { importing } : {}),
      ...(aborted !== undefined ? { aborted } : {}),
    }
  }

  /** The config of a partition this group holds (undefined when it holds none). */
  configOf(queue: string, index: number): PartitionConfig | undefined {
    return this.#partitions.get(idOf(queue, index))?.config
  }

  /**
   * Reads the next keys of a partition's state for a move, in key order after `after` (a key
   * relative to the partition's prefix; undefined: from the start), up to and including the
   * pair that brings the bytes (keys and values) to `bytesMax`. Returns keys relative to the
   * prefix, and whether the partition has no more keys. Exact once a `fence` of the partition
   * was applied here (its keys are frozen from then on, and identical on every replica);
   * before that, a fuzzy read of a partition that changes under it (each pair as it was when
   * read; a key deleted between its listing and its read is left out), which a copy corrects
   * after the fence. Lists keys without their values and reads the values as they fit
   * (`#readValues`): a call reads less than `bytesMax` + max(VALUES_READ_BYTES_MAX, the
   * partition's message size limit) of values within that limit.
   */
  async exportChunk(
    queue: string,
    index: number,
    after: Uint8Array | undefined,
    bytesMax: number,
  ): Promise<{ pairs: KeyPair[]; done: boolean }> {
    const prefix = this.#prefix(queue, index)
    const range = this.#dataRange(queue, index)
    const valueBytesMax = this.#valueBytesMax(queue, index)
    const pairs: KeyPair[] = []
    let bytes = 0
    let from = after ? appendBytes(prefix, after) : undefined
    for (;;) {
      const keys = await this.#reader.keys({
        ...(from ? { gt: from } : { gte: range.gte }),
        lt: range.lt,
        limit: EXPORT_KEYS_PER_READ,
      })
      const last = keys.length < EXPORT_KEYS_PER_READ
      let at = 0
      while (at < keys.length) {
        const values = await this.#readValues(keys.slice(at), bytesMax - bytes, valueBytesMax)
        for (const value of values) {
          const key = keys[at++] as Uint8Array
          bytes += key.length + (value?.length ?? 0)
          if (value !== undefined) pairs.push([key.slice(prefix.length), value])
          // What the last read brought past the pair that filled the chunk is left for the next.
          if (bytes >= bytesMax) return { pairs, done: last && at === keys.length }
        }
      }
      if (last) return { pairs, done: true }
      from = keys[keys.length - 1] as Uint8Array
    }
  }

  /**
   * The values at the first of `keys` (whole keys), undefined where absent: read in batches
   * until the bytes of keys and values read reach `bytesMax` (at least one key's, when any).
   * The first batch is one value; each next one as many as the bytes left fit at the largest
   * pair read so far, and never more than VALUES_READ_BYTES_MAX worth at `valueBytesMax` each
   * (a value not read yet may be that large). Returns everything read: with values within
   * `valueBytesMax`, less than `bytesMax` + max(VALUES_READ_BYTES_MAX, `valueBytesMax`) bytes.
   */
  async #readValues(
    keys: readonly Uint8Array[],
    bytesMax: number,
    valueBytesMax: number,
  ): Promise<(Uint8Array | undefined)[]> {
    const batchMax = Math.max(1, Math.floor(VALUES_READ_BYTES_MAX / Math.max(1, valueBytesMax)))
    const values: (Uint8Array | undefined)[] = []
    let bytes = 0
    let largest = 0
    while (values.length < keys.length && (values.length === 0 || bytes < bytesMax)) {
      const count =
        largest === 0 ? 1 : Math.min(batchMax, Math.max(1, Math.floor((bytesMax - bytes) / largest)))
      const batch = keys.slice(values.length, values.length + count)
      for (const [i, value] of (await this.#reader.getMany(batch)).entries()) {
        const size = (batch[i] as Uint8Array).length + (value?.length ?? 0)
        if (size > largest) largest = size
        bytes += size
        values.push(value)
      }
    }
    return values
  }

  /**
   * The largest value `queue`'s partition `index` is taken to hold: its message size limit
   * (a message's record is about its size; one stored before the limit was lowered is larger),
   * or the largest limit a config may set when the partition is not open here.
   */
  #valueBytesMax(queue: string, index: number): number {
    return this.#partitions.get(idOf(queue, index))?.config.messageBytesMax ?? MESSAGE_BYTES_LIMIT_MAX
  }

  /**
   * Starts recording which keys of `queue`'s partition `index` the entries applied from now
   * on write (at most `keysMax`), so that a copy read while the partition serves can be
   * corrected once it is fenced by re-reading just those keys. In memory, on this replica.
   */
  watchWrites(queue: string, index: number, keysMax: number): WriteWatch {
    const id = idOf(queue, index)
    const state: WatchState = { prefix: this.#prefix(queue, index), keysMax, keys: new Map() }
    let set = this.#watches.get(id)
    if (!set) {
      set = new Set()
      this.#watches.set(id, set)
    }
    set.add(state)
    return {
      keys: () => (state.keys ? [...state.keys.values()] : undefined),
      close: () => {
        set.delete(state)
        if (set.size === 0 && this.#watches.get(id) === set) this.#watches.delete(id)
      },
    }
  }

  /**
   * Calls `listener` for every entry applied from now on that may have made messages ready in
   * a partition (with that partition), or took one away from the group (with `gone`), and after
   * every `reload` (without one): the long polls of that partition look again, not every poll of
   * the group. In memory, on this replica.
   * Returns the function that stops it.
   */
  watchReady(listener: ReadyListener): () => void {
    this.#readyListeners.add(listener)
    return () => this.#readyListeners.delete(listener)
  }

  /**
   * Tells the ready listeners. A listener's failure is dropped: it is a hint to long polls on
   * this replica (their periodic recheck covers a missed one), and the replicated apply must not
   * fail for it.
   */
  #tellReady(partition?: Parameters<ReadyListener>[0]): void {
    for (const listener of this.#readyListeners) {
      try {
        listener(partition)
      } catch {
        // dropped (above)
      }
    }
  }

  /**
   * The values at `keys` (relative to the partition's prefix) as the engine holds them now,
   * undefined where absent. With `bytesMax`, those of the first keys only: read until the bytes
   * of keys and values reach `bytesMax` (at least one key's), as `exportChunk` reads them, so
   * that a call reads less than `bytesMax` + max(VALUES_READ_BYTES_MAX, the partition's
   * message size limit) of values within that limit; the caller asks again from the first key
   * not answered. Without it, all of them, in reads of that bound each.
   */
  readKeys(
    queue: string,
    index: number,
    keys: readonly Uint8Array[],
    bytesMax = Number.POSITIVE_INFINITY,
  ): Promise<(Uint8Array | undefined)[]> {
    const prefix = this.#prefix(queue, index)
    return this.#readValues(
      keys.map((k) => appendBytes(prefix, k)),
      bytesMax,
      this.#valueBytesMax(queue, index),
    )
  }

  /**
   * Records the keys `ops` write in the watches of partition `id`, if any; 'whole' (a drop,
   * an import, an open) or anything but single-key writes inside the partition's prefix
   * leaves a watch without a usable answer.
   */
  #noteWrites(id: string, ops: readonly BatchOp[] | 'whole'): void {
    const set = this.#watches.get(id)
    if (!set) return
    for (const w of set) {
      if (!w.keys) continue
      if (ops === 'whole') {
        w.keys = undefined
        continue
      }
      for (const op of ops) {
        if (op.type === 'clear' || !startsWith(op.key, w.prefix) || w.keys.size >= w.keysMax) {
          w.keys = undefined
          break
        }
        const key = op.key.slice(w.prefix.length)
        w.keys.set(Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1'), key)
      }
    }
  }

  /**
   * Whether `queue`'s partition `index` is open here with settings that differ from `wanted`
   * (a field `wanted` sets, configVersion aside) and `wanted` is a newer version of them.
   */
  needsConfig(queue: string, index: number, wanted: Partial<PartitionConfig>): boolean {
    const config = this.#partitions.get(idOf(queue, index))?.config
    if (!config || (wanted.configVersion ?? 0) <= config.configVersion) return false
    for (const [k, v] of Object.entries(wanted)) {
      if (k !== 'configVersion' && v !== undefined && v !== config[k as keyof PartitionConfig]) return true
    }
    return false
  }

  /**
   * At most how many messages a lease of `queue`'s partition `index` at `nowMs` could find, as
   * this replica has applied it (QueuePartition.leasableAtMost); Infinity when the partition is
   * not open here.
   */
  leasableAtMost(queue: string, index: number, nowMs: number): number {
    const id = idOf(queue, index)
    return this.#partitions.get(id)?.leasableAtMost(this.#timeOf(id, nowMs)) ?? Number.POSITIVE_INFINITY
  }

  /**
   * The earliest group time a lease deadline or a delayed message of `queue`'s partition `index`
   * may fall due, as this replica has applied it (QueuePartition.nextTimedMs); Infinity when
   * none or when the partition is not open here.
   */
  nextTimedMs(queue: string, index: number): number {
    const id = idOf(queue, index)
    return this.#nextTimedMs(id, this.#partitions.get(id))
  }

  #nextTimedMs(id: string, p: QueuePartition | undefined): number {
    return p ? p.nextTimedMs() - (this.#clockOffsets.get(id) ?? 0) : Number.POSITIVE_INFINITY
  }

  /**
   * The time of `queue`'s partition `index` at group time `groupMs`: the group's clock plus the
   * partition's offset (0 unless an import set one). Every time in the partition's state (enqueue
   * times, deadlines, delays) is a partition time; the group's entries apply to it at their
   * leader timestamp plus the offset, and a time a leader puts in a command (a delay's end) must
   * be one too. The other methods here take and give group times.
   */
  partitionTimeMs(queue: string, index: number, groupMs: number): number {
    return this.#timeOf(idOf(queue, index), groupMs)
  }

  #timeOf(id: string, groupMs: number): number {
    return groupMs + (this.#clockOffsets.get(id) ?? 0)
  }

  /**
   * The partitions held here (not fenced) whose next lease deadline or delayed message may be
   * due by `nowMs` (nextTimedMs: a lower bound, which a `tick` moves on), as `queue/index`,
   * sorted: the leader proposes a `tick` for them, so that leases expire, messages are
   * dead-lettered and delayed messages become ready without traffic.
   */
  timedPartitionIds(nowMs: number): string[] {
    const ids: string[] = []
    for (const [id, p] of this.#partitions)
      if (this.#nextTimedMs(id, p) <= nowMs && !this.#fenced.has(id)) ids.push(id)
    return ids.sort()
  }

  /**
   * The largest leader timestamp among the entries applied here since the machine was opened
   * (0 before the first). Raft stamps a group's entries non-decreasing and a partition never
   * moves its clock back, so every entry proposed from now on applies at this time or later,
   * whatever the proposing leader's own clock says: a leader whose clock is behind its
   * predecessor's measures delays and due times from max(its clock, this). In memory: after a
   * restart it knows only what it applied since. A group time (see `partitionTimeMs`).
   */
  clockMs(): number {
    return this.#clockMs
  }

  /** The partitions held here whose config sets a message TTL, as `queue/index` (not fenced ones). */
  ttlPartitionIds(): string[] {
    const ids: string[] = []
    for (const [id, p] of this.#partitions)
      if (p.config.messageTtlMs > 0 && !this.#fenced.has(id)) ids.push(id)
    return ids.sort()
  }

  /** The dead-lettered messages of `queue`'s partition `index` as applied here (0 when not held). */
  deadCount(queue: string, index: number): number {
    return this.#partitions.get(idOf(queue, index))?.deadCount() ?? 0
  }

  /** The partitions held here (not fenced) with dead-lettered messages, sorted. */
  deadPartitionIds(): string[] {
    const ids: string[] = []
    for (const [id, p] of this.#partitions) if (p.deadCount() > 0 && !this.#fenced.has(id)) ids.push(id)
    return ids.sort()
  }

  /**
   * Whether a `tick` of `queue`'s partition `index` at `nowMs` would delete messages that
   * outlived its TTL (QueuePartition.ttlDue); false when the partition is not held here.
   */
  async ttlDue(queue: string, index: number, nowMs: number): Promise<boolean> {
    const at = this.partitionTimeMs(queue, index, nowMs)
    return (await this.#read(queue, index, (p) => p.ttlDue(at))) ?? false
  }

  /** The partition's stats at group time `nowMs` (its times are partition times). */
  stats(queue: string, index: number, nowMs: number): Promise<QueueStats | undefined> {
    const at = this.partitionTimeMs(queue, index, nowMs)
    return this.#read(queue, index, (p) => p.stats(at))
  }

  listDead(queue: string, index: number, max: number, cursor?: number): Promise<DeadMessage[] | undefined> {
    return this.#read(queue, index, (p) => p.listDead(max, cursor))
  }

  listReady(queue: string, index: number, max: number): Promise<StoredMessage[] | undefined> {
    return this.#read(queue, index, (p) => p.listReady(max))
  }

  /**
   * Runs `read` on partition `index` of `queue` between applies: after those queued before it,
   * before those queued after. A read awaits the engine several times, and an apply in between
   * could take what it read first away (a purge deletes a body it is about to read). Undefined
   * when the partition is not held here by then.
   */
  #read<T>(queue: string, index: number, read: (p: QueuePartition) => Promise<T>): Promise<T | undefined> {
    return this.#inOrder(() => {
      const p = this.#partitions.get(idOf(queue, index))
      return p ? read(p) : undefined
    })
  }

  /** Runs `fn` after every apply, read and reload queued before it, and before those after. */
  #inOrder<T>(fn: () => T | Promise<T>): Promise<T> {
    const next = this.#applying.then(fn)
    this.#applying = next.catch(() => {})
    return next
  }

  /**
   * Applies one committed entry's data at the entry's leader timestamp `nowMs`. Calls are
   * queued, so they never overlap, in the order they are made. `written` resolves once the
   * ops of every earlier entry are in the engine: `fence` waits for it (so that an export
   * after it reads the final state) and so does the last `import` chunk (which opens the
   * partition from the imported keys).
   */
  apply(data: Uint8Array, nowMs: number, written: () => Promise<void> = settled): Promise<DataApplied> {
    return this.#inOrder(() => this.#apply(data, nowMs, written))
  }

  /**
   * Forgets every partition and reloads from the engine, after `replace` (the install of a
   * snapshot) rewrote the group's keys: sweeping stops before it, so no sweep deletes a key it
   * writes, and starts again from the tombstones it leaves.
   */
  reload(replace: () => Promise<void> = settled): Promise<void> {
    // In the chain of applies and reads: a read queued meanwhile waits for the reload (it ran
    // against the old partitions while the install rewrote their keys; an audit).
    return this.#inOrder(async () => {
      await this.#sweeper.stop()
      await replace()
      this.#sweeper.resume()
      this.#partitions.clear()
      this.#fenced.clear()
      this.#fencedBy.clear()
      this.#retired.clear()
      this.#retiredNext = 1
      this.#imports.clear()
      this.#imported.clear()
      this.#aborted.clear()
      this.#clockOffsets.clear()
      await this.#load()
      this.#tellReady()
    })
  }

  async #apply(data: Uint8Array, nowMs: number, written: () => Promise<void>): Promise<DataApplied> {
    if (nowMs > this.#clockMs) this.#clockMs = nowMs
    let command: DataCommand
    try {
      command = decodeDataCommand(data)
    } catch (error) {
      return refused('malformed', `malformed data-group entry: ${(error as Error).message}`)
    }
    const applied = await this.#applyCommand(command, nowMs, written)
    if (this.#readyListeners.size > 0 && wakesLongPolls(applied.result))
      this.#tellReady({ queue: command.queue, index: command.partition })
    else if (this.#readyListeners.size > 0 && endsLongPolls(applied.result))
      this.#tellReady({ queue: command.queue, index: command.partition, gone: true })
    return applied
  }

  async #applyCommand(
    command: DataCommand,
    nowMs: number,
    written: () => Promise<void>,
  ): Promise<DataApplied> {
    const id = idOf(command.queue, command.partition)
    // A drop, an import or an open replaces the partition's state whole: a watch of it ends
    // (a retirement's drop too: #retire).
    if (command.type === 'drop' || command.type === 'import' || command.type === 'open')
      this.#noteWrites(id, 'whole')
    switch (command.type) {
      case 'open': {
        if (this.#partitions.has(id)) return { result: { type: 'opened' }, ops: [], written: NOTHING }
        if (this.#fenced.has(id)) return refused('fenced', `${id} moved away from group ${this.groupId}`)
        if (this.#imports.has(id))
          return refused('importing', `${id} is being moved into group ${this.groupId}`)
        // A dropped incarnation's keys go first (the same key space).
        await this.#sweeper.whenSwept(id)
        const partition = await this.#openPartition(
          this.#prefix(command.queue, command.partition),
          command.config,
        )
        if (typeof partition === 'string') return refused('malformed', `open of ${id}: ${partition}`)
        this.#partitions.set(id, partition)
        const value = encoder.encode(JSON.stringify(command.config))
        return {
          result: { type: 'opened' },
          ops: [{ type: 'put', key: this.#registryKey(command.queue, command.partition), value }],
          written: NOTHING,
        }
      }
      case 'drop': {
        // A move's drop (naming itself) drops only a partition it fenced: a late one of an earlier
        // move (a deposed meta leader's call) must not drop the partition moved back since.
        // An `ordered` one (FORMAT_LEVEL_MOVE_ORDER) not while a later move imports it back here
        // either: that import would only start over.
        if (command.moveId !== undefined) {
          const by = this.#fencedBy.get(id)
          if (!this.#fenced.has(id) || (by !== undefined && by !== command.moveId))
            return refused(
              'not-held',
              `${id} is not fenced by move ${command.moveId} in group ${this.groupId}: a stale drop`,
            )
          const stale = command.ordered
            ? staleMove(command.moveId, this.movesOf(command.queue, command.partition), 'drop in')
            : undefined
          if (stale) return refused('not-held', `${id} in group ${this.groupId}: ${stale}`)
        }
        // A fenced partition is dropped even when never opened here (a move's last step), and so
        // is an unfinished import (of a queue deleted while it moved): its session ends with it.
        if (!this.#partitions.has(id) && !this.#fenced.has(id) && !this.#imports.has(id))
          return refused('not-held', `group ${this.groupId} does not hold ${id}`)
        return { result: { type: 'dropped' }, ...this.#drop(command.queue, command.partition, id) }
      }
      case 'apply': {
        if (this.#fenced.has(id)) return refused('fenced', `${id} moved away from group ${this.groupId}`)
        const partition = this.#partitions.get(id)
        if (!partition) return refused('not-held', `group ${this.groupId} does not hold ${id}`)
        const applied = await partition.apply(command.command, this.#timeOf(id, nowMs))
        this.#noteWrites(id, applied.ops)
        return {
          result: {
            type: 'applied',
            result: applied.result,
            ...(applied.turnsPassed > 0 ? { turnsPassed: applied.turnsPassed } : {}),
          },
          ops: applied.ops,
          written: () => partition.release(applied.generation),
        }
      }
      case 'fence': {
        // A late fence of a move aborted since (its copy still running when the abort lifted
        // the fence) would fence the partition for good: no move is left to end it.
        const aborted = this.#aborted.get(id)
        if (command.moveId !== undefined && aborted !== undefined && command.moveId <= aborted)
          return refused('not-held', `${id} in group ${this.groupId}: move ${command.moveId} was aborted`)
        // An `ordered` one (FORMAT_LEVEL_FENCE_ORDER) not once the group took part in a later move:
        // the aborted mark goes with a later move's drop, and a late fence of the aborted move
        // would then fence for good a partition a move after it brought back here.
        const stale = command.ordered
          ? staleMove(command.moveId, this.movesOf(command.queue, command.partition), 'fence in')
          : undefined
        if (stale) return refused('not-held', `${id} in group ${this.groupId}: ${stale}`)
        const ops: BatchOp[] = []
        const retired = this.#retired.get(id)
        if (retired) {
          // Retired, then fenced by a move begun before its queue was deleted: kept for good.
          this.#retired.delete(id)
          ops.push({ type: 'del', key: this.#retiredKey(retired.seq) })
        } else if (!this.#fenced.has(id)) {
          this.#fenced.add(id)
          if (command.moveId !== undefined) this.#fencedBy.set(id, command.moveId)
          const by = command.moveId !== undefined ? encoder.encode(String(command.moveId)) : EMPTY
          ops.push({ type: 'put', key: this.#key(FENCED, command.queue, command.partition), value: by })
        }
        await written()
        return { result: { type: 'fenced' }, ops, written: NOTHING }
      }
      case 'retire':
        return this.#retire(command.queue, command.partition, id, nowMs, command.final)
      case 'unfence':
        return this.#unfence(command.queue, command.partition, id, command.moveId)
      case 'import':
        return this.#import(command, id, nowMs, written)
    }
  }

  /**
   * Fences a deleted queue's partition as the group's next retirement, dropping it if held or
   * being imported (so that a fence lifted later never leaves a partition served), and lifts
   * the fences of the oldest retirements while more than `retiredMax` are kept and the oldest
   * is at least RETIRED_MIN_AGE_MS old (by the entries' leader timestamps: the same on every
   * replica). A partition already fenced (moved away, or retired before) stays as it is, but
   * for a `final` one (FORMAT_LEVEL_MOVE_ABORT): a move's fence no longer names the move, so that
   * an `unfence` of it, landing late, cannot serve a deleted queue's partition again.
   */
  #retire(queue: string, index: number, id: string, nowMs: number, final?: true): DataApplied {
    if (this.#fenced.has(id)) {
      if (!final || !this.#fencedBy.delete(id))
        return { result: { type: 'fenced' }, ops: [], written: NOTHING }
      const ops: BatchOp[] = [{ type: 'put', key: this.#key(FENCED, queue, index), value: EMPTY }]
      return { result: { type: 'fenced' }, ops, written: NOTHING }
    }
    const held = this.#partitions.has(id) || this.#imports.has(id)
    if (held) this.#noteWrites(id, 'whole')
    const dropped = held ? this.#drop(queue, index, id) : { ops: [], written: NOTHING }
    const seq = this.#retiredNext++
    this.#fenced.add(id)
    this.#retired.set(id, { seq, queue, index, atMs: nowMs })
    const ops: BatchOp[] = [
      ...dropped.ops,
      { type: 'put', key: this.#key(FENCED, queue, index), value: EMPTY },
      {
        type: 'put',
        key: this.#retiredKey(seq),
        value: encodeTuple([queue, index, nowMs]),
      },
      {
        type: 'put',
        key: stateMachineKey(this.groupId, [RETIRED_NEXT]),
        value: encodeTuple([this.#retiredNext]),
      },
    ]
    for (const [oldId, oldest] of this.#retired) {
      if (this.#retired.size <= this.#retiredMax || oldest.atMs > nowMs - RETIRED_MIN_AGE_MS) break
      this.#retired.delete(oldId)
      this.#fenced.delete(oldId)
      this.#fencedBy.delete(oldId)
      ops.push(
        { type: 'del', key: this.#key(FENCED, oldest.queue, oldest.index) },
        { type: 'del', key: this.#retiredKey(oldest.seq) },
      )
    }
    return { result: { type: 'fenced' }, ops, written: dropped.written }
  }

  /**
   * Lifts the fence of aborted move `moveId` from a partition it fenced here and the group still
   * holds (the move's source, in its copy phase): the partition serves again. The move is
   * recorded as aborted either way, so that a fence of it still to come (a copy under way) is
   * refused; a fence by another move, a retirement's, or one of a partition dropped stays.
   */
  #unfence(queue: string, index: number, id: string, moveId: number): DataApplied {
    const ops: BatchOp[] = []
    if ((this.#aborted.get(id) ?? -1) < moveId) {
      this.#aborted.set(id, moveId)
      ops.push({ type: 'put', key: this.#key(ABORTED, queue, index), value: encoder.encode(String(moveId)) })
    }
    if (
      this.#fencedBy.get(id) === moveId &&
      this.#partitions.has(id) &&
      !this.#retired.has(id) &&
      this.#fenced.delete(id)
    ) {
      this.#fencedBy.delete(id)
      ops.push({ type: 'del', key: this.#key(FENCED, queue, index) })
    }
    return { result: { type: 'unfenced' }, ops, written: NOTHING }
  }

  /**
   * Drops partition `index` of `queue` (held, fenced or being imported): its registry entry,
   * import session and aborted move go; the keys are unreachable from now on (nothing reads them), and the
   * tombstone has them deleted in the background, a page at a time, once it is in the engine.
   */
  #drop(queue: string, index: number, id: string): { ops: BatchOp[]; written: () => void } {
    this.#partitions.delete(id)
    const importing = this.#imports.delete(id)
    const offset = this.#clockOffsets.delete(id)
    const aborted = this.#aborted.delete(id)
    let written = NOTHING
    const ready = new Promise<void>((resolve) => {
      written = resolve
    })
    this.#sweepDropped(queue, index, ready)
    return {
      ops: [
        { type: 'del', key: this.#registryKey(queue, index) },
        ...(importing ? [{ type: 'del' as const, key: this.#key(IMPORTING, queue, index) }] : []),
        ...(offset ? [{ type: 'del' as const, key: this.#key(CLOCK_OFFSET, queue, index) }] : []),
        ...(aborted ? [{ type: 'del' as const, key: this.#key(ABORTED, queue, index) }] : []),
        { type: 'put', key: this.#key(DROPPED, queue, index), value: EMPTY },
      ],
      written,
    }
  }

  async #import(
    c: Extract<DataCommand, { type: 'import' }>,
    id: string,
    nowMs: number,
    written: () => Promise<void>,
  ): Promise<DataApplied> {
    if (this.#imported.get(id) === c.moveId)
      return { result: { type: 'imported', complete: true }, ops: [], written: NOTHING }
    // A chunk of an earlier move than one the group took part in since (a deposed meta leader's
    // copy, which passed the target leader's check before the later move's entry applied): it
    // would restart the later move's import, or import stale keys over a partition moved away.
    const stale = c.ordered
      ? staleMove(c.moveId, this.movesOf(c.queue, c.partition), 'import into')
      : undefined
    if (stale) return refused('import-order', `${id} in group ${this.groupId}: ${stale}`)
    const importingKey = this.#key(IMPORTING, c.queue, c.partition)
    // Chunk 0 starts a new session, unless the one under way for the move comes from a newer
    // source leader; any other chunk continues the one under way, in order.
    const current = this.#imports.get(id)
    const term = c.sourceTerm ?? 0
    if (c.seq === 0 && current?.moveId === c.moveId && (current.sourceTerm ?? 0) > term) {
      return refused(
        'import-order',
        `import session ${c.session} for ${id} (source term ${term}) is superseded by ${current.session} (source term ${current.sourceTerm})`,
      )
    }
    // The middle chunk just taken, sent again (its answer was lost: a target leader change, a
    // deadline): taken already. Refusing it would fail the copy and start it over from chunk 0.
    // The source sends one chunk at a time and waits for its answer, so no older one comes again.
    if (
      c.seq > 0 &&
      !c.last &&
      current?.session === c.session &&
      current.moveId === c.moveId &&
      current.next === c.seq + 1
    )
      return { result: { type: 'imported', complete: false }, ops: [], written: NOTHING }
    // A chunk 0 that must find the partition not served here (a move's, FORMAT_LEVEL_MOVE_IDS) but
    // finds it held and unfenced is a stale one (an earlier move's): it would clear a live partition.
    // Not so a copy imported by an earlier move that the meta state aborted (`replaces`,
    // stale-move.ts): no later move can target a group serving the partition.
    if (
      c.seq === 0 &&
      c.fresh &&
      this.#partitions.has(id) &&
      !this.#fenced.has(id) &&
      !(c.replaces && c.ordered && replacesAborted(c.moveId, this.movesOf(c.queue, c.partition)))
    )
      return refused(
        'import-order',
        `group ${this.groupId} serves ${id}: chunk 0 of move ${c.moveId} is stale`,
      )
    const session: ImportSession | undefined =
      c.seq === 0 ? { moveId: c.moveId, session: c.session, next: 0, sourceTerm: term } : current
    if (session?.session !== c.session || session.moveId !== c.moveId || session.next !== c.seq) {
      const expected = session ? `${session.next} of ${session.session}` : 'a chunk 0'
      return refused(
        'import-order',
        `import chunk ${c.seq} of session ${c.session} for ${id} is out of order (expected ${expected}); restart the import`,
      )
    }
    // The last chunk opens the partition from the engine, so it must follow a chunk 0 (whose
    // clear it then sees written) and carry no keys of its own.
    if (c.last && (c.pairs.length > 0 || c.seq === 0))
      return refused('malformed', 'the last import chunk follows chunk 0 and carries no keys')
    if (c.pairs.some(([key]) => key.length === 0) || c.dels?.some((key) => key.length === 0))
      return refused('malformed', 'an import chunk carries an empty key')
    if (c.dels && c.dels.length > 0 && (c.seq === 0 || c.last))
      return refused('malformed', 'only a middle import chunk deletes keys')
    const ops: BatchOp[] = []
    if (c.seq === 0) {
      // Whatever an earlier session (or an earlier stay here) left is deleted first, once every
      // earlier entry's writes are in the engine (a sweep reads it), and after a dropped
      // incarnation's sweep (the sweeper runs one range after the other).
      this.#partitions.delete(id)
      await written()
      await this.#sweeper.sweep(id, this.#dataRange(c.queue, c.partition))
      ops.push({ type: 'del', key: this.#registryKey(c.queue, c.partition) })
    }
    const prefix = this.#prefix(c.queue, c.partition)
    for (const key of c.dels ?? []) ops.push({ type: 'del', key: appendBytes(prefix, key) })
    for (const [key, value] of c.pairs) ops.push({ type: 'put', key: appendBytes(prefix, key), value })
    if (!c.last) {
      const next: ImportSession = { ...session, next: session.next + 1 }
      this.#imports.set(id, next)
      ops.push({ type: 'put', key: importingKey, value: encoder.encode(JSON.stringify(next)) })
      return { result: { type: 'imported', complete: false }, ops, written: NOTHING }
    }
    // Every chunk's keys are in the engine once `written` resolves: open the partition from them.
    await written()
    // The last chunk's config: the source read it once the partition was frozen.
    const partition = await this.#openPartition(prefix, c.config)
    if (typeof partition === 'string') return refused('malformed', `import of ${id}: ${partition}`)
    this.#partitions.set(id, partition)
    this.#imports.delete(id)
    this.#fenced.delete(id)
    this.#fencedBy.delete(id)
    this.#imported.set(id, c.moveId)
    // The partition's clock goes on from the source's: its leases' deadlines, delays and TTLs
    // keep their real length whatever the two groups' clocks differ by (they may by the skew
    // of the nodes that started them). The time the move took counts as none (their ends move
    // later by it, never sooner). Without the source's clock (below the format level), the
    // group's clock, as before.
    const offset = c.clockMs !== undefined ? c.clockMs - nowMs : 0
    const offsetKey = this.#key(CLOCK_OFFSET, c.queue, c.partition)
    if (offset !== 0) {
      this.#clockOffsets.set(id, offset)
      ops.push({ type: 'put', key: offsetKey, value: encoder.encode(String(offset)) })
    } else if (this.#clockOffsets.delete(id)) ops.push({ type: 'del', key: offsetKey })
    ops.push(
      {
        type: 'put',
        key: this.#registryKey(c.queue, c.partition),
        value: encoder.encode(JSON.stringify(c.config)),
      },
      { type: 'del', key: importingKey },
      { type: 'del', key: this.#key(FENCED, c.queue, c.partition) },
      {
        type: 'put',
        key: this.#key(IMPORTED, c.queue, c.partition),
        value: encoder.encode(String(c.moveId)),
      },
    )
    return { result: { type: 'imported', complete: true }, ops, written: NOTHING }
  }

  /**
   * Opens the partition under `prefix` (QueuePartition.open: its stored config, or `config`
   * when it has none), or returns why `config` is refused (a field out of its bounds, an unknown
   * one): decided by the entry and the replicated keys alone, so the same on every replica.
   * Thrown out of apply, it stopped every replica at that entry, again at each replay.
   */
  async #openPartition(
    prefix: Uint8Array,
    config: Partial<PartitionConfig>,
  ): Promise<QueuePartition | string> {
    try {
      return await QueuePartition.open(this.#reader, prefix, config)
    } catch (error) {
      if (error instanceof InvalidArgumentError) return error.message
      throw error
    }
  }

  /** Deletes a dropped partition's keys once `ready`, then its tombstone. */
  #sweepDropped(queue: string, index: number, ready?: Promise<void>): void {
    this.#sweeper
      .sweep(idOf(queue, index), this.#dataRange(queue, index), this.#key(DROPPED, queue, index), ready)
      .catch(() => {
        // Stopped, or a write failed: the tombstone stays, and the next open sweeps again.
      })
  }

  async #load(): Promise<void> {
    for (const [key] of await this.#reader.range(stateMachineRange(this.groupId, [DROPPED]))) {
      const { queue, index } = this.#parseRegistryKey(key)
      this.#sweepDropped(queue, index)
    }
    for (const [key, value] of await this.#reader.range(stateMachineRange(this.groupId, [FENCED]))) {
      const { queue, index } = this.#parseRegistryKey(key)
      this.#fenced.add(idOf(queue, index))
      if (value.length > 0) this.#fencedBy.set(idOf(queue, index), Number(decoder.decode(value)))
    }
    // Retirements in seq order (the tuple codec orders integers numerically).
    for (const [key, value] of await this.#reader.range(stateMachineRange(this.groupId, [RETIRED]))) {
      const seq = decodeTuple(key).at(-1) as number
      const [queue, index, atMs] = decodeTuple(value) as [string, number, number]
      this.#retired.set(idOf(queue, index), { seq, queue, index, atMs })
    }
    const next = await this.#reader.get(stateMachineKey(this.groupId, [RETIRED_NEXT]))
    if (next) this.#retiredNext = decodeTuple(next)[0] as number
    for (const [key, value] of await this.#reader.range(stateMachineRange(this.groupId, [IMPORTING]))) {
      const { queue, index } = this.#parseRegistryKey(key)
      this.#imports.set(idOf(queue, index), JSON.parse(decoder.decode(value)) as ImportSession)
    }
    for (const [key, value] of await this.#reader.range(stateMachineRange(this.groupId, [IMPORTED]))) {
      const { queue, index } = this.#parseRegistryKey(key)
      this.#imported.set(idOf(queue, index), Number(decoder.decode(value)))
    }
    for (const [key, value] of await this.#reader.range(stateMachineRange(this.groupId, [ABORTED]))) {
      const { queue, index } = this.#parseRegistryKey(key)
      this.#aborted.set(idOf(queue, index), Number(decoder.decode(value)))
    }
    for (const [key, value] of await this.#reader.range(stateMachineRange(this.groupId, [CLOCK_OFFSET]))) {
      const { queue, index } = this.#parseRegistryKey(key)
      this.#clockOffsets.set(idOf(queue, index), Number(decoder.decode(value)))
    }
    const registry = stateMachineRange(this.groupId, [REGISTRY])
    for (const [key, value] of await this.#reader.range({ gte: registry.gte, lt: registry.lt })) {
      const config = JSON.parse(decoder.decode(value)) as Partial<PartitionConfig>
      const { queue, index } = this.#parseRegistryKey(key)
      this.#partitions.set(
        idOf(queue, index),
        await QueuePartition.open(this.#reader, this.#prefix(queue, index), config),
      )
    }
  }

  #retiredKey(seq: number): Uint8Array {
    return stateMachineKey(this.groupId, [RETIRED, seq])
  }

  #registryKey(queue: string, index: number): Uint8Array {
    return this.#key(REGISTRY, queue, index)
  }

  #key(kind: string, queue: string, index: number): Uint8Array {
    return stateMachineKey(this.groupId, [kind, queue, index])
  }

  #parseRegistryKey(key: Uint8Array): { queue: string; index: number } {
    // A registry (or fence, import) key is (…, kind, queue, index).
    const tuple = decodeTuple(key)
    return { queue: tuple[tuple.length - 2] as string, index: tuple[tuple.length - 1] as number }
  }

  #dataRange(queue: string, index: number): { gte: Uint8Array; lt: Uint8Array } {
    return stateMachineRange(this.groupId, [PARTITION_DATA, queue, index])
  }

  #prefix(queue: string, index: number): Uint8Array {
    return stateMachineKey(this.groupId, [PARTITION_DATA, queue, index])
  }
}

const EMPTY = new Uint8Array(0)

function settled(): Promise<void> {
  return Promise.resolve()
}

function idOf(queue: string, index: number): string {
  return `${queue}/${index}`
}

function refused(reason: RefusalReason, message: string): DataApplied {
  return { result: { type: 'refused', reason, message }, ops: [], written: NOTHING }
}

function startsWith(key: Uint8Array, prefix: Uint8Array): boolean {
  if (key.length < prefix.length) return false
  for (let i = 0; i < prefix.length; i++) if (key[i] !== prefix[i]) return false
  return true
}
