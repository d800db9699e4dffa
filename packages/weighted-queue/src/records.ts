import { ByteReader, ByteWriter, utf8Length } from './bytes'
import { decodeHeaders, encodeHeaders } from './codec'
import { CONFIG_NUMBER_FIELDS, type QueueConfig, SchedulingMode, TRAILING_CONFIG_FIELDS } from './config'
import { invariant } from './errors'

/** One scratch writer for every record: encoding is synchronous, and finish() copies out. */
const scratch = new ByteWriter(1024)

/**
 * The values stored under the partition's keys (see keys.ts), each with its encoder and
 * decoder. All are varint-packed; a stored value that does not decode is corruption and
 * fails an invariant.
 */

/** Waiting: an ordered key's message behind an earlier one of its key (orderedKeys). */
export const MessageState = { Ready: 0, Delayed: 1, Leased: 2, Dead: 3, Waiting: 4 } as const
export type MessageState = (typeof MessageState)[keyof typeof MessageState]

/** The mutable state of one message (its body is stored apart and never rewritten). */
export interface MessageMeta {
  weight: number
  state: MessageState
  /** Every delivery so far; the last lease id is `${id}.${deliveries}`. */
  deliveries: number
  /** Deliveries since enqueue or the last redrive; compared with maxDeliveries. */
  attempts: number
  enqueuedAtMs: number
  /**
   * Position in the index of its state: ready order, lease deadline, due time or dead order;
   * when waiting, its not-before time (0: none).
   */
  slot: number
  /** Ready band when ready, else 0. */
  band: number
  /** The lease group (its sequence number, see keys.ts) holding the lease when leased, else 0. */
  group: number
  /**
   * The encoded body (see encodeBody) when it is small enough to live in this record; else
   * undefined and the body has a record of its own (so a large body is never rewritten).
   */
  inlineBody: Uint8Array | undefined
  /**
   * The message's key (UTF-8) when its partition orders keys (orderedKeys), else undefined:
   * what a message that leaves for good hands its key's turn on by.
   */
  orderKey: Uint8Array | undefined
  /**
   * When the message TTL counts from, if not from `enqueuedAtMs`: the time of the redrive that
   * restarted it (`restartTtl`); else undefined.
   */
  ttlFromMs: number | undefined
}

/** Encoded bodies up to this size live inside the message record. */
export const INLINE_BODY_BYTES_MAX = 2048

export function encodeMeta(m: MessageMeta): Uint8Array {
  return writeMeta(scratch.reset(), m).finishInSlab()
}

function writeMeta(w: ByteWriter, m: MessageMeta): ByteWriter {
  w.varint(m.weight)
    .u8(m.state)
    .varint(m.deliveries)
    .varint(m.attempts)
    .varint(m.enqueuedAtMs)
    .varint(m.slot)
    .u8(m.band)
    .varint(m.group)
  // Flags: 1 = an inline body follows (the rest), 2 = an order key comes first, 4 = the TTL's
  // start comes next. A record without an order key or a TTL start is the bytes of before
  // they existed (a replica of an earlier version cannot read one with them).
  w.u8(
    (m.inlineBody === undefined ? 0 : 1) |
      (m.orderKey === undefined ? 0 : 2) |
      (m.ttlFromMs === undefined ? 0 : 4),
  )
  if (m.orderKey !== undefined) w.bytes(m.orderKey)
  if (m.ttlFromMs !== undefined) w.varint(m.ttlFromMs)
  if (m.inlineBody !== undefined) w.raw(m.inlineBody)
  return w
}

export function decodeMeta(b: Uint8Array): MessageMeta {
  return readMeta(new ByteReader(b))
}

/** Reads a MessageMeta that ends its input. */
function readMeta(r: ByteReader): MessageMeta {
  const m: MessageMeta = {
    weight: r.varint(),
    state: r.u8() as MessageState,
    deliveries: r.varint(),
    attempts: r.varint(),
    enqueuedAtMs: r.varint(),
    slot: r.varint(),
    band: r.u8(),
    group: r.varint(),
    inlineBody: undefined,
    orderKey: undefined,
    ttlFromMs: undefined,
  }
  const flags = r.u8()
  if ((flags & 2) !== 0) m.orderKey = r.bytes()
  if ((flags & 4) !== 0) m.ttlFromMs = r.varint()
  if ((flags & 1) !== 0) m.inlineBody = r.rest()
  invariant(r.done && flags <= 7 && m.state <= MessageState.Waiting, 'message meta decodes')
  return m
}

