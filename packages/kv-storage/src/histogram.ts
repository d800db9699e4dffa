/**
 * A fixed-bucket histogram: bounded memory, cheap to record, enough for "what do batch sizes
 * and fsync latencies look like". Bucket i counts values <= bounds[i] (and > bounds[i - 1]);
 * the last bucket counts values above every bound.
 */
export interface HistogramSnapshot {
  readonly count: number
  readonly sum: number
  readonly min: number
  readonly max: number
  /** Upper bounds of the buckets; `counts` has one more entry (the overflow bucket). */
  readonly bounds: readonly number[]
  readonly counts: readonly number[]
}

export class Histogram {
  private readonly counts: number[]
  private count = 0
  private sum = 0
  private min = Number.POSITIVE_INFINITY
  private max = Number.NEGATIVE_INFINITY

  constructor(private readonly bounds: readonly number[]) {
    for (let i = 1; i < bounds.length; i++) {
      if (!((bounds[i] as number) > (bounds[i - 1] as number)))
        throw new Error('histogram bounds must increase')
    }
    this.counts = new Array(bounds.length + 1).fill(0)
  }

  record(value: number): void {
    let lo = 0
    let hi = this.bounds.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (value <= (this.bounds[mid] as number)) hi = mid
      else lo = mid + 1
    }
    this.counts[lo] = (this.counts[lo] as number) + 1
    this.count++
    this.sum += value
    if (value < this.min) this.min = value
    if (value > this.max) this.max = value
  }

  snapshot(): HistogramSnapshot {
    return {
      count: this.count,
      sum: this.sum,
      min: this.count === 0 ? 0 : this.min,
      max: this.count === 0 ? 0 : this.max,
      bounds: this.bounds,
      counts: this.counts.slice(),
    }
  }
}

/**
 * The smallest bucket bound at or below which at least `q` (0..1) of the values lie; the
 * histogram's max when that is the overflow bucket; 0 when empty.
 */
export function quantileOf(h: HistogramSnapshot, q: number): number {
  if (h.count === 0) return 0
  const want = Math.ceil(q * h.count)
  let seen = 0
  for (let i = 0; i < h.counts.length; i++) {
    seen += h.counts[i] as number
    if (seen >= want) return i < h.bounds.length ? Math.min(h.bounds[i] as number, h.max) : h.max
  }
  return h.max
}

/** Powers of two from `from` to `to` inclusive: 1, 2, 4, … */
export function powersOfTwo(from: number, to: number): number[] {
  const out: number[] = []
  for (let v = from; v <= to; v *= 2) out.push(v)
  return out
}
