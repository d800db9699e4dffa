import { Buffer } from 'node:buffer'
import type { ConfState, Entry, EntryType, HardState, SnapshotMeta } from '@mq/raft-core'
import { crc32c } from './crc32c'

/**
 * The value encodings of the Raft log store's records. Every record is
 *
 *   crc32c u32 big-endian (of every byte after it) | format u8 | body
 *
 * so a flipped bit, a torn write or a record copied under the wrong key is detected on
 * read. Integers in bodies are unsigned LEB128 varints (up to 2^53 - 1); strings are a
 * varint byte length then UTF-8. Decoders return a reason string instead of throwing, so
 * the store can raise one CorruptRecordError that names the group and the index.
 *
 *   entry          format 1 | type u8 | index | term | timestampMs | data (the rest)
 *   hard state     format 1 | term | commit | vote (string)
 *   log start      format 1 | index | term            (the last discarded entry)
 *   clock offset   format 1 | sign u8 (0: +, 1: −) | magnitude   (milliseconds)
 *   snapshot meta  format 1 | index | term | voters | learners | votersOutgoing |
 *                  learnersNext (each: count, then strings) | dataBytes | chunkCount | dataCrc |
 *                  [timestampMs]   (when the snapshot has one; records before 2026-12-05 lack it)
 *   snapshot chunk format 1 | bytes (the rest)
 */

export const RECORD_FORMAT = 1
/** Bytes of the crc and format byte in front of every record body. */
export const RECORD_HEADER_BYTES = 5

const utf8 = new TextEncoder()
/** `ignoreBOM`: a string that starts with U+FEFF keeps it (by default decode drops it, and two names that differ by it become one). */
const utf8Strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** A growable output buffer for one record. */
class Writer {
  buf: Uint8Array
  at = RECORD_HEADER_BYTES
  constructor(capacity: number) {
    // Node's pooled allocation: far cheaper than a fresh ArrayBuffer per small record. Only
    // written bytes are ever exposed (`finish()` cuts the view to them).
    this.buf = Buffer.allocUnsafe(capacity)
  }
  private room(n: number): void {
    if (this.at + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n))
    next.set(this.buf.subarray(0, this.at))
    this.buf = next
  }
  u8(n: number): void {
    this.room(1)
    this.buf[this.at++] = n
  }
  varint(n: number): void {
    this.room(8)
    if (n < 0x80) {
      this.buf[this.at++] = n
      return
    }
    while (n >= 0x80) {
      this.buf[this.at++] = (n % 0x80) | 0x80
      n = Math.floor(n / 0x80)
    }
    this.buf[this.at++] = n
  }
  bytes(u: Uint8Array): void {
    this.room(u.length)
    this.buf.set(u, this.at)
    this.at += u.length
  }
  string(s: string): void {
    const u = utf8.encode(s)
    this.varint(u.length)
    this.bytes(u)
  }
  /** Seals the record: writes the format byte and the crc; returns the exact bytes. */
  finish(): Uint8Array {
    const out = this.at === this.buf.length ? this.buf : this.buf.subarray(0, this.at)
    out[4] = RECORD_FORMAT
    return sealRecord(out)
  }
}

/** Writes the crc of every byte after it into a record's first 4 bytes, in place; returns it. */
export function sealRecord(out: Uint8Array): Uint8Array {
  const crc = crc32c(out, 4, out.length)
  out[0] = crc >>> 24
  out[1] = (crc >>> 16) & 0xff
  out[2] = (crc >>> 8) & 0xff
  out[3] = crc & 0xff
  return out
}

/** A reader over one record's body; throws a plain string on malformed input. */
class Reader {
  at = RECORD_HEADER_BYTES
  constructor(readonly buf: Uint8Array) {}
  u8(): number {
    if (this.at >= this.buf.length) throw 'truncated'
    return this.buf[this.at++] as number
  }
  varint(): number {
    let n = 0
    let scale = 1
    for (let i = 0; i < 8; i++) {
      const b = this.u8()
      n += (b & 0x7f) * scale
      if ((b & 0x80) === 0) {
        if (!Number.isSafeInteger(n)) throw 'integer out of range'
        return n
      }
      scale *= 0x80
    }
    throw 'varint too long'
  }
  string(): string {
    const len = this.varint()
    if (this.at + len > this.buf.length) throw 'truncated string'
    const s = utf8Strict.decode(this.buf.subarray(this.at, this.at + len))
    this.at += len
    return s
  }
  rest(): Uint8Array {
    const out = new Uint8Array(this.buf.subarray(this.at))
    this.at = this.buf.length
    return out
  }
  /** Whether the body is read to its end. */
  get done(): boolean {
    return this.at === this.buf.length
  }
  end(): void {
    if (!this.done) throw 'trailing bytes'
  }
}

/** Checks a record's crc and format; returns a reason when it fails, undefined when sound. */
function checkHeader(rec: Uint8Array): string | undefined {
  if (rec.length < RECORD_HEADER_BYTES) return `record of ${rec.length} bytes is shorter than its header`
  const stored =
    (((rec[0] as number) << 24) |
      ((rec[1] as number) << 16) |
      ((rec[2] as number) << 8) |
      (rec[3] as number)) >>>
    0
  const actual = crc32c(rec, 4, rec.length)
  if (stored !== actual) return `checksum mismatch (stored ${hex32(stored)}, computed ${hex32(actual)})`
  if (rec[4] !== RECORD_FORMAT) return `unknown record format ${rec[4]}`
  return undefined
}

function hex32(n: number): string {
  return `0x${n.toString(16).padStart(8, '0')}`
}

/** Result of a decode: the value, or why the bytes are not a sound record. */
export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string }

