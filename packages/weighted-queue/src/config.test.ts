import { describe, expect, it } from 'vitest'
import { QUEUE_CONFIG_DEFAULT, RETRY_BACKOFF_MS_MAX, resolveConfig, retryBackoffMs } from './config'

describe('retryBackoffMs', () => {
  const config = (retryBackoffMinMs: number, retryBackoffMaxMs: number) =>
    resolveConfig(QUEUE_CONFIG_DEFAULT, { retryBackoffMinMs, retryBackoffMaxMs })

  it('is 0 without a minimum, whatever the maximum', () => {
    expect(retryBackoffMs(config(0, 60_000), 3)).toBe(0)
  })

  it('doubles the minimum per attempt after the first, up to the maximum', () => {
    const c = config(1_000, 10_000)
    expect([1, 2, 3, 4, 5, 6].map((n) => retryBackoffMs(c, n))).toEqual([
      1_000, 2_000, 4_000, 8_000, 10_000, 10_000,
    ])
  })

  it('keeps the minimum when the maximum is below it, and stays finite for any attempt count', () => {
    expect(retryBackoffMs(config(5_000, 0), 7)).toBe(5_000)
    expect(retryBackoffMs(config(1, RETRY_BACKOFF_MS_MAX), 1_000)).toBe(RETRY_BACKOFF_MS_MAX)
    expect(retryBackoffMs(config(RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_MAX), 1_000)).toBe(
      RETRY_BACKOFF_MS_MAX,
    )
  })

  it('refuses bounds past a day', () => {
    expect(() => config(RETRY_BACKOFF_MS_MAX + 1, 0)).toThrow(
      /retryBackoffMinMs must be an integer from 0 to 86400000/,
    )
  })
})
