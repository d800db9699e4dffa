import type { KeyRange } from './engine'
import { InvalidArgumentError } from './errors'

/**
 * An order-preserving encoding of tuples into byte keys: for tuples a and b,
 * compareKeys(encodeTuple(a), encodeTuple(b)) has the sign of compareTuples(a, b). So a
 * range scan over encoded keys visits tuples in tuple order, and every tuple that starts
 * with a prefix tuple lies in `prefixRange(prefix)`.
 *
 * Each element is self-delimiting and starts with a type tag (types order by tag:
 * integers < strings < bytes):
 *
 *   unsigned integer n   tag 0x20 + len, then n big-endian in `len` bytes, no leading zero
 *                        (len 0..7 covers 0..2^53-1; 0 is the lone byte 0x20). A longer
 *                        integer has a larger tag, so integers order by value.
 *   string s             tag 0x40, UTF-8 of s with each 0x00 written 0x00 0xFF, then 0x00
 *   bytes u              tag 0x50, u with each 0x00 written 0x00 0xFF, then 0x00
 *
 * The 0x00 terminator sorts below any escaped byte (0x00 0xFF) and any content byte, so a
 * string sorts before every string it is a prefix of. Strings order by code point (their
 * UTF-8 order), which differs from JavaScript's `<` (UTF-16 code units) for characters
 * above U+FFFF; lone surrogates are rejected because they do not survive UTF-8.
 */

export type TupleElement = number | string | Uint8Array
export type Tuple = readonly TupleElement[]

export const KeyTag = {
  /** 0x20..0x27: an unsigned integer of 0..7 big-endian bytes. */
  Uint: 0x20,
  String: 0x40,
  Bytes: 0x50,
} as const

const UINT_BYTES_MAX = 7
/** In `u` mode a paired surrogate is one code point, so this matches only lone ones. */
const LONE_SURROGATE = /\p{Surrogate}/u
const utf8 = new TextEncoder()
/** `ignoreBOM`: a string that starts with U+FEFF keeps it (by default decode drops it, and two names that differ by it become one). */
const utf8Strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Number of big-endian bytes needed for n (0 for 0). */
function uintLength(n: number): number {
  let len = 0
  while (n > 0) {
    len++
    n = Math.floor(n / 256)
  }
  return len
}

function checkUint(n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgumentError(
      `key codec: ${n} is not an unsigned safe integer (0..${Number.MAX_SAFE_INTEGER})`,
    )
  }
}

function escapedLength(u: Uint8Array): number {
  let zeros = 0
  for (let i = 0; i < u.length; i++) if (u[i] === 0) zeros++
  return u.length + zeros + 1
}

/** Encodes `tuple` into a new key. Throws InvalidArgumentError for an element outside the domain. */
export function encodeTuple(tuple: Tuple): Uint8Array {
  // First pass: validate and size; strings are converted to UTF-8 once.
  const bytesOf: (Uint8Array | undefined)[] = new Array(tuple.length)
  let size = 0
  for (let e = 0; e < tuple.length; e++) {
    const el = tuple[e]
    if (typeof el === 'number') {
      checkUint(el)
      size += 1 + uintLength(el)
    } else if (typeof el === 'string') {
      if (LONE_SURROGATE.test(el)) {
        throw new InvalidArgumentError(
          'key codec: string has a lone surrogate; it cannot round-trip through UTF-8',
        )
      }
      const bytes = utf8.encode(el)
      bytesOf[e] = bytes
      size += 1 + escapedLength(bytes)
    } else if (el instanceof Uint8Array) {
      bytesOf[e] = el
      size += 1 + escapedLength(el)
    } else {
      throw new InvalidArgumentError(
        `key codec: element of type ${typeof el} is not a number, string or Uint8Array`,
      )
    }
  }
  const out = new Uint8Array(size)
  let at = 0
  for (let e = 0; e < tuple.length; e++) {
    const el = tuple[e] as TupleElement
    if (typeof el === 'number') {
      at = writeUint(out, at, el)
      continue
    }
    out[at++] = typeof el === 'string' ? KeyTag.String : KeyTag.Bytes
    const bytes = bytesOf[e] as Uint8Array
    for (let i = 0; i < bytes.length; i++) {
      const c = bytes[i] as number
      out[at++] = c
      if (c === 0) out[at++] = 0xff
    }
    out[at++] = 0
  }
  if (at !== size) throw new Error(`key codec invariant: wrote ${at} of ${size} bytes`)
  return out
}

/**
 * `encodeTuple([...t, n])` given `prefix = encodeTuple(t)`, without re-encoding `t`: the
 * fast path for keys that share a prefix (a group's log entries). Throws like encodeTuple.
 */
export function appendUint(prefix: Uint8Array, n: number): Uint8Array {
  checkUint(n)
  const out = new Uint8Array(prefix.length + 1 + uintLength(n))
  out.set(prefix)
  writeUint(out, prefix.length, n)
  return out
}

/** `prefix ‖ rest`: a key under `prefix` whose rest is raw bytes (not a tuple element). */
export function appendBytes(prefix: Uint8Array, rest: Uint8Array): Uint8Array {
  const out = new Uint8Array(prefix.length + rest.length)
  out.set(prefix)
  out.set(rest, prefix.length)
  return out
}