export interface MessageBody {
  readonly body: Uint8Array
  readonly headers: Readonly<Record<string, string>>
  readonly key: string | undefined
}

/**
 * A message's size as its limits count it: body, header names and values, and key, in bytes
 * (`messageBytesMax` on enqueue, a lease's `bytesMax`, a listing's budget).
 */
export function messageBytes(m: {
  readonly body: Uint8Array
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly key?: string | undefined
}): number {
  let size = m.body.length
  if (m.headers !== undefined)
    for (const name of Object.keys(m.headers))
      size += utf8Length(name) + utf8Length(m.headers[name] as string)
  if (m.key !== undefined) size += utf8Length(m.key)
  return size
}

export function encodeBody(
  body: Uint8Array,
  headers: Readonly<Record<string, string>>,
  key: string | undefined,
): Uint8Array {
  const w = scratch.reset()
  w.bytes(body)
  encodeHeaders(w, headers)
  if (key === undefined) w.u8(0)
  else w.u8(1).string(key)
  return w.finishInSlab()
}

export function decodeBody(b: Uint8Array): MessageBody {
  const r = new ByteReader(b)
  const body = r.bytes()
  const headers = decodeHeaders(r)
  const key = r.u8() === 1 ? r.string() : undefined
  invariant(r.done, 'message body decodes')
  return { body, headers, key }
}

/** Counters of the partition and the scheduler's virtual time. */
export interface PartitionState {
  nextId: number
  readyOrder: number
  leaseGroupSeq: number
  deadOrder: number
  messages: number
  /** The largest timestamp applied so far; the clock never runs backwards. */
  lastNowMs: number
  virtualNum: number
  virtualDen: number
  /** The partition's counters (see PartitionCounters). */
  enqueued: number
  delivered: number
  acked: number
  nacked: number
  expired: number
  deadLettered: number
  /** Messages deleted because they outlived the message TTL. */
  discarded: number
  /** Messages waiting behind an earlier message of their key (orderedKeys); in `messages`. */
  waiting: number
}

export const PARTITION_STATE_INITIAL: PartitionState = {
  nextId: 1,
  readyOrder: 0,
  leaseGroupSeq: 0,
  deadOrder: 0,
  messages: 0,
  lastNowMs: 0,
  virtualNum: 0,
  virtualDen: 1,
  enqueued: 0,
  delivered: 0,
  acked: 0,
  nacked: 0,
  expired: 0,
  deadLettered: 0,
  discarded: 0,
  waiting: 0,
}

export function encodeState(s: PartitionState): Uint8Array {
  const w = scratch
    .reset()
    .varint(s.nextId)
    .varint(s.readyOrder)
    .varint(s.leaseGroupSeq)
    .varint(s.deadOrder)
    .varint(s.messages)
    .varint(s.lastNowMs)
    .varint(s.virtualNum)
    .varint(s.virtualDen)
    .varint(s.enqueued)
    .varint(s.delivered)
    .varint(s.acked)
    .varint(s.nacked)
    .varint(s.expired)
    .varint(s.deadLettered)
  // Written once nonzero (only with a message TTL, format level 8), or to keep the place of
  // `waiting`: before, the record reads as it did for a replica of an earlier version.
  if (s.discarded > 0 || s.waiting > 0) w.varint(s.discarded)
  // Likewise once nonzero (only with ordered keys).
  if (s.waiting > 0) w.varint(s.waiting)
  return w.finishInSlab()
}

