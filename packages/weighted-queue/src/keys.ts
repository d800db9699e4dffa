import { getU64, putU64, slab } from './bytes'

/**
 * The partition's key layout, defined once. Every key is `prefix ‖ tag ‖ fields`, with
 * integers as fixed-width big-endian so that bytewise order is numeric order (kv-storage's
 * tuple codec had not landed when this was written; this layout is private to the package).
 * A message that was never delivered lives in its ready (or delayed) entry alone, record and
 * all; once delivered it has a MessageMeta record by id, and index entries hold its id.
 *
 * | tag  | fields                          | value                 | what                        |
 * | 0x01 |                                 | PartitionState        | counters, clock, scheduler V |
 * | 0x02 |                                 | QueueConfig           | the partition's config      |
 * | 0x03 |                                 | share window header   | size, next slot, filled     |
 * | 0x03 | chunk u16                       | 64 u16 weights        | last N scheduled weights    |
 * | 0x04 | weight u16                      | WeightRecord          | counts + scheduler pass     |
 * | 0x10 | id u64                          | MessageMeta           | delivered messages only     |
 * | 0x11 | id u64                          | MessageBody           | bodies over 2 KiB           |
 * | 0x20 | weight u16, band u8, order u64  | id (+ MessageMeta)    | ready index (FIFO per band) |
 * | 0x21 | deadlineMs u64, group u64       | (id, delivery) list   | leases by deadline, one entry per lease/extend command |
 * | 0x22 | dueMs u64, id u64               | (MessageMeta)         | delayed by due time         |
 * | 0x23 | deadOrder u64                   | id u64                | dead-letter sub-queue       |
 * | 0x24 | group u64                       | count                 | live leases of a lease group (both deleted at 0) |
 * | 0x25 | message key (utf-8)             | (holder, head, tail)  | an ordered key's turn (orderedKeys) |
 * | 0x26 | key length u16, key, seq u64    | id (+ MessageMeta)    | an ordered key's line: seq in [head, tail) |
 * | 0x30 | dedup key (utf-8)               | DedupRecord           | dedup window                |
 * | 0x31 | producer id (utf-8)             | ProducerRecord        | idempotent producers        |
 * | 0x32 | expiresAtMs u64, kind u8, name  | (empty)               | dedup/producer/attempt expiry |
 * | 0x33 | lease attempt id (utf-8)        | AttemptRecord         | a lease attempt's lease group |
 */
export const KeyTag = {
  State: 0x01,
  Config: 0x02,
  Window: 0x03,
  Weight: 0x04,
  Message: 0x10,
  Body: 0x11,
  Ready: 0x20,
  LeaseDeadline: 0x21,
  Delayed: 0x22,
  Dead: 0x23,
  LeaseLive: 0x24,
  KeyTurn: 0x25,
  KeyWaiting: 0x26,
  Dedup: 0x30,
  Producer: 0x31,
  Expiry: 0x32,
  Attempt: 0x33,
} as const
export type KeyTag = (typeof KeyTag)[keyof typeof KeyTag]

/** Ready bands: returned messages (expired, nacked) go ahead of fresh ones in their weight. */
export const ReadyBand = { Returned: 0, Fresh: 1 } as const
export type ReadyBand = (typeof ReadyBand)[keyof typeof ReadyBand]

/** What an expiry-index entry expires. */
export const ExpiryKind = { Dedup: 0, Producer: 1, Attempt: 2 } as const
export type ExpiryKind = (typeof ExpiryKind)[keyof typeof ExpiryKind]

/** A half-open key range [gte, lt). */
export interface KeySpan {
  readonly gte: Uint8Array
  readonly lt: Uint8Array
}

/** Builds and parses the keys of one partition. */
export class PartitionKeys {
  private readonly p: number

  constructor(readonly prefix: Uint8Array) {
    this.p = prefix.length
  }

  private make(tag: KeyTag, fieldBytes: number): Uint8Array {
    const k = slab.alloc(this.p + 1 + fieldBytes)
    k.set(this.prefix, 0)
    k[this.p] = tag
    return k
  }

  /** `prefix ‖ tag ‖ u64(value)`. */
  private u64Key(tag: KeyTag, value: number): Uint8Array {
    const k = this.make(tag, 8)
    putU64(k, this.p + 1, value)
    return k
  }

  /** `prefix ‖ tag ‖ u64(first) ‖ u64(second)`. */
  private u64PairKey(tag: KeyTag, first: number, second: number): Uint8Array {
    const k = this.make(tag, 16)
    putU64(k, this.p + 1, first)
    putU64(k, this.p + 9, second)
    return k
  }

  /** The whole partition: [prefix, prefix+1). */
  all(): KeySpan {
    return { gte: this.prefix, lt: prefixEnd(this.prefix) }
  }

  /** Every key with `tag`. */
  tagSpan(tag: KeyTag): KeySpan {
    const gte = this.make(tag, 0)
    const lt = this.make(tag, 0)
    lt[this.p] = tag + 1
    return { gte, lt }
  }

  state(): Uint8Array {
    return this.make(KeyTag.State, 0)
  }
  config(): Uint8Array {
    return this.make(KeyTag.Config, 0)
  }
  window(): Uint8Array {
    return this.make(KeyTag.Window, 0)
  }
  windowChunk(c: number): Uint8Array {
    const k = this.make(KeyTag.Window, 2)
    k[this.p + 1] = c >>> 8
    k[this.p + 2] = c & 0xff
    return k
  }
  windowChunkOf(key: Uint8Array): number {
    return ((key[this.p + 1] as number) << 8) | (key[this.p + 2] as number)
  }

