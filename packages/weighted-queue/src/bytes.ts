import { InvalidArgumentError } from './errors'

const TWO_POW_32 = 0x1_0000_0000
const utf8Encoder = new TextEncoder()
/**
 * Drops a string's leading U+FEFF (TextDecoder's default), as every version before did: the
 * decoded command is what every replica applies, so keeping the mark would make a replica of
 * this version apply an entry otherwise than one of an earlier version (or a replay of it), for
 * names that start with the mark. Keeping it needs a command format that says so, used from a
 * format level every replica knows (not done: README, "Strings").
 */
const utf8Decoder = new TextDecoder('utf-8', { fatal: true })

/** Strings of up to this many bytes are decoded without TextDecoder when they are ASCII. */
const ASCII_FAST_BYTES_MAX = 64

/** Allocations up to this size get their own (in-heap) array. */
const ON_HEAP_BYTES_MAX = 64

/** The size of one slab; allocations above a quarter of it get their own buffer. */
export const SLAB_BYTES = 16 * 1024

/**
 * Hands out small byte arrays as views into shared 16 KiB slabs, never reused: one
 * ArrayBuffer per slab instead of one per key or value (V8's per-buffer cost dominated the
 * hot path). A view keeps its slab alive, so an engine must copy what it stores (the
 * memory and LevelDB engines do).
 */
export class Slab {
  private buf: ArrayBuffer
  private pos = 0

  /** `slabBytes`: the size of each slab (SLAB_BYTES unless given). */
  constructor(private readonly slabBytes = SLAB_BYTES) {
    this.buf = new ArrayBuffer(slabBytes)
  }

  /** A zeroed array of `n` bytes. */
  alloc(n: number): Uint8Array {
    // V8 keeps typed arrays of up to 64 bytes in the JS heap: cheaper alone than as a view.
    if (n <= ON_HEAP_BYTES_MAX || n > this.slabBytes / 4) return new Uint8Array(n)
    if (this.pos + n > this.slabBytes) {
      this.buf = new ArrayBuffer(this.slabBytes)
      this.pos = 0
    }
    const out = new Uint8Array(this.buf, this.pos, n)
    this.pos += n
    return out
  }
}

/** The slab every key and record of this package is allocated from. */
export const slab = new Slab()

/** UTF-8 bytes of `text`. */
export function utf8(text: string): Uint8Array {
  return utf8Encoder.encode(text)
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff
}

/** The number of UTF-8 bytes of `text` (as `utf8` encodes it), without allocating for ASCII. */
export function utf8Length(text: string): number {
  let n = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && isLowSurrogate(text.charCodeAt(i + 1))) {
      n += 4 // a pair: one code point
      i++
    } else n += 3 // a lone surrogate is encoded as U+FFFD, 3 bytes
  }
  return n
}

/**
 * An append-only byte buffer with unsigned varints (LEB128, up to 2^53 - 1), fixed big-endian
 * u64s and length-prefixed bytes/strings. Grows by doubling; `capacityBytesMax` bounds it.
 */
export class ByteWriter {
  private buf: Uint8Array
  private pos = 0

  constructor(
    initialBytes = 64,
    private readonly capacityBytesMax = 64 * 1024 * 1024,
  ) {
    this.buf = new Uint8Array(initialBytes)
  }

  /** Empties the writer for reuse (a scratch writer saves an allocation per record). */
  reset(): this {
    this.pos = 0
    return this
  }

  private reserve(n: number): void {
    const need = this.pos + n
    if (need <= this.buf.length) return
    if (need > this.capacityBytesMax) {
      throw new InvalidArgumentError(
        `encoded value exceeds ${this.capacityBytesMax} bytes; send less at once`,
      )
    }
    let size = this.buf.length * 2
    while (size < need) size *= 2
    const next = new Uint8Array(Math.min(size, this.capacityBytesMax))
    next.set(this.buf.subarray(0, this.pos))
    this.buf = next
  }

  u8(v: number): this {
    this.reserve(1)
    this.buf[this.pos++] = v
    return this
  }