export function decodeState(b: Uint8Array): PartitionState {
  const r = new ByteReader(b)
  const s: PartitionState = {
    nextId: r.varint(),
    readyOrder: r.varint(),
    leaseGroupSeq: r.varint(),
    deadOrder: r.varint(),
    messages: r.varint(),
    lastNowMs: r.varint(),
    virtualNum: r.varint(),
    virtualDen: r.varint(),
    enqueued: r.varint(),
    delivered: r.varint(),
    acked: r.varint(),
    nacked: r.varint(),
    expired: r.varint(),
    deadLettered: r.varint(),
    discarded: 0,
    waiting: 0,
  }
  if (!r.done) s.discarded = r.varint()
  if (!r.done) s.waiting = r.varint()
  invariant(r.done, 'partition state decodes')
  return s
}

/** One weight's counts and its scheduler pass numerator. */
export interface WeightRecord {
  readonly ready: number
  readonly delayed: number
  readonly leased: number
  readonly dead: number
  readonly passNum: number
}

export function encodeWeight(w: WeightRecord): Uint8Array {
  return scratch
    .reset()
    .varint(w.ready)
    .varint(w.delayed)
    .varint(w.leased)
    .varint(w.dead)
    .varint(w.passNum)
    .finishInSlab()
}

export function decodeWeight(b: Uint8Array): WeightRecord {
  const r = new ByteReader(b)
  const w = {
    ready: r.varint(),
    delayed: r.varint(),
    leased: r.varint(),
    dead: r.varint(),
    passNum: r.varint(),
  }
  invariant(r.done, 'weight record decodes')
  return w
}

export function encodeConfig(c: QueueConfig): Uint8Array {
  const w = scratch.reset().u8(c.scheduling === SchedulingMode.Fair ? 1 : 2)
  // The fields after configVersion are left out from the first of them that is 0 with none
  // set after it: the record reads as before they existed.
  let end = CONFIG_NUMBER_FIELDS.length
  while (end > 0) {
    const name = CONFIG_NUMBER_FIELDS[end - 1] as (typeof CONFIG_NUMBER_FIELDS)[number]
    if (name === 'configVersion' || !TRAILING_CONFIG_FIELDS.has(name) || c[name] !== 0) break
    end--
  }
  for (let i = 0; i < end; i++) w.varint(c[CONFIG_NUMBER_FIELDS[i] as (typeof CONFIG_NUMBER_FIELDS)[number]])
  return w.finishInSlab()
}

export function decodeConfig(b: Uint8Array): QueueConfig {
  const r = new ByteReader(b)
  const out: Record<string, unknown> = {
    scheduling: r.u8() === 1 ? SchedulingMode.Fair : SchedulingMode.Strict,
  }
  for (const name of CONFIG_NUMBER_FIELDS) {
    // A config stored before configVersion (or a later field) existed ends without it.
    out[name] = TRAILING_CONFIG_FIELDS.has(name) && r.done ? 0 : r.varint()
  }
  invariant(r.done, 'config decodes')
  return out as unknown as QueueConfig
}

/** A dedup entry: the id the key was first enqueued as, valid while now < expiresAtMs. */
export interface DedupRecord {
  readonly id: number
  readonly expiresAtMs: number
}

export function encodeDedup(d: DedupRecord): Uint8Array {
  return scratch.reset().varint(d.id).varint(d.expiresAtMs).finishInSlab()
}

export function decodeDedup(b: Uint8Array): DedupRecord {
  const r = new ByteReader(b)
  const d = { id: r.varint(), expiresAtMs: r.varint() }
  invariant(r.done, 'dedup record decodes')
  return d
}

/**
 * A lease attempt (LeaseCommand.attempt): the lease group its lease made, whose key is
 * (deadlineMs, group); the record expires at that deadline.
 */
export interface AttemptRecord {
  readonly deadlineMs: number
  readonly group: number
  /** The answers after the first that handed its leases out again (see NackCommand.attempt). */
  readonly answers: number
}

export function encodeAttempt(a: AttemptRecord): Uint8Array {
  return scratch.reset().varint(a.deadlineMs).varint(a.group).varint(a.answers).finishInSlab()
}

export function decodeAttempt(b: Uint8Array): AttemptRecord {
  const r = new ByteReader(b)
  const a = { deadlineMs: r.varint(), group: r.varint(), answers: r.varint() }
  invariant(r.done, 'attempt record decodes')
  return a
}

