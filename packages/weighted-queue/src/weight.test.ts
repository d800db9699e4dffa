import { describe, expect, it } from 'vitest'
import { InvalidArgumentError } from './errors'
import { parseWeight, WEIGHT_DEFAULT, WEIGHT_MAX, WEIGHT_MIN } from './weight'

describe('parseWeight', () => {
  it('defaults an absent weight', () => {
    expect(parseWeight(undefined)).toBe(WEIGHT_DEFAULT)
  })
  it('accepts the bounds', () => {
    expect(parseWeight(WEIGHT_MIN)).toBe(1)
    expect(parseWeight(WEIGHT_MAX)).toBe(1000)
  })
  it.each([0, 1001, 1.5, Number.NaN, -3])('rejects %s with a clear error', (w) => {
    expect(() => parseWeight(w)).toThrow(InvalidArgumentError)
    expect(() => parseWeight(w)).toThrow(/weight must be an integer from 1 to 1000/)
  })
})
