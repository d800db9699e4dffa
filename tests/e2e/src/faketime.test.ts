import { describe, expect, it } from 'vitest'
import { clockAheadEnv, skewOf } from './faketime'

describe('fault-run clock skew', () => {
  it('leaves n1 on time and puts every other node, joined ones too, at a fixed offset within the bound', () => {
    expect(skewOf(7, 'n1', 30_000)).toBe(0)
    expect(skewOf(7, 'n2', 0)).toBe(0)
    const offsets = ['n2', 'n3', 'n4', 'n5', 'n6', 'n9'].map((id) => skewOf(7, id, 30_000))
    for (const o of offsets) expect(Math.abs(o)).toBeLessThanOrEqual(30_000)
    expect(new Set(offsets).size).toBeGreaterThan(3)
    expect(
      offsets.map((_, i) => skewOf(7, ['n2', 'n3', 'n4', 'n5', 'n6', 'n9'][i] as string, 30_000)),
    ).toEqual(offsets)
    expect(skewOf(8, 'n2', 30_000)).not.toBe(skewOf(7, 'n2', 30_000))
  })

  it('shifts the wall clock either way and leaves the monotonic clock alone', () => {
    expect(clockAheadEnv(12_500)).toMatchObject({ FAKETIME: '+12.500s', FAKETIME_DONT_FAKE_MONOTONIC: '1' })
    expect(clockAheadEnv(-3_000).FAKETIME).toBe('-3.000s')
  })
})