/**
 * One batch of an idempotent producer: its sequence and the ids it was given, as runs of
 * consecutive ids (`[first, length, first, length, …]`; see `idRuns`). A batch's ids are
 * consecutive but for repeated dedup keys, so a batch of any size is usually one run: five
 * remembered batches of 10,000 messages take a few numbers, in memory and on disk.
 */
export interface ProducerBatch {
  readonly seq: number
  readonly runs: readonly number[]
}

/**
 * An idempotent producer's recent batches, oldest first, at most PRODUCER_BATCHES_KEPT (the
 * last holds its highest sequence); valid while now < expiresAtMs.
 */
export interface ProducerRecord {
  readonly batches: readonly ProducerBatch[]
  readonly expiresAtMs: number
}

/**
 * How many of a producer's batches are remembered: a retry of any of them returns its ids.
 * A pipelining producer keeps the sequences it has in flight per partition within this many.
 */
export const PRODUCER_BATCHES_KEPT = 5

/** `ids` as runs of consecutive ids: `[first, length, …]`. */
export function idRuns(ids: readonly number[]): number[] {
  const runs: number[] = []
  let i = 0
  while (i < ids.length) {
    const first = ids[i] as number
    let n = 1
    while (i + n < ids.length && ids[i + n] === first + n) n++
    runs.push(first, n)
    i += n
  }
  return runs
}

/** The ids of `runs` (see idRuns). */
export function runIds(runs: readonly number[]): number[] {
  const ids: number[] = []
  for (let r = 0; r < runs.length; r += 2) {
    const first = runs[r] as number
    const n = runs[r + 1] as number
    for (let i = 0; i < n; i++) ids.push(first + i)
  }
  return ids
}

/**
 * Bytes: the last sequence, expiresAtMs, 0 (the first layout's id count: that layout held one
 * batch, its ids listed after it and nothing more), then the number of batches and each as
 * its sequence, its run count and its (first id, length) runs.
 */
export function encodeProducer(p: ProducerRecord): Uint8Array {
  const last = p.batches[p.batches.length - 1]
  invariant(last !== undefined, 'a producer record holds a batch')
  const w = scratch.reset().varint(last.seq).varint(p.expiresAtMs).varint(0).varint(p.batches.length)
  for (const b of p.batches) {
    w.varint(b.seq).varint(b.runs.length / 2)
    for (const v of b.runs) w.varint(v)
  }
  return w.finishInSlab()
}

export function decodeProducer(b: Uint8Array): ProducerRecord {
  const r = new ByteReader(b)
  const seq = r.varint()
  const expiresAtMs = r.varint()
  const n = r.varint()
  if (n > 0 || r.done) {
    // The first layout: the one batch's ids, listed.
    const ids: number[] = []
    for (let i = 0; i < n; i++) ids.push(r.varint())
    invariant(r.done, 'producer record decodes')
    return { batches: [{ seq, runs: idRuns(ids) }], expiresAtMs }
  }
  const count = r.varint()
  invariant(count >= 1 && count <= PRODUCER_BATCHES_KEPT, 'producer record holds 1..5 batches')
  const batches: ProducerBatch[] = []
  for (let k = 0; k < count; k++) {
    const batchSeq = r.varint()
    const runCount = r.varint()
    invariant(runCount <= b.length, 'producer record decodes')
    const runs: number[] = []
    for (let j = 0; j < runCount * 2; j++) runs.push(r.varint())
    batches.push({ seq: batchSeq, runs })
  }
  invariant(r.done && batches[count - 1]?.seq === seq, 'producer record decodes')
  return { batches, expiresAtMs }
}

/** Slots per stored chunk of the share window: a lease rewrites only the chunks it touched. */
export const WINDOW_CHUNK_SLOTS = 64

/**
 * The ring of the last scheduled weights, for the achieved share in stats: `size` slots of
 * big-endian u16 weights in `ring`, the next write at `pos`, `filled` slots in use. Stored
 * as a header (size, pos, filled) plus chunks of WINDOW_CHUNK_SLOTS slots.
 */
