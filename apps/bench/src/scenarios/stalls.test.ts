import { describe, expect, it } from 'vitest'
import { StallTracker } from './stalls'

/** Acks of `partition` every `everyMs` from `fromMs` up to (not including) `toMs`. */
function acks(t: StallTracker, partition: number, fromMs: number, toMs: number, everyMs = 10): void {
  for (let at = fromMs; at < toMs; at += everyMs) t.ack(partition, at)
}

describe('StallTracker', () => {
  it('splits gaps at the fault: the longest before is the baseline, the longest after is the stall', () => {
    const t = new StallTracker(2, 0)
    acks(t, 0, 0, 1_000)
    acks(t, 1, 5, 1_000)
    t.ack(0, 1_030) // a 40 ms gap before the fault
    t.fault(1_100)
    t.ack(0, 1_350) // partition 0 fails over: 320 ms
    acks(t, 0, 1_360, 2_000)
    acks(t, 1, 1_005, 2_000)
    const s = t.end(2_000)
    expect(s.gapMsMaxBeforeFault).toBe(40)
    expect(s.stallMsMax).toBe(320)
    expect(s.stallPartition).toBe(0)
    expect(s.stallEndAtMs).toBe(1_350)
    expect(s.stallOpenAtEnd).toBe(false)
    expect(s.unrecovered).toEqual([])
  })

  // The audit's case: a gap was recorded only when a later ack closed it, so a partition that
  // never acked again after the kill read as no stall at all, and the run as a pass.
  it('counts a partition that never acks again as a stall up to the end, and as unrecovered', () => {
    const t = new StallTracker(2, 0)
    acks(t, 0, 0, 1_000)
    acks(t, 1, 5, 1_000)
    t.fault(1_000)
    acks(t, 1, 1_005, 4_000) // partition 1 carries on; partition 0's last ack was at 990
    const s = t.end(4_000)
    expect(s.stallMsMax).toBe(3_010)
    expect(s.stallPartition).toBe(0)
    expect(s.stallOpenAtEnd).toBe(true)
    expect(s.stallEndAtMs).toBe(4_000)
    expect(s.unrecovered).toEqual([0])
  })

  it('counts a partition that never acked at all from the start', () => {
    const t = new StallTracker(3, 100)
    acks(t, 0, 100, 1_000)
    acks(t, 1, 100, 1_000)
    t.fault(500)
    const s = t.end(1_000)
    expect(s.unrecovered).toEqual([2])
    expect(s.stallMsMax).toBe(900)
    expect(s.stallPartition).toBe(2)
  })

  it('opens a series at its first ack (no stall for connection set-up) and ends the open gaps quietly when all ack on', () => {
    const t = new StallTracker(1, 0)
    t.ack(0, 400) // first ack 400 ms after the start: not a gap
    acks(t, 0, 410, 600)
    t.fault(600)
    acks(t, 0, 600, 1_000)
    const s = t.end(1_000)
    expect(s.gapMsMaxBeforeFault).toBe(10)
    expect(s.stallMsMax).toBe(10)
    expect(s.stallOpenAtEnd).toBe(false)
    expect(s.unrecovered).toEqual([])
  })

  it('without a fault, every gap is baseline and only a partition with no ack is unrecovered', () => {
    const t = new StallTracker(2, 0)
    acks(t, 0, 0, 1_000)
    const s = t.end(1_000)
    expect(s.stallPartition).toBe(-1)
    expect(s.unrecovered).toEqual([1])
  })
})
