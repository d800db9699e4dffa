import { build, type Histogram } from 'hdr-histogram-js'
import type { Percentiles } from './percentiles'

/** Values are stored in microseconds; this is the largest one kept exactly (one hour). */
const HIGHEST_US = 3_600_000_000

/**
 * A latency histogram over a whole run (HDR, 3 significant digits, plain JS mode). Values
 * are recorded in milliseconds and kept in microseconds; values above one hour are clamped.
 * Percentiles are read from all recorded values, never averaged across windows.
 */
export class LatencyHistogram {
  readonly #h: Histogram = build({
    useWebAssembly: false,
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_US,
    numberOfSignificantValueDigits: 3,
    autoResize: false,
  })

  /** Records one latency in ms (negative values count as 0). */
  record(ms: number): void {
    const us = Math.min(HIGHEST_US, Math.max(0, Math.round(ms * 1000)))
    this.#h.recordValue(us)
  }

  /** Adds every value of `other` to this histogram. */
  add(other: LatencyHistogram): void {
    this.#h.add(other.#h)
  }

  get count(): number {
    return this.#h.totalCount
  }

  /**
   * The value at quantile `q` (0..1) in ms, to 3 significant digits (HDR reports the top of
   * a value's bucket, so it is capped at the exact maximum); 0 when empty.
   */
  quantileMs(q: number): number {
    if (this.#h.totalCount === 0) return 0
    return Math.min(this.#h.getValueAtPercentile(q * 100), this.#h.maxValue) / 1000
  }

  /** p50/p90/p99/p99.9/max in ms over every recorded value. Throws when empty. */
  summary(): Percentiles {
    if (this.#h.totalCount === 0) throw new Error('latency histogram: no samples')
    return {
      count: this.#h.totalCount,
      p50: this.quantileMs(0.5),
      p90: this.quantileMs(0.9),
      p99: this.quantileMs(0.99),
      p999: this.quantileMs(0.999),
      max: this.#h.maxValue / 1000,
    }
  }
}

/** One bucket of a timeline: events per second and latency in that window. */
export interface TimelinePoint {
  /** Bucket start, seconds since the run began. */
  readonly tS: number
  readonly perS: number
  readonly p50Ms: number
  readonly p99Ms: number
}

/** Events bucketed by time (for the charts): bounded to `bucketsMax` buckets. */
export class Timeline {
  readonly #counts: number[] = []
  readonly #latency: (LatencyHistogram | undefined)[] = []

  constructor(
    readonly bucketMs = 1000,
    readonly bucketsMax = 3600,
  ) {
    if (!(bucketMs > 0)) throw new RangeError(`timeline: bucketMs must be > 0, got ${bucketMs}`)
  }

  /** Counts an event at `atMs` since the start, with its latency when it has one. */
  record(atMs: number, latencyMs?: number): void {
    const i = Math.max(0, Math.floor(atMs / this.bucketMs))
    if (i >= this.bucketsMax) return
    while (this.#counts.length <= i) {
      this.#counts.push(0)
      this.#latency.push(undefined)
    }
    this.#counts[i] = (this.#counts[i] ?? 0) + 1
    if (latencyMs !== undefined) {
      let h = this.#latency[i]
      if (!h) {
        h = new LatencyHistogram()
        this.#latency[i] = h
      }
      h.record(latencyMs)
    }
  }

  /**
   * The buckets as points. With `endMs` (when the run ended) the last bucket's rate is over
   * the part of it the run lasted, not over a whole bucket.
   */
  points(endMs?: number): TimelinePoint[] {
    return this.#counts.map((count, i) => {
      const h = this.#latency[i]
      const startMs = i * this.bucketMs
      const spanMs =
        endMs !== undefined && endMs > startMs ? Math.min(this.bucketMs, endMs - startMs) : this.bucketMs
      return {
        tS: startMs / 1000,
        perS: round((count * 1000) / spanMs),
        p50Ms: round(h?.quantileMs(0.5) ?? 0),
        p99Ms: round(h?.quantileMs(0.99) ?? 0),
      }
    })
  }
}

/** Rounds to 3 decimals (report figures). */
export function round(x: number, digits = 3): number {
  const f = 10 ** digits
  return Math.round(x * f) / f
}

/** The summaries of the non-empty histograms, by name. */
export function latencyOf(hs: Readonly<Record<string, LatencyHistogram>>): Record<string, Percentiles> {
  const out: Record<string, Percentiles> = {}
  for (const [k, h] of Object.entries(hs)) if (h.count > 0) out[k] = h.summary()
  return out
}
