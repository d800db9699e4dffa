import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { parseLeaseId } from './lease-id'

describe('parseLeaseId', () => {
  it('reads every canonical "<id>.<delivery>" back', () => {
    const positive = fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER })
    fc.assert(
      fc.property(positive, positive, (id, delivery) => {
        expect(parseLeaseId(`${id}.${delivery}`)).toEqual([id, delivery])
      }),
    )
  })

  it('accepts a string only when it is the canonical form of what it returns', () => {
    const text = fc.oneof(
      fc.string(),
      fc.stringMatching(/^[0-9+\-e. ]{0,24}$/),
      fc
        .tuple(fc.bigInt({ min: 0n, max: 2n ** 60n }), fc.bigInt({ min: 0n, max: 2n ** 60n }))
        .map(([a, b]) => `${a}.${b}`),
    )
    fc.assert(
      fc.property(text, (s) => {
        const parsed = parseLeaseId(s)
        if (parsed !== undefined) expect(`${parsed[0]}.${parsed[1]}`).toBe(s)
      }),
    )
  })

  it('rejects zero, leading zeros, signs, exponents, unsafe integers and non-strings', () => {
    for (const bad of ['0.1', '1.0', '01.1', '1.01', '+1.1', '1e2.1', '1.', '.1', '1', '1.1.1', ' 1.1', '']) {
      expect(parseLeaseId(bad)).toBeUndefined()
    }
    expect(parseLeaseId('9007199254740992.1')).toBeUndefined()
    expect(parseLeaseId('9007199254740991.1')).toEqual([Number.MAX_SAFE_INTEGER, 1])
    expect(parseLeaseId(7 as unknown as string)).toBeUndefined()
  })
})