  weight(w: number): Uint8Array {
    const k = this.make(KeyTag.Weight, 2)
    k[this.p + 1] = w >>> 8
    k[this.p + 2] = w & 0xff
    return k
  }
  /** The weight of a weight key, or of a ready key (both put it right after their tag). */
  weightOf(key: Uint8Array): number {
    return ((key[this.p + 1] as number) << 8) | (key[this.p + 2] as number)
  }

  message(id: number): Uint8Array {
    return this.u64Key(KeyTag.Message, id)
  }
  body(id: number): Uint8Array {
    return this.u64Key(KeyTag.Body, id)
  }

  ready(w: number, band: ReadyBand, order: number): Uint8Array {
    const k = this.make(KeyTag.Ready, 11)
    k[this.p + 1] = w >>> 8
    k[this.p + 2] = w & 0xff
    k[this.p + 3] = band
    putU64(k, this.p + 4, order)
    return k
  }
  /** The ready sub-queue of weight `w`, both bands, head first. */
  readySpan(w: number): KeySpan {
    const gte = this.make(KeyTag.Ready, 2)
    gte[this.p + 1] = w >>> 8
    gte[this.p + 2] = w & 0xff
    const lt = this.make(KeyTag.Ready, 2)
    lt[this.p + 1] = (w + 1) >>> 8
    lt[this.p + 2] = (w + 1) & 0xff
    return { gte, lt }
  }

  /** `tag ‖ u64(timeMs)`: the bound below every entry of a time index at or after `timeMs`. */
  timeBound(tag: KeyTag, timeMs: number): Uint8Array {
    return this.u64Key(tag, timeMs)
  }

  /** A lease group: the leases one command made or extended, all due at `deadlineMs`. */
  leaseGroup(deadlineMs: number, group: number): Uint8Array {
    return this.u64PairKey(KeyTag.LeaseDeadline, deadlineMs, group)
  }
  /** How many leases of lease group `group` are still held. */
  leaseLive(group: number): Uint8Array {
    return this.u64Key(KeyTag.LeaseLive, group)
  }

  /** A delayed message by due time. */
  timed(tag: typeof KeyTag.Delayed, timeMs: number, id: number): Uint8Array {
    return this.u64PairKey(tag, timeMs, id)
  }
  /** The time field of a timed or expiry key. */
  timeOf(key: Uint8Array): number {
    return getU64(key, this.p + 1)
  }
  /** The id field of a timed key, the group field of a lease group key. */
  timedIdOf(key: Uint8Array): number {
    return getU64(key, this.p + 9)
  }

  dead(order: number): Uint8Array {
    return this.u64Key(KeyTag.Dead, order)
  }
  deadOrderOf(key: Uint8Array): number {
    return getU64(key, this.p + 1)
  }

  /** An ordered key's turn: which message holds it, and the seqs [head, tail) of the key's line. */
  keyTurn(name: Uint8Array): Uint8Array {
    const k = this.make(KeyTag.KeyTurn, name.length)
    k.set(name, this.p + 1)
    return k
  }
  /** A message waiting behind an earlier one of its ordered key, at `seq` in the key's line. */
  keyWaiting(name: Uint8Array, seq: number): Uint8Array {
    const k = this.make(KeyTag.KeyWaiting, 2 + name.length + 8)
    k[this.p + 1] = name.length >>> 8
    k[this.p + 2] = name.length & 0xff
    k.set(name, this.p + 3)
    putU64(k, this.p + 3 + name.length, seq)
    return k
  }
  /** The line seq of a waiting entry's key. */
  keyWaitingSeqOf(key: Uint8Array): number {
    return getU64(key, key.length - 8)
  }
  /** The key (UTF-8) of a waiting entry's key. */
  keyWaitingNameOf(key: Uint8Array): Uint8Array {
    const n = ((key[this.p + 1] as number) << 8) | (key[this.p + 2] as number)
    return key.subarray(this.p + 3, this.p + 3 + n)
  }

  dedup(name: Uint8Array): Uint8Array {
    const k = this.make(KeyTag.Dedup, name.length)
    k.set(name, this.p + 1)
    return k
  }
  producer(name: Uint8Array): Uint8Array {
    const k = this.make(KeyTag.Producer, name.length)
    k.set(name, this.p + 1)
    return k
  }
  attempt(name: Uint8Array): Uint8Array {
    const k = this.make(KeyTag.Attempt, name.length)
    k.set(name, this.p + 1)
    return k
  }
  expiry(expiresAtMs: number, kind: ExpiryKind, name: Uint8Array): Uint8Array {
    const k = this.make(KeyTag.Expiry, 9 + name.length)
    putU64(k, this.p + 1, expiresAtMs)
    k[this.p + 9] = kind
    k.set(name, this.p + 10)
    return k
  }
  expiryKindOf(key: Uint8Array): ExpiryKind {
    return key[this.p + 9] as ExpiryKind
  }
  expiryNameOf(key: Uint8Array): Uint8Array {
    return key.subarray(this.p + 10)
  }
}

/** The smallest key greater than every key that starts with `prefix` (prefix must not be all 0xff). */
export function prefixEnd(prefix: Uint8Array): Uint8Array {
  const end = prefix.slice()
  for (let i = end.length - 1; i >= 0; i--) {
    if ((end[i] as number) < 0xff) {
      end[i] = (end[i] as number) + 1
      return end.subarray(0, i + 1).slice()
    }
  }
  throw new Error('prefixEnd: a prefix of only 0xff bytes has no end')
}

/** Big-endian u64 value holding a message id. */
export function idValue(id: number): Uint8Array {
  const v = slab.alloc(8)
  putU64(v, 0, id)
  return v
}
