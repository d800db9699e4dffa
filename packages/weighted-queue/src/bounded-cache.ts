import { invariant } from './errors'

/**
 * A cache of at most `entriesMax` entries that forgets its oldest insertion first. Holds
 * copies of values whose truth is in the engine (the partition updates it with every write
 * of those keys), so a hit and a miss give the same result: replicas with different cache
 * contents stay identical. Its bound keeps the partition's memory independent of queue length.
 */
export class BoundedCache<K, V> {
  private readonly entries = new Map<K, V>()

  constructor(private readonly entriesMax: number) {
    invariant(Number.isInteger(entriesMax) && entriesMax > 0, 'a cache holds at least one entry')
  }

  get size(): number {
    return this.entries.size
  }

  get(key: K): V | undefined {
    return this.entries.get(key)
  }

  /** Sets `key`; past the bound, the oldest inserted entry is dropped. */
  set(key: K, value: V): void {
    if (!this.entries.has(key) && this.entries.size >= this.entriesMax) {
      const oldest = this.entries.keys().next()
      if (!oldest.done) this.entries.delete(oldest.value)
    }
    this.entries.set(key, value)
  }

  delete(key: K): void {
    this.entries.delete(key)
  }
}
