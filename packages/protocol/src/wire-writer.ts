/** Bytes reserved for a nested message's length when it starts (fits lengths below 16 KiB). */
const RESERVED_LENGTH_BYTES = 2
const SCRATCH_BYTES = 64 * 1024
/** The first buffer of a writer that found the scratch taken (Node's pool serves it). */
const OWN_BYTES = 1024
/** A scratch buffer grown past this is not kept for the next writer. */
const SCRATCH_KEPT_BYTES_MAX = 1024 * 1024
/** Results of this size or more are handed over in the buffer they were written to, not copied. */
const HANDED_OVER_BYTES_MIN = 256 * 1024
const EMPTY = Buffer.alloc(0)

/**
 * The buffer writers encode into, taken by one writer at a time (encoding is synchronous) and
 * given back at `finish()`, which copies the bytes out: one allocation of the exact size per
 * message instead of a buffer doubled from small (a result of 256 KiB or more keeps the buffer
 * and the next writer gets a fresh scratch). Undefined while a writer holds it; a writer
 * that finds it taken (or never finishes) has a buffer of its own.
 */
let scratch: Buffer | undefined = Buffer.allocUnsafe(SCRATCH_BYTES)
const TWO_32 = 4_294_967_296
const TWO_64 = 2 ** 64

/**
 * A protobuf writer for the generated codecs (`X.encode(message, new WireWriter())`) that
 * writes the same bytes as @bufbuild/protobuf's BinaryWriter into one growing buffer.
 * BinaryWriter collects varints in an array of numbers, turns each run of them into an array of
 * its own before every string or bytes field, encodes each string into a new array, and
 * copies every nested message into a new array when it ends (and again into its parent's):
 * a LeaseResponse of 512 messages or a RaftBatch of large entries cost thousands of
 * allocations and copies per call. Here a nested message reserves two bytes for its length at
 * `fork()`; `join()` writes the length there, moving the message's bytes when the length needs
 * another number of bytes (below 128 bytes, or 16 KiB and more). ASCII strings are written
 * byte by byte, others with Buffer#write, in place.
 *
 * Implements the part of BinaryWriter's interface the generated code calls; `finish()` returns
 * the bytes in a Buffer of their own, and the writer is not used after it.
 */
export class WireWriter {
  #buf: Buffer
  #pos = 0
  #scratch: boolean
  /** Where each open nested message's reserved length starts. */
  readonly #forks: number[] = []

  constructor() {
    this.#scratch = scratch !== undefined
    this.#buf = scratch ?? Buffer.allocUnsafe(OWN_BYTES)
    scratch = undefined
  }

