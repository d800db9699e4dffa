import { describe, expect, it } from 'vitest'
import { Progress, ProgressState } from './progress'

describe('Progress', () => {
  it('probe: one App at a time, a rejection moves next back using the hint', () => {
    const p = new Progress(11, 4, 1000)
    p.sentEntries(1, 11, 1)
    expect(p.isPaused()).toBe(true)
    expect(p.maybeDecrTo(9, 3)).toBe(false) // not the probe we sent: stale
    expect(p.maybeDecrTo(10, 3)).toBe(true)
    expect(p.next).toBe(4)
    expect(p.isPaused()).toBe(false)
  })

  it('replicate: pipelines until the window is full; a rejection falls back to match + 1', () => {
    const p = new Progress(1, 2, 1000)
    p.maybeUpdate(3)
    p.becomeReplicate()
    expect(p.state).toBe(ProgressState.Replicate)
    p.sentEntries(2, 5, 2)
    p.sentEntries(2, 7, 2)
    expect(p.next).toBe(8)
    expect(p.isPaused()).toBe(true)
    expect(p.maybeDecrTo(2, 0)).toBe(false) // at or below match: stale
    expect(p.maybeDecrTo(5, 0)).toBe(true)
    expect(p.next).toBe(4)
  })

  it('never moves match backwards (Invariant: 0 <= match < next)', () => {
    const p = new Progress(1, 2, 1000)
    expect(p.maybeUpdate(5)).toBe(true)
    expect(p.maybeUpdate(3)).toBe(false)
    expect(p.match).toBe(5)
    expect(p.next).toBeGreaterThan(p.match)
  })
})
