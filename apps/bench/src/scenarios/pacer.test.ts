import { describe, expect, it } from 'vitest'
import { paced } from './pacer'

/** Blocks the event loop for `ms` (a GC pause, a busy core), `afterMs` from now. */
function blockLater(afterMs: number, ms: number): void {
  setTimeout(() => {
    const t = performance.now()
    while (performance.now() - t < ms) {}
  }, afterMs)
}

describe('paced', () => {
  it('gives every send its intended time on the schedule, start + i / rate', async () => {
    const intended: number[] = []
    const calledAt: number[] = []
    const sends = await paced(2_000, 100, async (i, intendedAtMs) => {
      intended[i] = intendedAtMs
      calledAt[i] = performance.now()
    })
    await Promise.all(sends)
    expect(sends).toHaveLength(100)
    const start = intended[0] ?? Number.NaN
    for (let i = 0; i < 100; i++) {
      expect(intended[i]).toBeCloseTo(start + i * 0.5, 9)
      // never called before it is due
      expect(calledAt[i]).toBeGreaterThanOrEqual(intended[i] ?? Number.POSITIVE_INFINITY)
    }
  })

  // The auditor's case (/tmp/audit-bench/co.mts): with a 150 ms client stall at 50 ms into a
  // 1,000/s schedule, the sends that came due during it go out late, in a burst. A latency
  // measured from when send(i) is called omits that delay; from the intended time it counts it.
  it('keeps the intended time through a blocked event loop, so the delay is counted (no coordinated omission)', async () => {
    const lateMs: number[] = []
    blockLater(50, 150)
    const sends = await paced(1_000, 400, async (i, intendedAtMs) => {
      lateMs[i] = performance.now() - intendedAtMs
    })
    await Promise.all(sends)
    expect(lateMs).toHaveLength(400)
    expect(lateMs.every((x) => x >= 0)).toBe(true)
    // The send due just after the stall began waited for nearly all of it.
    expect(Math.max(...lateMs)).toBeGreaterThanOrEqual(100)
    // Many sends came due during the stall, each is late by its own share of it.
    expect(lateMs.filter((x) => x > 50).length).toBeGreaterThanOrEqual(50)
  })

  it('refuses a rate that is not positive', async () => {
    await expect(paced(0, 1, async () => {})).rejects.toThrow(/ratePerS must be positive/)
  })
})