/** Writes the element encoding of unsigned integer n at `at`; returns the next offset. */
function writeUint(out: Uint8Array, at: number, n: number): number {
  const len = uintLength(n)
  out[at] = KeyTag.Uint + len
  let v = n
  for (let i = len; i >= 1; i--) {
    out[at + i] = v % 256
    v = Math.floor(v / 256)
  }
  return at + 1 + len
}

/**
 * Decodes a key made by `encodeTuple` (its first `elementsMax` elements: what follows them is
 * not read, and may be raw bytes, as `appendBytes` makes). Throws InvalidArgumentError when
 * `key` is not a well-formed encoding (unknown tag, truncated, non-canonical integer, bad
 * escape or UTF-8).
 */
export function decodeTuple(key: Uint8Array, elementsMax = Number.POSITIVE_INFINITY): TupleElement[] {
  const out: TupleElement[] = []
  let at = 0
  const bad = (why: string) =>
    new InvalidArgumentError(`key codec: not an encoded tuple at byte ${at}: ${why} (key ${hexOf(key)})`)
  while (at < key.length && out.length < elementsMax) {
    const tag = key[at] as number
    if (tag >= KeyTag.Uint && tag <= KeyTag.Uint + UINT_BYTES_MAX) {
      const len = tag - KeyTag.Uint
      if (at + 1 + len > key.length) throw bad('integer truncated')
      if (len > 0 && key[at + 1] === 0) throw bad('integer has a leading zero byte')
      let n = 0
      for (let i = 1; i <= len; i++) n = n * 256 + (key[at + i] as number)
      if (!Number.isSafeInteger(n)) throw bad('integer above the safe range')
      out.push(n)
      at += 1 + len
    } else if (tag === KeyTag.String || tag === KeyTag.Bytes) {
      const start = at
      const content = unescapeElement(key, at + 1)
      if (!content) {
        at = start
        throw bad('unterminated or badly escaped string/bytes')
      }
      if (tag === KeyTag.String) {
        try {
          out.push(utf8Strict.decode(content.bytes))
        } catch (err) {
          throw new InvalidArgumentError(`key codec: string at byte ${start} is not valid UTF-8`, {
            cause: err,
          })
        }
      } else {
        out.push(content.bytes)
      }
      at = content.next
    } else {
      throw bad(`unknown tag 0x${tag.toString(16)}`)
    }
  }
  return out
}

function unescapeElement(key: Uint8Array, from: number): { bytes: Uint8Array; next: number } | undefined {
  const bytes: number[] = []
  let i = from
  while (i < key.length) {
    const c = key[i] as number
    if (c !== 0) {
      bytes.push(c)
      i++
      continue
    }
    if (key[i + 1] === 0xff) {
      bytes.push(0)
      i += 2
      continue
    }
    return { bytes: Uint8Array.from(bytes), next: i + 1 }
  }
  return undefined
}

/**
 * Compares two tuples element by element (integers < strings < bytes; strings by code
 * point; bytes bytewise; a proper prefix first). The order `encodeTuple` preserves.
 */
export function compareTuples(a: Tuple, b: Tuple): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const c = compareElements(a[i] as TupleElement, b[i] as TupleElement)
    if (c !== 0) return c
  }
  return a.length - b.length
}

function rank(el: TupleElement): number {
  return typeof el === 'number' ? 0 : typeof el === 'string' ? 1 : 2
}

function compareElements(a: TupleElement, b: TupleElement): number {
  const ra = rank(a)
  const rb = rank(b)
  if (ra !== rb) return ra - rb
  if (typeof a === 'number') return a - (b as number)
  if (typeof a === 'string') return compareBytes(utf8.encode(a), utf8.encode(b as string))
  return compareBytes(a, b as Uint8Array)
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number)
    if (d !== 0) return d
  }
  return a.length - b.length
}

/**
 * The smallest key greater than every key that starts with `prefix`, or undefined when
 * there is none (an all-0xff prefix).
 */
export function prefixEnd(prefix: Uint8Array): Uint8Array | undefined {
  let end = prefix.length
  while (end > 0 && prefix[end - 1] === 0xff) end--
  if (end === 0) return undefined
  const out = prefix.slice(0, end)
  out[end - 1] = (out[end - 1] as number) + 1
  return out
}

/**
 * The key range of every tuple that starts with the elements of `prefix` (including the
 * prefix tuple itself), as [gte, lt) with lt = encode(prefix) + 0xff. An extension's next
 * byte is a tag (< 0xff), so it lies below lt, while a key that merely continues the last
 * string/bytes element (an escaped 0x00 0xff after the terminator) lies at or above it.
 * Add `reverse`/`limit` to it to iterate.
 */
export function prefixRange(prefix: Tuple): { gte: Uint8Array; lt: Uint8Array } & KeyRange {
  const gte = encodeTuple(prefix)
  const lt = new Uint8Array(gte.length + 1)
  lt.set(gte)
  lt[gte.length] = 0xff
  return { gte, lt }
}

function hexOf(u: Uint8Array): string {
  let s = ''
  for (let i = 0; i < u.length && i < 64; i++) s += (u[i] as number).toString(16).padStart(2, '0')
  return u.length > 64 ? `${s}…` : s
}