  /** The bytes written, in a Buffer of their own; gives the scratch buffer back. */
  finish(): Buffer {
    if (this.#forks.length > 0) throw new Error('invalid state: a nested message was not joined')
    if (this.#pos >= HANDED_OVER_BYTES_MIN) {
      // Large: hand the buffer itself over (a copy would cost more than a fresh scratch).
      const out = this.#buf.subarray(0, this.#pos)
      if (this.#scratch) {
        this.#scratch = false
        scratch = Buffer.allocUnsafe(SCRATCH_BYTES)
      }
      this.#buf = EMPTY
      return out
    }
    const out = Buffer.allocUnsafe(this.#pos)
    this.#buf.copy(out, 0, 0, this.#pos)
    this.release()
    return out
  }

  /** Gives the scratch buffer back if this writer holds it (after a failed encode too). Idempotent. */
  release(): void {
    if (!this.#scratch) return
    this.#scratch = false
    scratch = this.#buf.length <= SCRATCH_KEPT_BYTES_MAX ? this.#buf : Buffer.allocUnsafe(SCRATCH_BYTES)
  }

  fork(): this {
    this.#room(RESERVED_LENGTH_BYTES)
    this.#forks.push(this.#pos)
    this.#pos += RESERVED_LENGTH_BYTES
    return this
  }

  join(): this {
    const at = this.#forks.pop()
    if (at === undefined) throw new Error('invalid state, fork stack empty')
    const start = at + RESERVED_LENGTH_BYTES
    const length = this.#pos - start
    const size = varintSize(length)
    if (size !== RESERVED_LENGTH_BYTES) {
      const shift = size - RESERVED_LENGTH_BYTES
      if (shift > 0) this.#room(shift)
      this.#buf.copyWithin(start + shift, start, this.#pos)
      this.#pos += shift
    }
    writeVarint(this.#buf, at, length)
    return this
  }

  uint32(value: number): this {
    if (!Number.isInteger(value) || value < 0 || value > 0xffffffff)
      throw new Error(`invalid uint32: ${value}`)
    this.#room(5)
    this.#pos = writeVarint(this.#buf, this.#pos, value)
    return this
  }

  int32(value: number): this {
    if (!Number.isInteger(value) || value < -0x80000000 || value > 0x7fffffff)
      throw new Error(`invalid int32: ${value}`)
    if (value >= 0) return this.uint32(value)
    // A negative int32 is sign-extended to 64 bits: ten bytes.
    this.#room(10)
    this.#pos = writeVarint64(this.#buf, this.#pos, value >>> 0, 0xffffffff)
    return this
  }

  uint64(value: number | bigint | string): this {
    let lo: number
    let hi: number
    if (typeof value === 'number') {
      if (!Number.isInteger(value) || value < 0 || value >= TWO_64)
        throw new Error(`invalid uint64: ${value}`)
      hi = Math.floor(value / TWO_32)
      lo = value - hi * TWO_32
    } else {
      let big: bigint
      try {
        big = BigInt(value)
      } catch {
        throw new Error(`invalid uint64: ${value}`)
      }
      if (big < 0n || big >= 1n << 64n) throw new Error(`invalid uint64: ${value}`)
      lo = Number(big & 0xffffffffn)
      hi = Number(big >> 32n)
    }
    this.#room(10)
    this.#pos = writeVarint64(this.#buf, this.#pos, lo, hi)
    return this
  }

  bool(value: boolean): this {
    this.#room(1)
    this.#buf[this.#pos++] = value ? 1 : 0
    return this
  }

  double(value: number): this {
    this.#room(8)
    this.#pos = this.#buf.writeDoubleLE(value, this.#pos)
    return this
  }

  bytes(value: Uint8Array): this {
    const n = value.byteLength
    this.#room(5 + n)
    this.#pos = writeVarint(this.#buf, this.#pos, n)
    this.#buf.set(value, this.#pos)
    this.#pos += n
    return this
  }

  string(value: string): this {
    const n = value.length
    this.#room(5 + n)
    const buf = this.#buf
    // ASCII, the usual case (ids, names, lease ids): one byte per character, in place.
    let i = 0
    const start = this.#pos + (n < 128 ? 1 : varintSize(n))
    for (; i < n; i++) {
      const c = value.charCodeAt(i)
      if (c >= 0x80) break
      buf[start + i] = c
    }
    if (i === n) {
      this.#pos = writeVarint(buf, this.#pos, n) + n
      return this
    }
    const bytes = Buffer.byteLength(value, 'utf8')
    this.#room(5 + bytes)
    this.#pos = writeVarint(this.#buf, this.#pos, bytes)
    this.#pos += this.#buf.write(value, this.#pos, bytes, 'utf8')
    return this
  }

  /** Makes room for `n` more bytes. */
  #room(n: number): void {
    const need = this.#pos + n
    if (need <= this.#buf.length) return
    const grown = Buffer.allocUnsafe(Math.max(need, this.#buf.length * 2))
    this.#buf.copy(grown, 0, 0, this.#pos)
    this.#buf = grown
  }
}

function varintSize(value: number): number {
  if (value < 0x80) return 1
  if (value < 0x4000) return 2
  if (value < 0x200000) return 3
  if (value < 0x10000000) return 4
  return 5
}

/** Writes an unsigned 32-bit varint at `at`; returns where it ends. */
function writeVarint(buf: Uint8Array, at: number, value: number): number {
  let v = value
  while (v > 0x7f) {
    buf[at++] = (v & 0x7f) | 0x80
    v >>>= 7
  }
  buf[at++] = v
  return at
}

/** Writes the 64-bit varint of `hi`·2³² + `lo` (both unsigned 32-bit) at `at`; returns where it ends. */
function writeVarint64(buf: Uint8Array, at: number, lo: number, hi: number): number {
  if (hi === 0) return writeVarint(buf, at, lo)
  // The low 28 bits, then 7 bits across the boundary, then the rest of `hi`.
  for (let i = 0; i < 4; i++) {
    buf[at++] = (lo & 0x7f) | 0x80
    lo >>>= 7
  }
  const v = (lo & 0x0f) | ((hi & 0x07) << 4)
  let h = hi >>> 3
  if (h === 0) {
    buf[at++] = v
    return at
  }
  buf[at++] = v | 0x80
  while (h > 0x7f) {
    buf[at++] = (h & 0x7f) | 0x80
    h >>>= 7
  }
  buf[at++] = h
  return at
}
