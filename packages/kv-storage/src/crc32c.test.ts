import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { crc32c } from './crc32c'

const ascii = (s: string) => new TextEncoder().encode(s)

/** Bit by bit, no tables: the definition the table-driven code must agree with. */
function reference(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0xffffffff
  for (let i = start; i < end; i++) {
    crc ^= bytes[i] as number
    for (let k = 0; k < 8; k++) crc = crc & 1 ? 0x82f63b78 ^ (crc >>> 1) : crc >>> 1
  }
  return ~crc >>> 0
}

describe('crc32c', () => {
  it('matches the published check values', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283)
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa)
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43)
    expect(crc32c(new Uint8Array())).toBe(0)
  })

  it('agrees with the bit-by-bit definition on any bytes, from any start to any end', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 100 }), fc.nat(), fc.nat(), (bytes, x, y) => {
        const start = bytes.length === 0 ? 0 : x % (bytes.length + 1)
        const end = start + (y % (bytes.length - start + 1))
        expect(crc32c(bytes, start, end)).toBe(reference(bytes, start, end))
      }),
      { numRuns: 500 },
    )
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
