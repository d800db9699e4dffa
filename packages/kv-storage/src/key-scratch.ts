import { ON_HEAP_BYTES_MAX } from './byte-copies'

/**
 * Hands small keys to classic-level's native `_put`/`_del` from memory outside the JS heap.
 *
 * V8 keeps a typed array of at most 64 bytes inside the JS heap, and most keys are that small
 * (a queue's ready entry, a Raft log entry). Native code that reads such an array's bytes makes
 * V8 move them out of the heap first: a backing store of its own for every key (allocated,
 * zero-filled, registered, and swept later), about 200 ns per put or delete. classic-level
 * copies the key during the call (binding.cc `ToSlice`) and keeps no reference to it, so one
 * scratch buffer outside the heap can carry every small key in turn, through one view per
 * length made once.
 *
 * A placed key is valid only until the next `place()`: pass it straight to the native call.
 */
export class KeyScratch {
  readonly #views: Uint8Array[]

  constructor() {
    const buffer = new ArrayBuffer(ON_HEAP_BYTES_MAX)
    this.#views = Array.from({ length: ON_HEAP_BYTES_MAX + 1 }, (_, n) => new Uint8Array(buffer, 0, n))
  }

  /**
   * `key`'s bytes in the scratch buffer (a view of exactly its length, overwritten by the next
   * call), or `key` itself when it is larger than V8 keeps in the heap.
   */
  place(key: Uint8Array): Uint8Array {
    const n = key.length
    if (n > ON_HEAP_BYTES_MAX) return key
    const out = this.#views[n] as Uint8Array
    for (let i = 0; i < n; i++) out[i] = key[i] as number
    return out
  }
}
