import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { SendDeadlines } from '../src/send-deadline'

describe('SendDeadlines (one timer for a producer’s delivery timeouts)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('expires the sends in call order, undoing each one’s stage first, skipping those stopped', () => {
    const deadlines = new SendDeadlines(1_000)
    const events: string[] = []
    const a = deadlines.start(() => events.push('a expired'))
    a.waiting(() => events.push('a undone'))
    vi.advanceTimersByTime(400)
    const b = deadlines.start(() => events.push('b expired'))
    const c = deadlines.start(() => events.push('c expired'))
    c.waiting(() => events.push('c undone'))
    b.stop() // its batch was sent
    expect(vi.getTimerCount()).toBe(1)
    vi.advanceTimersByTime(599)
    expect(events).toEqual([])
    vi.advanceTimersByTime(1)
    expect(events).toEqual(['a undone', 'a expired'])
    expect([a.expired, b.expired, c.expired]).toEqual([true, false, false])
    vi.advanceTimersByTime(400)
    expect(events).toEqual(['a undone', 'a expired', 'c undone', 'c expired'])
    expect(deadlines.live).toBe(0)
    // Stopped or expired: nothing more happens to it.
    a.stop()
    c.waiting(() => events.push('late'))
    expect(events).toHaveLength(4)
  })

  it('holds no timer once no deadline is live (a process with nothing to send can exit)', () => {
    const deadlines = new SendDeadlines(30_000)
    const sends = Array.from({ length: 5_000 }, () => deadlines.start(() => {}))
    expect(vi.getTimerCount()).toBe(1)
    for (const s of sends) s.stop()
    expect(vi.getTimerCount()).toBe(0)
    expect(deadlines.live).toBe(0)
    // Started again afterwards: a timer again, for the new one.
    const later = deadlines.start(() => {})
    expect(vi.getTimerCount()).toBe(1)
    vi.advanceTimersByTime(30_000)
    expect(later.expired).toBe(true)
    expect(vi.getTimerCount()).toBe(0)
  })

  it('sets no timer for Infinity, and refuses a timeout a timer cannot hold', () => {
    const deadlines = new SendDeadlines(Number.POSITIVE_INFINITY)
    const d = deadlines.start(() => {})
    expect(vi.getTimerCount()).toBe(0)
    d.stop()
    expect(() => new SendDeadlines(2 ** 31)).toThrow(RangeError)
    expect(() => new SendDeadlines(Number.NaN)).toThrow(RangeError)
  })
})
