import { describe, expect, it } from 'vitest'
import { count, duration, percent, perSecond, rate } from './format'

describe('format', () => {
  it('counts with thousands separators', () => {
    expect(count(1_234_567)).toBe('1,234,567')
    expect(count(0)).toBe('0')
  })

  it('shows durations in their two largest units', () => {
    expect(duration(850)).toBe('850 ms')
    expect(duration(12_345)).toBe('12.3 s')
    expect(duration(245_000)).toBe('4m 05s')
    expect(duration(2 * 3_600_000 + 7 * 60_000)).toBe('2h 07m')
    expect(duration(3 * 86_400_000 + 4 * 3_600_000)).toBe('3d 04h')
  })

  it('shows shares as percentages and rates with a sign', () => {
    expect(percent(0.2345)).toBe('23.4%')
    expect(rate(12.46)).toBe('+12.5/s')
    expect(rate(-3)).toBe('-3.0/s')
    expect(rate(0.01)).toBe('0/s')
    expect(perSecond(12.46)).toBe('12.5/s')
    expect(perSecond(0.01)).toBe('0/s')
  })
})
