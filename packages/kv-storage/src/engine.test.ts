import { describe, expect, it } from 'vitest'
import { compareKeys, inRange } from './engine'

const b = (...xs: number[]) => Uint8Array.from(xs)

describe('compareKeys', () => {
  it('orders bytewise, unsigned, shorter prefix first', () => {
    expect(compareKeys(b(1, 2), b(1, 3))).toBeLessThan(0)
    expect(compareKeys(b(0xff), b(0x01))).toBeGreaterThan(0)
    expect(compareKeys(b(1), b(1, 0))).toBeLessThan(0)
    expect(compareKeys(b(4, 5), b(4, 5))).toBe(0)
  })
})

describe('inRange', () => {
  it('honours every bound', () => {
    expect(inRange(b(2), { gte: b(2), lt: b(3) })).toBe(true)
    expect(inRange(b(3), { gte: b(2), lt: b(3) })).toBe(false)
    expect(inRange(b(2), { gt: b(2) })).toBe(false)
    expect(inRange(b(2), { lte: b(2) })).toBe(true)
  })
})
