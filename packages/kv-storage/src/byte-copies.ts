/**
 * Cheap private copies of small byte arrays, for the memory engine's copy-in and copy-out.
 *
 * V8 keeps a typed array of at most 64 bytes inside the JS heap (about 20 ns to make); a
 * larger one gets an ArrayBuffer of its own outside the heap (10–20 times that, and more
 * GC work to free). So copies of up to `ON_HEAP_BYTES_MAX` bytes are made one by one, and
 * larger ones are views into shared chunks:
 *
 * - `ChunkCopier` (copy-in, long-lived): chunks of `CHUNK_BYTES`, each copy at most
 *   `CHUNK_COPY_BYTES_MAX` (larger ones get their own buffer). A stored view keeps its chunk
 *   alive: at most CHUNK_BYTES pinned per live entry, the policy of Node's Buffer pool.
 * - `copyAllOut` (copy-out, one read call): one buffer for all the large copies of that
 *   call, freed when the caller drops them all.
 */

/** Copies up to this size are made one by one (V8 keeps them in the JS heap). */
export const ON_HEAP_BYTES_MAX = 64
/** The size of one shared chunk of the copy-in pool. */
export const CHUNK_BYTES = 8 * 1024
/** Larger copies get their own buffer (their cost is dominated by copying anyway). */
export const CHUNK_COPY_BYTES_MAX = 1024

/** Makes copies that an engine keeps: small ones alone, mid-size ones packed in chunks. */
export class ChunkCopier {
  private chunk = new ArrayBuffer(CHUNK_BYTES)
  private used = 0

  /** A private copy of `bytes` (a plain Uint8Array; never shares memory with `bytes`). */
  copy(bytes: Uint8Array): Uint8Array {
    const n = bytes.length
    if (n <= ON_HEAP_BYTES_MAX || n > CHUNK_COPY_BYTES_MAX) return new Uint8Array(bytes)
    if (this.used + n > CHUNK_BYTES) {
      this.chunk = new ArrayBuffer(CHUNK_BYTES)
      this.used = 0
    }
    const out = new Uint8Array(this.chunk, this.used, n)
    out.set(bytes)
    this.used += n
    return out
  }
}

/**
 * Private copies of `arrays` (undefined stays undefined), in order: the large ones as views
 * into one buffer made for this call, the small ones alone.
 */
export function copyAllOut<T extends Uint8Array | undefined>(arrays: readonly T[]): T[] {
  let shared = 0
  for (let i = 0; i < arrays.length; i++) {
    const a = arrays[i]
    if (a !== undefined && a.length > ON_HEAP_BYTES_MAX) shared += a.length
  }
  const buffer = shared > 0 ? new ArrayBuffer(shared) : undefined
  let at = 0
  const out = new Array<T>(arrays.length)
  for (let i = 0; i < arrays.length; i++) {
    const a = arrays[i]
    if (a === undefined || a.length <= ON_HEAP_BYTES_MAX || buffer === undefined) {
      out[i] = (a === undefined ? undefined : new Uint8Array(a)) as T
      continue
    }
    const view = new Uint8Array(buffer, at, a.length)
    view.set(a)
    at += a.length
    out[i] = view as T
  }
  return out
}
