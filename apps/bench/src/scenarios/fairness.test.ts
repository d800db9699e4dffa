import { describe, expect, it } from 'vitest'
import { analyseShares, FAIRNESS_DEFAULTS, parseWeights, runFairness } from './fairness'

describe('analyseShares', () => {
  it('finds no deviation in an ideal interleaving', () => {
    // weights 1 and 3: a repeating pattern 3,3,1,3
    const order = Array.from({ length: 400 }, (_, i) => (i % 4 === 2 ? 1 : 3))
    const a = analyseShares(order, [1, 3], [100, 300], 40)
    expect(a.targets).toEqual([0.25, 0.75])
    // The 100th lease of weight 1 (index 398) exhausts its backlog.
    expect(a.measured).toBe(399)
    expect(a.deviationMax).toBeLessThanOrEqual(0.025)
    expect(a.overallDeviation).toBeLessThan(0.005)
    expect(a.samples.length).toBeGreaterThan(10)
  })

  it('reports the worst window of a scheduler that serves one weight first', () => {
    const order = [...Array(300).fill(3), ...Array(100).fill(1)]
    const a = analyseShares(order, [1, 3], [100, 300], 40)
    // Measured only while both were backlogged: up to the 300th lease of weight 3.
    expect(a.measured).toBe(300)
    expect(a.deviationMax).toBeCloseTo(0.25, 4)
  })

  it('refuses a lease of an unknown weight', () => {
    expect(() => analyseShares([5], [1, 3], [1, 3], 1)).toThrow(/weight 5/)
  })

  it('parses weight lists', () => {
    expect(parseWeights('1, 3,9')).toEqual([1, 3, 9])
    expect(() => parseWeights('0,1')).toThrow()
  })
})

describe('fairness scenario, in process', () => {
  it('keeps every window of 1,3,9 within 5 percentage points of its target', async () => {
    const r = await runFairness({}, { ...FAIRNESS_DEFAULTS, inProcess: true, perWeightUnit: 100 })
    expect(r.metrics.leased).toBe(1300)
    expect(r.metrics.measured).toBeGreaterThan(1000)
    expect(r.metrics.deviationMax).toBeLessThanOrEqual(0.05)
    expect(r.fairness?.targets).toEqual([0.0769, 0.2308, 0.6923])
    expect(r.fairness?.samples.length).toBeGreaterThan(10)
  })
})