export interface ShareWindow {
  readonly size: number
  readonly ring: Uint8Array
  pos: number
  filled: number
  /** Chunks written since the last persist. */
  readonly dirtyChunks: Set<number>
}

export function newWindow(size: number): ShareWindow {
  return { size, ring: new Uint8Array(2 * size), pos: 0, filled: 0, dirtyChunks: new Set() }
}

export function windowAt(win: ShareWindow, i: number): number {
  return ((win.ring[2 * i] as number) << 8) | (win.ring[2 * i + 1] as number)
}

export function windowPush(win: ShareWindow, weight: number): void {
  win.ring[2 * win.pos] = weight >>> 8
  win.ring[2 * win.pos + 1] = weight & 0xff
  win.dirtyChunks.add(Math.floor(win.pos / WINDOW_CHUNK_SLOTS))
  win.pos = (win.pos + 1) % win.size
  if (win.filled < win.size) win.filled++
}

/** The number of chunks a window of `size` slots is stored in. */
export function windowChunks(size: number): number {
  return Math.ceil(size / WINDOW_CHUNK_SLOTS)
}

export function encodeWindowHeader(win: ShareWindow): Uint8Array {
  return scratch.reset().varint(win.size).varint(win.pos).varint(win.filled).finishInSlab()
}

export function decodeWindowHeader(b: Uint8Array): ShareWindow {
  const r = new ByteReader(b)
  const win = newWindow(r.varint())
  win.pos = r.varint()
  win.filled = r.varint()
  invariant(r.done && win.filled <= win.size && win.pos < Math.max(1, win.size), 'share window decodes')
  return win
}

/** The bytes of chunk `c` (a copy). */
export function windowChunk(win: ShareWindow, c: number): Uint8Array {
  const from = 2 * c * WINDOW_CHUNK_SLOTS
  const to = Math.min(win.ring.length, from + 2 * WINDOW_CHUNK_SLOTS)
  const out = slabCopy(win.ring.subarray(from, to))
  return out
}

/** Loads chunk `c` from its stored bytes. */
export function loadWindowChunk(win: ShareWindow, c: number, bytes: Uint8Array): void {
  const from = 2 * c * WINDOW_CHUNK_SLOTS
  invariant(from + bytes.length <= win.ring.length, 'share window chunk fits')
  win.ring.set(bytes, from)
}

function slabCopy(b: Uint8Array): Uint8Array {
  return scratch.reset().raw(b).finishInSlab()
}

/** A lease group's members: its (id, delivery) pairs as one flat list. */
export function encodeIdList(values: readonly number[]): Uint8Array {
  const w = scratch.reset().varint(values.length)
  for (const v of values) w.varint(v)
  return w.finishInSlab()
}

export function decodeIdList(b: Uint8Array): number[] {
  const r = new ByteReader(b)
  const n = r.varint()
  const out: number[] = []
  for (let i = 0; i < n; i++) out.push(r.varint())
  invariant(r.done, 'id list decodes')
  return out
}

/** A count (a lease group's live leases). */
export function encodeCount(n: number): Uint8Array {
  return scratch.reset().varint(n).finishInSlab()
}

export function decodeCount(b: Uint8Array): number {
  const r = new ByteReader(b)
  const n = r.varint()
  invariant(r.done, 'count decodes')
  return n
}

/**
 * A ready-index value: the id and, for a message never delivered, its whole record (such a
 * message has no record of its own: enqueue writes one key); else just the id (kind 0).
 */
export function encodeReadyValue(id: number, meta: MessageMeta | undefined): Uint8Array {
  if (meta === undefined) return scratch.reset().u8(0).varint(id).finishInSlab()
  return writeMeta(scratch.reset().u8(1).varint(id), meta).finishInSlab()
}

export function decodeReadyValue(b: Uint8Array): {
  readonly id: number
  readonly meta: MessageMeta | undefined
} {
  const r = new ByteReader(b)
  const kind = r.u8()
  const id = r.varint()
  if (kind === 0) {
    invariant(r.done, 'ready value decodes')
    return { id, meta: undefined }
  }
  invariant(kind === 1, 'ready value kind')
  return { id, meta: readMeta(r) }
}
