import { describe, expect, it } from 'vitest'
import { steadyClock } from './steady-clock'

describe('steadyClock', () => {
  it('reads the wall clock at start plus monotonic time since, and ignores steps of the wall clock', () => {
    let wall = 1_800_000_000_000
    let mono = 5_000
    const now = steadyClock(
      () => wall,
      () => mono,
    )
    expect(now()).toBe(1_800_000_000_000)
    mono += 1_000
    wall += 1_000
    expect(now()).toBe(1_800_000_001_000)
    wall += 3 * 3_600_000 // NTP steps the wall clock 3 h ahead
    mono += 500
    expect(now()).toBe(1_800_000_001_500)
    wall -= 6 * 3_600_000 // and back, past where it was
    mono += 500
    expect(now()).toBe(1_800_000_002_000)
    mono += 0.75 // performance.now() has fractions: readings go on the wire as whole ms
    expect(now()).toBe(1_800_000_002_000)
  })
})
