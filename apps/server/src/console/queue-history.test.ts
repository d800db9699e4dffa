import type { QueueSample } from '@mq/console'
import { describe, expect, it } from 'vitest'
import { netRatePerS, QueueHistory } from './queue-history'

const at = (atMs: number, ready = 0): QueueSample => ({
  atMs,
  depth: { ready, delayed: 0, leased: 0, dead: 0, oldestAgeMs: 0 },
  weights: [],
})

describe('QueueHistory', () => {
  it('keeps samples at least the interval apart, and only those within keepMs', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 4 })
    h.record('q#1', at(0))
    h.record('q#1', at(500))
    expect(h.record('q#1', at(1_000)).map((s) => s.atMs)).toEqual([0, 1_000])
    expect(h.record('q#1', at(10_500)).map((s) => s.atMs)).toEqual([1_000, 10_500])
  })

  it('tracks at most queuesMax queues, dropping the one sampled least recently', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 2 })
    h.record('a#1', at(0))
    h.record('b#1', at(0))
    h.record('a#1', at(2_000))
    h.record('c#1', at(2_000))
    expect(h.size).toBe(2)
    expect(h.record('a#1', at(4_000))).toHaveLength(3)
    expect(h.record('b#1', at(4_000))).toHaveLength(1)
  })
})

describe('netRatePerS', () => {
  it('is the change of stored messages per second over the window, 0 without two samples', () => {
    expect(netRatePerS([])).toBe(0)
    expect(netRatePerS([at(0, 5)])).toBe(0)
    expect(netRatePerS([at(0, 100), at(2_000, 120), at(4_000, 80)])).toBe(-5)
    expect(netRatePerS([at(0, 1_000), at(60_000, 100), at(70_000, 200)], 30_000)).toBe(10)
  })
})