  /** An unsigned integer in [0, 2^53) as LEB128. */
  varint(v: number): this {
    if (!Number.isSafeInteger(v) || v < 0)
      throw new InvalidArgumentError(`not a non-negative safe integer: ${v}`)
    this.reserve(8)
    if (v < 0x80) {
      this.buf[this.pos++] = v
      return this
    }
    if (v < 0x8000_0000) {
      // Fits in 31 bits: shifts instead of division.
      while (v >= 0x80) {
        this.buf[this.pos++] = (v & 0x7f) | 0x80
        v >>>= 7
      }
      this.buf[this.pos++] = v
      return this
    }
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80
      v = Math.floor(v / 0x80)
    }
    this.buf[this.pos++] = v
    return this
  }

  /** An unsigned integer in [0, 2^53) as 8 big-endian bytes. */
  u64(v: number): this {
    this.reserve(8)
    putU64(this.buf, this.pos, v)
    this.pos += 8
    return this
  }

  /** Raw bytes, no length prefix. */
  raw(b: Uint8Array): this {
    this.reserve(b.length)
    this.buf.set(b, this.pos)
    this.pos += b.length
    return this
  }

  bytes(b: Uint8Array): this {
    this.varint(b.length)
    this.reserve(b.length)
    this.buf.set(b, this.pos)
    this.pos += b.length
    return this
  }

  /** UTF-8 with a length prefix; an ASCII string (ids, lease ids) is copied char by char, no encoder. */
  string(s: string): this {
    const n = s.length
    if (utf8Length(s) !== n) return this.bytes(utf8Encoder.encode(s))
    this.varint(n)
    this.reserve(n)
    for (let i = 0; i < n; i++) this.buf[this.pos + i] = s.charCodeAt(i)
    this.pos += n
    return this
  }

  /** A copy of the bytes written so far, in its own buffer. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.pos)
  }

  /** A copy of the bytes written so far, allocated from the shared slab. */
  finishInSlab(): Uint8Array {
    const n = this.pos
    const out = slab.alloc(n)
    if (n <= ON_HEAP_BYTES_MAX) for (let i = 0; i < n; i++) out[i] = this.buf[i] as number
    else out.set(new Uint8Array(this.buf.buffer, 0, n))
    return out
  }
}

/** Reads what ByteWriter wrote; throws InvalidArgumentError on truncated or malformed input. */
export class ByteReader {
  private pos = 0

  constructor(private readonly buf: Uint8Array) {}

  get done(): boolean {
    return this.pos === this.buf.length
  }

  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw new InvalidArgumentError('truncated input: the bytes end early')
  }

  u8(): number {
    this.need(1)
    return this.buf[this.pos++] as number
  }

  varint(): number {
    let result = 0
    let scale = 1
    for (let i = 0; i < 8; i++) {
      const b = this.u8()
      result += (b & 0x7f) * scale
      if (b < 0x80) {
        if (!Number.isSafeInteger(result)) break
        return result
      }
      scale *= 0x80
    }
    throw new InvalidArgumentError('malformed varint: longer than 2^53')
  }

  u64(): number {
    this.need(8)
    const v = getU64(this.buf, this.pos)
    this.pos += 8
    return v
  }

  /** Every byte not read yet (a view, or a copy when small). */
  rest(): Uint8Array {
    const out = view(this.buf, this.pos, this.buf.length - this.pos)
    this.pos = this.buf.length
    return out
  }

  /** `n` raw bytes (a copy). */
  raw(n: number): Uint8Array {
    this.need(n)
    const out = this.buf.slice(this.pos, this.pos + n)
    this.pos += n
    return out
  }

  /** Length-prefixed bytes: a view into the input (which must not change afterwards), or a copy when small. */
  bytes(): Uint8Array {
    const n = this.varint()
    this.need(n)
    const out = view(this.buf, this.pos, n)
    this.pos += n
    return out
  }

  string(): string {
    const n = this.varint()
    this.need(n)
    const start = this.pos
    this.pos += n
    // Short ASCII (ids, lease ids): the char codes are the bytes, no decoder call.
    if (n <= ASCII_FAST_BYTES_MAX) {
      let ascii = true
      for (let i = start; i < start + n; i++) if ((this.buf[i] as number) >= 0x80) ascii = false
      if (ascii)
        return String.fromCharCode.apply(null, this.buf.subarray(start, start + n) as unknown as number[])
    }
    return utf8Decoder.decode(this.buf.subarray(start, start + n))
  }
}

/**
 * Bytes [at, at + n) of `b`, not to be mutated: a copy when small (V8 keeps small arrays in
 * the heap; a view would move `b` out of it), else a view (not `subarray`, which looks up a
 * species constructor on every call).
 */
function view(b: Uint8Array, at: number, n: number): Uint8Array {
  return n <= ON_HEAP_BYTES_MAX ? b.slice(at, at + n) : new Uint8Array(b.buffer, b.byteOffset + at, n)
}

/** Writes `v` in [0, 2^53) as 8 big-endian bytes at `at`. */
export function putU64(out: Uint8Array, at: number, v: number): void {
  const hi = Math.floor(v / TWO_POW_32)
  const lo = v >>> 0
  out[at] = hi >>> 24
  out[at + 1] = (hi >>> 16) & 0xff
  out[at + 2] = (hi >>> 8) & 0xff
  out[at + 3] = hi & 0xff
  out[at + 4] = lo >>> 24
  out[at + 5] = (lo >>> 16) & 0xff
  out[at + 6] = (lo >>> 8) & 0xff
  out[at + 7] = lo & 0xff
}

/** Reads 8 big-endian bytes at `at` as a number (assumes < 2^53). */
export function getU64(b: Uint8Array, at: number): number {
  const hi =
    (((b[at] as number) << 24) |
      ((b[at + 1] as number) << 16) |
      ((b[at + 2] as number) << 8) |
      (b[at + 3] as number)) >>>
    0
  const lo =
    (((b[at + 4] as number) << 24) |
      ((b[at + 5] as number) << 16) |
      ((b[at + 6] as number) << 8) |
      (b[at + 7] as number)) >>>
    0
  return hi * TWO_POW_32 + lo
}
