import { describe, expect, it } from 'vitest'
import { backoffMs, DEFAULT_BACKOFF, delay } from './backoff'

describe('backoffMs', () => {
  it('grows exponentially up to the cap', () => {
    const top = () => 0.999999
    expect(backoffMs(DEFAULT_BACKOFF, 0, top)).toBe(24)
    expect(backoffMs(DEFAULT_BACKOFF, 3, top)).toBe(199)
    expect(backoffMs(DEFAULT_BACKOFF, 30, top)).toBe(999)
  })
  it('draws the full jitter range', () => {
    expect(backoffMs(DEFAULT_BACKOFF, 5, () => 0)).toBe(0)
    expect(backoffMs(DEFAULT_BACKOFF, 2, () => 0.5)).toBe(50)
  })
})

describe('delay', () => {
  it('ends early when aborted', async () => {
    const controller = new AbortController()
    const started = performance.now()
    const waiting = delay(10_000, controller.signal)
    controller.abort()
    await waiting
    expect(performance.now() - started).toBeLessThan(1_000)
  })
})
