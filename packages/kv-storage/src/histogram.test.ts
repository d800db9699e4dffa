import { describe, expect, it } from 'vitest'
import { Histogram, powersOfTwo, quantileOf } from './histogram'

describe('Histogram', () => {
  it('counts values into buckets by upper bound, with an overflow bucket', () => {
    const h = new Histogram([1, 2, 4])
    for (const v of [0.5, 1, 1.5, 3, 4, 100]) h.record(v)
    const s = h.snapshot()
    expect(s.counts).toEqual([2, 1, 2, 1])
    expect(s).toMatchObject({ count: 6, min: 0.5, max: 100, sum: 110 })
    expect(quantileOf(s, 0.5)).toBe(2)
    expect(quantileOf(s, 0.8)).toBe(4)
    expect(quantileOf(s, 1)).toBe(100)
    expect(quantileOf(new Histogram([1]).snapshot(), 0.5)).toBe(0)
  })

  it('refuses bounds that do not increase', () => {
    expect(() => new Histogram([1, 1])).toThrow()
    expect(powersOfTwo(1, 8)).toEqual([1, 2, 4, 8])
  })
})
