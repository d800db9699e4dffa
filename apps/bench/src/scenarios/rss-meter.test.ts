import { afterEach, describe, expect, it, vi } from 'vitest'
import { RSS_SAMPLES_MAX, RssMeter } from './rss-meter'

const MB = 1024 * 1024

afterEach(() => {
  vi.useRealTimers()
})

describe('RssMeter', () => {
  it('reports the resident set a third of the way in, at its peak and at the end', () => {
    vi.useFakeTimers()
    // 0..29 s: climbs to 300 MB by 10 s, peaks at 20 s, ends at 310 MB.
    const mbAt = (s: number) => (s < 10 ? 100 + 20 * s : s === 20 ? 400 : 300 + (s >= 29 ? 10 : 0))
    let second = 0
    const meter = RssMeter.start(() => mbAt(second) * MB)
    expect(meter).toBeDefined()
    for (second = 1; second < 30; second++) vi.advanceTimersByTime(1_000)
    second = 29
    expect(meter?.stop()).toEqual({ serverRssMbAtThird: 300, serverRssMbPeak: 400, serverRssMbEnd: 310 })
    // A second stop (the run's `finally`) samples nothing more and gives the same figures.
    second = 40
    expect(meter?.stop()).toEqual({ serverRssMbAtThird: 300, serverRssMbPeak: 400, serverRssMbEnd: 310 })
  })

  it('gives no figures when the servers cannot be read, or a node went away', () => {
    expect(RssMeter.start(undefined)).toBeUndefined()
    expect(RssMeter.start(() => undefined)).toBeUndefined()
    vi.useFakeTimers()
    let alive = true
    const meter = RssMeter.start(() => (alive ? 100 * MB : undefined))
    vi.advanceTimersByTime(3_000)
    alive = false
    vi.advanceTimersByTime(1_000)
    alive = true
    expect(meter?.stop()).toEqual({})
  })

  it('keeps at most RSS_SAMPLES_MAX samples over a long run, thinned evenly, the end included', () => {
    vi.useFakeTimers()
    let reads = 0
    let mb = 100
    const meter = RssMeter.start(() => {
      reads++
      return mb * MB
    }, 10)
    // Far more intervals than samples kept: the interval doubles as they are thinned.
    for (let i = 0; i < 3 * RSS_SAMPLES_MAX; i++) {
      if (i === RSS_SAMPLES_MAX) mb = 500
      vi.advanceTimersByTime(10)
      if (i === RSS_SAMPLES_MAX) mb = 100
    }
    mb = 120
    const figures = meter?.stop()
    expect(reads).toBeLessThan(3 * RSS_SAMPLES_MAX)
    expect(figures?.serverRssMbEnd).toBe(120)
    expect(figures?.serverRssMbAtThird).toBe(100)
  })
})