function decodeWith<T>(rec: Uint8Array, body: (r: Reader) => T): Decoded<T> {
  const bad = checkHeader(rec)
  if (bad) return { ok: false, reason: bad }
  try {
    return { ok: true, value: body(new Reader(rec)) }
  } catch (err) {
    return {
      ok: false,
      reason: typeof err === 'string' ? err : err instanceof Error ? err.message : String(err),
    }
  }
}

/** Bytes of `n` as an unsigned LEB128 varint. */
function varintBytes(n: number): number {
  let len = 1
  while (n >= 0x80) {
    n = Math.floor(n / 0x80)
    len++
  }
  return len
}

export function encodeEntry(e: Entry): Uint8Array {
  // Sized exactly, so `finish()` returns the buffer without a copy.
  const w = new Writer(
    RECORD_HEADER_BYTES +
      1 +
      varintBytes(e.index) +
      varintBytes(e.term) +
      varintBytes(e.timestampMs) +
      e.data.length,
  )
  w.u8(e.type)
  w.varint(e.index)
  w.varint(e.term)
  w.varint(e.timestampMs)
  w.bytes(e.data)
  return w.finish()
}

export function decodeEntry(rec: Uint8Array): Decoded<Entry> {
  return decodeWith(rec, (r) => {
    const type = r.u8()
    if (type !== 0 && type !== 1) throw `unknown entry type ${type}`
    const index = r.varint()
    const term = r.varint()
    const timestampMs = r.varint()
    const data = r.rest()
    return { index, term, type: type as EntryType, timestampMs, data }
  })
}

export function encodeHardState(h: HardState): Uint8Array {
  const w = new Writer(32 + h.vote.length * 3)
  w.varint(h.term)
  w.varint(h.commit)
  w.string(h.vote)
  return w.finish()
}

export function decodeHardState(rec: Uint8Array): Decoded<HardState> {
  return decodeWith(rec, (r) => {
    const term = r.varint()
    const commit = r.varint()
    const vote = r.string()
    r.end()
    return { term, vote, commit }
  })
}

/** A group clock offset: a signed whole number of milliseconds. */
export function encodeClockOffset(ms: number): Uint8Array {
  const w = new Writer(16)
  w.u8(ms < 0 ? 1 : 0)
  w.varint(Math.abs(ms))
  return w.finish()
}

export function decodeClockOffset(rec: Uint8Array): Decoded<number> {
  return decodeWith(rec, (r) => {
    const sign = r.u8()
    if (sign !== 0 && sign !== 1) throw `bad sign byte ${sign}`
    const magnitude = r.varint()
    r.end()
    return sign === 1 ? -magnitude : magnitude
  })
}

/** The last entry the log discarded (index 0, term 0 when none): firstIndex() - 1 and its term. */
export interface LogStart {
  readonly index: number
  readonly term: number
}

export function encodeLogStart(s: LogStart): Uint8Array {
  const w = new Writer(24)
  w.varint(s.index)
  w.varint(s.term)
  return w.finish()
}

export function decodeLogStart(rec: Uint8Array): Decoded<LogStart> {
  return decodeWith(rec, (r) => {
    const index = r.varint()
    const term = r.varint()
    r.end()
    return { index, term }
  })
}

/** The stored description of a snapshot: its Raft metadata and how its data is chunked. */
export interface StoredSnapshotMeta {
  readonly meta: SnapshotMeta
  readonly dataBytes: number
  readonly chunkCount: number
  readonly dataCrc: number
}

export function encodeSnapshotMeta(s: StoredSnapshotMeta): Uint8Array {
  const w = new Writer(64)
  w.varint(s.meta.index)
  w.varint(s.meta.term)
  const c: ConfState = s.meta.conf
  for (const list of [c.voters, c.learners, c.votersOutgoing, c.learnersNext]) {
    w.varint(list.length)
    for (const id of list) w.string(id)
  }
  w.varint(s.dataBytes)
  w.varint(s.chunkCount)
  w.varint(s.dataCrc)
  // Trailing, when set: the stamp floor of a log compacted to this snapshot (raft-core).
  const stamp = s.meta.timestampMs
  if (stamp !== undefined && Number.isSafeInteger(stamp) && stamp >= 0) w.varint(stamp)
  return w.finish()
}

export function decodeSnapshotMeta(rec: Uint8Array): Decoded<StoredSnapshotMeta> {
  return decodeWith(rec, (r) => {
    const index = r.varint()
    const term = r.varint()
    const lists: string[][] = []
    for (let l = 0; l < 4; l++) {
      const n = r.varint()
      if (n > rec.length) throw 'member count larger than the record'
      const list: string[] = []
      for (let i = 0; i < n; i++) list.push(r.string())
      lists.push(list)
    }
    const [voters, learners, votersOutgoing, learnersNext] = lists as [string[], string[], string[], string[]]
    const dataBytes = r.varint()
    const chunkCount = r.varint()
    const dataCrc = r.varint()
    const timestampMs = r.done ? undefined : r.varint()
    r.end()
    return {
      meta: {
        index,
        term,
        conf: { voters, learners, votersOutgoing, learnersNext },
        ...(timestampMs === undefined ? {} : { timestampMs }),
      },
      dataBytes,
      chunkCount,
      dataCrc,
    }
  })
}

export function encodeChunk(bytes: Uint8Array): Uint8Array {
  const w = new Writer(RECORD_HEADER_BYTES + bytes.length)
  w.bytes(bytes)
  return w.finish()
}

export function decodeChunk(rec: Uint8Array): Decoded<Uint8Array> {
  return decodeWith(rec, (r) => r.rest())
}
