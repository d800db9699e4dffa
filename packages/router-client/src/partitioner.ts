/**
 * Chooses a partition for a message: by the hash of its key when it has one (so one key
 * always lands on one partition while the partition count holds), else round-robin.
 */
export class Partitioner {
  #next = 0

  /** Returns a partition index in [0, partitions). Requires partitions >= 1. */
  choose(partitions: number, key?: string): number {
    if (!Number.isInteger(partitions) || partitions < 1) {
      throw new RangeError(`partitions must be a positive integer, got ${partitions}`)
    }
    if (key !== undefined) return fnv1a32(key) % partitions
    const index = this.#next % partitions
    this.#next = (this.#next + 1) % 0x7fff_ffff
    return index
  }
}

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash >>> 0
}
