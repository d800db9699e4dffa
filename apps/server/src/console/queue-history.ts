import type { QueueSample } from '@mq/console'
import { storedMessages } from './queue-depth'

export interface QueueHistoryLimits {
  /** Samples older than this are dropped. */
  readonly keepMs: number
  /** A sample closer than this to the previous one is not kept. */
  readonly intervalMsMin: number
  /** Queues tracked at most; the one sampled least recently goes first. */
  readonly queuesMax: number
}

export const DEFAULT_HISTORY_LIMITS: QueueHistoryLimits = {
  keepMs: 10 * 60_000,
  intervalMsMin: 1_000,
  queuesMax: 256,
}

/**
 * The recent samples of each watched queue, kept in memory by the node serving the console:
 * at most `keepMs / intervalMsMin` samples for each of at most `queuesMax` queues. A queue is
 * keyed by name and incarnation, so a queue deleted and created again starts a new history.
 */
export class QueueHistory {
  readonly #limits: QueueHistoryLimits
  readonly #samples = new Map<string, QueueSample[]>()

  constructor(limits: QueueHistoryLimits = DEFAULT_HISTORY_LIMITS) {
    this.#limits = limits
  }

  /** Adds `sample` (unless too close to the last one) and returns the queue's samples, oldest first. */
  record(key: string, sample: QueueSample): readonly QueueSample[] {
    let list = this.#samples.get(key)
    if (list)
      this.#samples.delete(key) // re-inserted below: the map's order is recency
    else list = []
    const last = list.at(-1)
    if (!last || sample.atMs - last.atMs >= this.#limits.intervalMsMin) list.push(sample)
    const oldest = sample.atMs - this.#limits.keepMs
    const stale = list.findIndex((s) => s.atMs >= oldest)
    if (stale > 0) list.splice(0, stale)
    this.#samples.set(key, list)
    while (this.#samples.size > this.#limits.queuesMax) {
      const first = this.#samples.keys().next().value as string
      this.#samples.delete(first)
    }
    return list
  }

  get size(): number {
    return this.#samples.size
  }
}

/**
 * The net change of stored messages per second over the samples of the last `windowMs`
 * (0 with fewer than two samples): positive while the queue grows, negative while it drains.
 */
export function netRatePerS(samples: readonly QueueSample[], windowMs = 60_000): number {
  const last = samples.at(-1)
  if (!last) return 0
  const first = samples.find((s) => s.atMs >= last.atMs - windowMs)
  if (!first || first === last) return 0
  return ((storedMessages(last.depth) - storedMessages(first.depth)) * 1_000) / (last.atMs - first.atMs)
}
