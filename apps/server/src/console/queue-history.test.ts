import type { QueueSample } from '@mq/console'
import { describe, expect, it } from 'vitest'
import { counterRatesPerS, netRatePerS, QueueHistory } from './queue-history'

const at = (atMs: number, ready = 0, enqueued = 0, acked = 0): QueueSample => ({
  atMs,
  depth: { ready, delayed: 0, leased: 0, dead: 0, waiting: 0, oldestAgeMs: 0 },
  counters: { enqueued, delivered: acked, acked, nacked: 0, expired: 0, deadLettered: 0, discarded: 0 },
  weights: [],
})

describe('QueueHistory', () => {
  it('ends with the newest sample, keeps the others the interval apart, and only within keepMs', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 4, weightsMax: 16 })
    const times = (t: number) => h.record('q#1', at(t)).map((s) => s.atMs)
    expect(times(0)).toEqual([0])
    expect(times(500)).toEqual([0, 500])
    expect(times(900)).toEqual([0, 900])
    expect(times(1_000)).toEqual([0, 1_000])
    expect(times(1_200)).toEqual([0, 1_000, 1_200])
    expect(times(10_500)).toEqual([1_000, 10_500])
  })

  it('holds at most keepMs / intervalMsMin + 2 samples however often it is read', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 4, weightsMax: 16 })
    let longest = 0
    for (let t = 0; t < 60_000; t += 37) longest = Math.max(longest, h.record('q#1', at(t)).length)
    expect(longest).toBeLessThanOrEqual(12)
    expect(longest).toBeGreaterThanOrEqual(11)
  })

  it('keeps the weightsMax weights with the largest target share of each sample, in their order', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 4, weightsMax: 3 })
    // 1,000 weights, weight w with target share w / 1,000, listed by weight as the stats are.
    const weights = Array.from({ length: 1_000 }, (_, i) => ({
      weight: i + 1,
      ready: 1,
      targetShare: (i + 1) / 1_000,
      achievedShare: 0,
    }))
    const moved = weights.map((w) => (w.weight === 7 ? { ...w, targetShare: 2 } : w))
    h.record('q#1', { ...at(0), weights })
    const samples = h.record('q#1', { ...at(1_000), weights: moved })
    expect(samples.map((s) => s.weights.map((w) => w.weight))).toEqual([
      [998, 999, 1_000],
      [7, 999, 1_000],
    ])
    // Fewer than the bound: every weight, as given.
    expect(h.record('q#2', { ...at(0), weights: weights.slice(0, 2) })[0]?.weights).toHaveLength(2)
  })

  it('starts afresh when the wall clock steps back behind the last sample kept', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 4, weightsMax: 16 })
    for (const t of [10_000, 11_000, 12_000]) h.record('q#1', at(t, 0, t / 100))
    // The clock goes back 5 s: the old samples would be "from the future" and nothing newer
    // would be kept (nor would the rates move) until the clock passed 13 s again.
    expect(h.record('q#1', at(7_000, 0, 200)).map((s) => s.atMs)).toEqual([7_000])
    const after = h.record('q#1', at(8_000, 0, 210))
    expect(after.map((s) => s.atMs)).toEqual([7_000, 8_000])
    expect(counterRatesPerS(after).enqueued).toBe(10)
  })

  it('tracks at most queuesMax queues, dropping the one sampled least recently', () => {
    const h = new QueueHistory({ keepMs: 10_000, intervalMsMin: 1_000, queuesMax: 2, weightsMax: 16 })
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

describe('counterRatesPerS', () => {
  it('is each counter’s change per second over the window, 0 without two samples', () => {
    expect(counterRatesPerS([at(0, 0, 10, 5)])).toMatchObject({ enqueued: 0, acked: 0 })
    const samples = [at(0, 0, 100, 0), at(30_000, 0, 400, 60), at(70_000, 0, 1_000, 460)]
    // The window is the last 60 s: from the 30 s sample to the 70 s one.
    expect(counterRatesPerS(samples)).toEqual({
      enqueued: 15,
      delivered: 10,
      acked: 10,
      nacked: 0,
      expired: 0,
      deadLettered: 0,
      discarded: 0,
    })
  })
})
