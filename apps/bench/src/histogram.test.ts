import { describe, expect, it } from 'vitest'
import { LatencyHistogram, latencyOf, Timeline } from './histogram'
import { percentiles } from './percentiles'

describe('LatencyHistogram', () => {
  it('agrees with exact nearest-rank percentiles to 3 significant digits', () => {
    // A skewed distribution: mostly ~1 ms, a tail up to 2 s.
    let seed = 42
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed / 2 ** 31
    }
    const xs = Array.from({ length: 20_000 }, () => (rand() < 0.98 ? 0.2 + rand() * 2 : 10 + rand() * 2000))
    const h = new LatencyHistogram()
    for (const x of xs) h.record(x)
    const exact = percentiles(xs)
    const got = h.summary()
    expect(got.count).toBe(exact.count)
    for (const k of ['p50', 'p90', 'p99', 'p999', 'max'] as const) {
      expect(Math.abs(got[k] - exact[k]) / exact[k]).toBeLessThan(0.002)
    }
    expect(got.p999).toBeLessThanOrEqual(got.max)
  })

  it('merges runs by adding counts, not by averaging percentiles', () => {
    const fast = new LatencyHistogram()
    const slow = new LatencyHistogram()
    for (let i = 0; i < 990; i++) fast.record(1)
    for (let i = 0; i < 10; i++) slow.record(100)
    fast.add(slow)
    expect(fast.count).toBe(1000)
    expect(fast.summary().p50).toBeCloseTo(1, 2)
    expect(fast.summary().p999).toBeCloseTo(100, 0)
  })

  it('refuses to summarise an empty run and leaves it out of latencyOf', () => {
    const h = new LatencyHistogram()
    expect(() => h.summary()).toThrow(/no samples/)
    const one = new LatencyHistogram()
    one.record(5)
    expect(Object.keys(latencyOf({ empty: h, one }))).toEqual(['one'])
  })
})

describe('Timeline', () => {
  it('buckets events per second with their latency', () => {
    const t = new Timeline(500)
    for (let i = 0; i < 10; i++) t.record(100, 2)
    t.record(1200, 8)
    const ps = t.points()
    expect(ps.map((p) => p.tS)).toEqual([0, 0.5, 1])
    expect(ps.map((p) => p.perS)).toEqual([20, 0, 2])
    expect(ps[0]?.p50Ms).toBeCloseTo(2, 2)
    expect(ps[2]?.p99Ms).toBeCloseTo(8, 2)
  })

  it('rates the last, partial bucket over the time the run lasted', () => {
    const t = new Timeline(1000)
    for (let i = 0; i < 10; i++) t.record(500)
    for (let i = 0; i < 5; i++) t.record(1100)
    expect(t.points(1250).map((p) => p.perS)).toEqual([10, 20])
    expect(t.points().map((p) => p.perS)).toEqual([10, 5])
  })

  it('is bounded: events past bucketsMax are dropped', () => {
    const t = new Timeline(1000, 3)
    t.record(10_000)
    expect(t.points()).toEqual([])
  })
})
