import { describe, expect, it } from 'vitest'
import { percentiles } from './percentiles'

describe('percentiles', () => {
  it('uses nearest rank over all samples', () => {
    const xs = Array.from({ length: 1000 }, (_, i) => 1000 - i) // 1000..1, unsorted
    expect(percentiles(xs)).toEqual({ count: 1000, p50: 500, p90: 900, p99: 990, p999: 999, max: 1000 })
  })
  it('handles one sample', () => {
    expect(percentiles([7]).p99).toBe(7)
  })
  it('refuses an empty run', () => {
    expect(() => percentiles([])).toThrow(/no samples/)
  })
})
