/**
 * How messages without a key pick their partition:
 * - `sticky` (the default): every keyless message goes to one partition until it has taken a
 *   batch's worth (`batchMax` messages or `batchBytesMax` body bytes), then the next one is
 *   the least loaded partition, round-robin among equals; a partition whose batch has been in
 *   flight for `stallMs` is left at once. Each request and Raft entry costs far more than a
 *   message in it, so fewer, fuller batches carry more messages per second (Kafka's sticky
 *   partitioner, KIP-480 and KIP-794); over many batches the partitions get even shares.
 * - `round-robin`: one message per partition in turn.
 */
export type KeylessPartitioning = 'sticky' | 'round-robin'

/** What a sticky choice needs to know of a partition's lane in the producer. */
export interface LaneLoad {
  /** Messages waiting or in flight. */
  readonly queued: number
  /** A batch has been in flight for `stallMs` or longer. */
  readonly stalled: boolean
}

export interface PartitionerOptions {
  readonly keyless: KeylessPartitioning
  /** A sticky partition takes at most this many messages in a row… */
  readonly batchMax: number
  /** …and at most this many body bytes (a message that reaches it is the last). */
  readonly batchBytesMax: number
  /** The first sticky partition, as a fraction in [0, 1) (default random, so producers spread). */
  readonly random: () => number
}

const DEFAULT_OPTIONS: PartitionerOptions = {
  keyless: 'sticky',
  batchMax: 512,
  batchBytesMax: 1024 * 1024,
  random: Math.random,
}

const IDLE: LaneLoad = { queued: 0, stalled: false }

/**
 * Chooses a partition for a message: by the hash of its key when it has one (so one key
 * always lands on one partition while the partition count holds), else as `keyless` says.
 */
export class Partitioner {
  readonly #options: PartitionerOptions
  #next = -1
  /** The sticky partition and what it has taken since it was chosen. */
  #sticky: { partition: number; messages: number; bytes: number } | undefined

  constructor(options: Partial<PartitionerOptions> = {}) {
    this.#options = { ...DEFAULT_OPTIONS, ...options }
  }

  /**
   * Returns a partition index in [0, partitions). Requires partitions >= 1. `bytes` is the
   * message's body size, `load` the producer's view of a partition (sticky only).
   */
  choose(
    partitions: number,
    key?: string,
    bytes = 0,
    load: (partition: number) => LaneLoad = () => IDLE,
  ): number {
    if (!Number.isInteger(partitions) || partitions < 1) {
      throw new RangeError(`partitions must be a positive integer, got ${partitions}`)
    }
    if (key !== undefined) return fnv1a32(key) % partitions
    if (this.#next < 0) this.#next = Math.floor(this.#options.random() * partitions)
    if (this.#options.keyless === 'round-robin') {
      const index = this.#next % partitions
      this.#next = (this.#next + 1) % 0x7fff_ffff
      return index
    }
    const s = this.#sticky
    if (
      s !== undefined &&
      s.partition < partitions &&
      s.messages < this.#options.batchMax &&
      s.bytes < this.#options.batchBytesMax &&
      !load(s.partition).stalled
    ) {
      s.messages++
      s.bytes += bytes
      return s.partition
    }
    const partition = this.#leastLoaded(partitions, load)
    this.#sticky = { partition, messages: 1, bytes }
    return partition
  }

  /** The partition with the fewest queued messages (stalled ones last), from the next in turn. */
  #leastLoaded(partitions: number, load: (partition: number) => LaneLoad): number {
    const start = this.#next % partitions
    let best = start
    let bestRank = Number.POSITIVE_INFINITY
    for (let i = 0; i < partitions; i++) {
      const p = (start + i) % partitions
      const l = load(p)
      const rank = (l.stalled ? Number.MAX_SAFE_INTEGER / 2 : 0) + l.queued
      if (rank < bestRank) {
        best = p
        bestRank = rank
      }
    }
    this.#next = (best + 1) % partitions
    return best
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
