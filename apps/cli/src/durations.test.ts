import { describe, expect, it } from 'vitest'
import { DURATION_MS_MAX, formatDuration, parseDuration } from './durations'

describe('parseDuration', () => {
  it.each([
    ['0', 0],
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h', 3_600_000],
    ['1.5s', 1_500],
    ['1m30s', 90_000],
    ['2h15m', 8_100_000],
    [' 10s ', 10_000],
    ['0s', 0],
    ['7d', 604_800_000],
    ['1d12h', 129_600_000],
  ])('reads %s as %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms)
  })

  it.each([
    ['', /empty/],
    ['10', /no unit/],
    ['-5s', /not a duration/],
    ['5 s', /not a duration/],
    ['5w', /not a duration/],
    ['30d', /longer than the maximum of 596h31m23s647ms/],
    ['abc', /not a duration/],
    ['s', /not a duration/],
    ['1.5ms', /whole number of milliseconds/],
    ['1000h', /longer than the maximum/],
  ])('rejects %j with a message that says why', (text, why) => {
    expect(() => parseDuration(text)).toThrow(why)
  })

  it('takes a larger maximum when given one', () => {
    expect(parseDuration('365d', { maxMs: Number.MAX_SAFE_INTEGER })).toBe(31_536_000_000)
    expect(() => parseDuration('2h', { maxMs: 3_600_000 })).toThrow(/longer than the maximum of 1h/)
  })

  it('says what a duration looks like', () => {
    expect(() => parseDuration('soon')).toThrow(/e\.g\. 500ms, 30s, 5m, 1h/)
  })
})

describe('formatDuration', () => {
  it.each([
    [0, '0'],
    [500, '500ms'],
    [30_000, '30s'],
    [90_000, '1m30s'],
    [1_500, '1s500ms'],
    [3_600_000, '1h'],
  ])('formats %d as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text)
  })

  it('round-trips through parseDuration', () => {
    for (const ms of [0, 1, 999, 1_000, 61_001, 3_599_999, DURATION_MS_MAX]) {
      expect(parseDuration(formatDuration(ms))).toBe(ms)
    }
  })
})
