import { describe, expect, it } from 'vitest'
import { Prng } from './prng'

describe('Prng', () => {
  it('replays the same sequence for the same seed', () => {
    const a = new Prng(42)
    const b = new Prng(42)
    const xs = Array.from({ length: 100 }, () => a.nextU32())
    const ys = Array.from({ length: 100 }, () => b.nextU32())
    expect(xs).toEqual(ys)
  })

  it('gives different sequences for different seeds', () => {
    const a = new Prng(1)
    const b = new Prng(2)
    expect(Array.from({ length: 8 }, () => a.nextU32())).not.toEqual(
      Array.from({ length: 8 }, () => b.nextU32()),
    )
  })

  it('keeps below() inside its bound and covers it roughly uniformly', () => {
    const p = new Prng(7)
    const counts = new Array<number>(10).fill(0)
    for (let i = 0; i < 100_000; i++) {
      const v = p.below(10)
      expect(v).toBeGreaterThanOrEqual(0)
      expect(v).toBeLessThan(10)
      counts[v] = (counts[v] ?? 0) + 1
    }
    for (const c of counts) expect(Math.abs(c - 10_000)).toBeLessThan(600)
  })

  it('rejects a bad bound', () => {
    expect(() => new Prng(1).below(0)).toThrow(RangeError)
    expect(() => new Prng(1).below(1.5)).toThrow(RangeError)
  })
})
