import type { Counters, QueueSample } from '@mq/console'
import { largestTargets } from '../metrics/weight-figures'
import { NO_COUNTS, storedMessages } from './queue-depth'

export interface QueueHistoryLimits {
  /** Samples older than this are dropped. */
  readonly keepMs: number
  /** A sample closer than this to the previous one is not kept. */
  readonly intervalMsMin: number
  /** Queues tracked at most; the one sampled least recently goes first. */
  readonly queuesMax: number
  /** Weights kept per sample, at most: those with the largest target share (a queue may have 1,000). */
  readonly weightsMax: number
}

export const DEFAULT_HISTORY_LIMITS: QueueHistoryLimits = {
  keepMs: 10 * 60_000,
  intervalMsMin: 1_000,
  queuesMax: 256,
  weightsMax: 16,
}

/**
 * The recent samples of each watched queue, kept in memory by the node serving the console:
 * at most `keepMs / intervalMsMin + 2` samples of at most `weightsMax` weights each, for each of
 * at most `queuesMax` queues. A queue is keyed by name and incarnation, so a queue deleted and
 * created again starts a new history.
 */
export class QueueHistory {
  readonly #limits: QueueHistoryLimits
  readonly #tracks = new Map<string, { kept: QueueSample[]; latest: QueueSample | undefined }>()

  constructor(limits: QueueHistoryLimits = DEFAULT_HISTORY_LIMITS) {
    this.#limits = limits
  }

  /**
   * Adds `sample` and returns the queue's samples, oldest first, ending with `sample`. The
   * samples kept are at least `intervalMsMin` apart; a newer one closer than that to the last
   * kept is returned after them (until the next one replaces it), so reading often shows the
   * newest figures without growing the list. Of the sample's weights only the `weightsMax`
   * with the largest target share are kept (in the sample's order). A sample older than the
   * last kept (the wall clock stepped back) starts the queue's history afresh: kept, it would
   * never be followed by a sample far enough after it, and the rates would stay frozen until
   * the clock caught up.
   */
  record(key: string, given: QueueSample): readonly QueueSample[] {
    const sample = { ...given, weights: largestTargets(given.weights, this.#limits.weightsMax) }
    let track = this.#tracks.get(key)
    this.#tracks.delete(key) // re-inserted below: the map's order is recency
    const steppedBack = (track?.kept.at(-1)?.atMs ?? sample.atMs) > sample.atMs
    if (!track || steppedBack) track = { kept: [], latest: undefined }
    const last = track.kept.at(-1)
    if (!last || sample.atMs - last.atMs >= this.#limits.intervalMsMin) {
      track.kept.push(sample)
      track.latest = undefined
    } else {
      track.latest = sample
    }
    const oldest = sample.atMs - this.#limits.keepMs
    const stale = track.kept.findIndex((s) => s.atMs >= oldest)
    if (stale > 0) track.kept.splice(0, stale)
    this.#tracks.set(key, track)
    while (this.#tracks.size > this.#limits.queuesMax) {
      const first = this.#tracks.keys().next().value as string
      this.#tracks.delete(first)
    }
    return track.latest ? [...track.kept, track.latest] : track.kept
  }

  get size(): number {
    return this.#tracks.size
  }
}

/**
 * The net change of stored messages per second over the samples of the last `windowMs`
 * (0 with fewer than two samples): positive while the queue grows, negative while it drains.
 */
export function netRatePerS(samples: readonly QueueSample[], windowMs = 60_000): number {
  const span = windowOf(samples, windowMs)
  if (!span) return 0
  const [first, last] = span
  return ((storedMessages(last.depth) - storedMessages(first.depth)) * 1_000) / (last.atMs - first.atMs)
}

/**
 * Each counter's change per second over the samples of the last `windowMs` (all 0 with fewer
 * than two samples). The counters are the partitions' own, replicated ones, so a leader change
 * or a partition move does not disturb them; a queue created again has a history of its own.
 */
export function counterRatesPerS(samples: readonly QueueSample[], windowMs = 60_000): Counters {
  const span = windowOf(samples, windowMs)
  if (!span) return NO_COUNTS
  const [first, last] = span
  const rates = { ...NO_COUNTS }
  for (const k of Object.keys(rates) as (keyof Counters)[]) {
    rates[k] = (Math.max(0, last.counters[k] - first.counters[k]) * 1_000) / (last.atMs - first.atMs)
  }
  return rates
}

/** The first sample within `windowMs` of the last, and the last; undefined when they are one. */
function windowOf(samples: readonly QueueSample[], windowMs: number): [QueueSample, QueueSample] | undefined {
  const last = samples.at(-1)
  if (!last) return undefined
  const first = samples.find((s) => s.atMs >= last.atMs - windowMs)
  if (!first || first === last || last.atMs <= first.atMs) return undefined
  return [first, last]
}
