/** Percentiles of a whole run, computed over every sample (never averaged). */
export interface Percentiles {
  readonly count: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly p999: number
  readonly max: number
}

/**
 * Returns the nearest-rank percentiles of `samples` (any order; not modified).
 * Throws when there are no samples.
 */
export function percentiles(samples: readonly number[]): Percentiles {
  if (samples.length === 0) throw new Error('percentiles: no samples')
  const sorted = Float64Array.from(samples).sort()
  const at = (q: number): number => sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] as number
  return {
    count: sorted.length,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    p999: at(0.999),
    max: sorted[sorted.length - 1] as number,
  }
}
