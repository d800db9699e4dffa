import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { crc32c } from './crc32c'

const ascii = (s: string) => new TextEncoder().encode(s)

describe('crc32c', () => {
  it('matches the published check values', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283)
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa)
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43)
    expect(crc32c(new Uint8Array())).toBe(0)
  })

  it('continues across chunks: crc(a ++ b) = crc(b, seed crc(a))', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.uint8Array({ maxLength: 40 }), (a, b) => {
        const ab = new Uint8Array(a.length + b.length)
        ab.set(a)
        ab.set(b, a.length)
        expect(crc32c(b, 0, b.length, crc32c(a))).toBe(crc32c(ab))
        expect(crc32c(ab, a.length, ab.length, crc32c(ab, 0, a.length))).toBe(crc32c(ab))
      }),
    )
  })
})
