import { rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32c } from './crc32c'
import { pathExists } from './path-exists'

/**
 * Checksums on the values a LevelEngine stores. LevelDB checks its table blocks' checksums
 * only when a read asks for `verify_checksums`, which classic-level does not expose: a flipped
 * bit in an uncompressed block would be returned as data. So each stored value carries a
 * CRC32C of its key and its bytes, `value | crc32c(key ‖ value)` (4 bytes, little-endian),
 * checked on every read. Covering the key also catches a value read back under another key.
 */
export const CHECKSUM_BYTES = 4

/** Marks a database whose values carry checksums (written before LevelDB creates it). */
export const VALUE_FORMAT_FILE = 'MQ-FORMAT'
const FORMAT_TEXT = 'values: crc32c(key | value) appended, 4 bytes little-endian\n'

/** `value` followed by the checksum of `key` and `value`, in a new array. */
export function sealValue(key: Uint8Array, value: Uint8Array): Uint8Array {
  const out = new Uint8Array(value.length + CHECKSUM_BYTES)
  sealInto(out, 0, key, value)
  return out
}

/** The scratch buffer a ScratchSealer starts with. */
const SCRATCH_BYTES_MIN = 64 * 1024
/** A sealed value larger than this gets a buffer of its own instead of a larger scratch. */
export const SCRATCH_BYTES_MAX = 1024 * 1024

/**
 * Seals put values for classic-level's native `_put`, which copies the value during the call
 * (binding.cc `ToSlice`) and keeps no reference to it: each sealed value is a view into one
 * scratch buffer kept from batch to batch, valid only until the next `seal()`. A buffer made
 * for every batch (the sum of its values, up to megabytes) was allocated, zero-filled and
 * freed again each time, on every replica.
 *
 * Invariant: the scratch holds at most SCRATCH_BYTES_MAX bytes.
 */
export class ScratchSealer {
  #buffer = new ArrayBuffer(SCRATCH_BYTES_MIN)

  /** `value` followed by the checksum of `key` and `value`; pass it straight to the native call. */
  seal(key: Uint8Array, value: Uint8Array): Uint8Array {
    const n = value.length + CHECKSUM_BYTES
    if (n > SCRATCH_BYTES_MAX) return sealValue(key, value)
    if (n > this.#buffer.byteLength) {
      let size = this.#buffer.byteLength * 2
      while (size < n) size *= 2
      this.#buffer = new ArrayBuffer(Math.min(size, SCRATCH_BYTES_MAX))
    }
    const out = new Uint8Array(this.#buffer, 0, n)
    sealInto(out, 0, key, value)
    return out
  }
}

/** Writes `value` and its checksum into `out` at `at`; returns where they end. */
function sealInto(out: Uint8Array, at: number, key: Uint8Array, value: Uint8Array): number {
  const n = value.length
  out.set(value, at)
  const crc = crc32c(value, 0, n, crc32c(key))
  const end = at + n
  out[end] = crc & 0xff
  out[end + 1] = (crc >>> 8) & 0xff
  out[end + 2] = (crc >>> 16) & 0xff
  out[end + 3] = crc >>> 24
  return end + CHECKSUM_BYTES
}

/**
 * The value inside `stored` (a plain Uint8Array view over the same memory), or undefined when
 * it is too short or its checksum does not match `key` and its bytes.
 */
export function unsealValue(key: Uint8Array, stored: Uint8Array): Uint8Array | undefined {
  const n = stored.length - CHECKSUM_BYTES
  if (n < 0) return undefined
  const crc =
    ((stored[n] as number) |
      ((stored[n + 1] as number) << 8) |
      ((stored[n + 2] as number) << 16) |
      ((stored[n + 3] as number) << 24)) >>>
    0
  if (crc32c(stored, 0, n, crc32c(key)) !== crc) return undefined
  return new Uint8Array(stored.buffer, stored.byteOffset, n)
}

/**
 * Whether the database in `dir` stores checksummed values. A new database (`isNew`: no
 * LevelDB files yet) does when `wanted`, and gets the format file; an existing one does
 * when it has the file (databases made before checksums existed keep plain values).
 */
export async function valueChecksumsOf(dir: string, isNew: boolean, wanted: boolean): Promise<boolean> {
  const path = join(dir, VALUE_FORMAT_FILE)
  if (!isNew) return pathExists(path)
  if (wanted) await writeFile(path, FORMAT_TEXT, { flush: true })
  else await rm(path, { force: true }) // left by an open that failed before LevelDB created the database
  return wanted
}
