import { describe, expect, it } from 'vitest'
import { ON_HEAP_BYTES_MAX } from './byte-copies'
import { KeyScratch } from './key-scratch'

describe('KeyScratch', () => {
  it('places a key of up to 64 bytes in its scratch buffer, byte for byte and of its length', () => {
    const scratch = new KeyScratch()
    for (let n = 0; n <= ON_HEAP_BYTES_MAX; n++) {
      const key = Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 0xff)
      const placed = scratch.place(key)
      expect(placed).not.toBe(key)
      expect(placed).toEqual(key)
      expect(placed.buffer.byteLength).toBe(ON_HEAP_BYTES_MAX)
    }
  })

  it('overwrites the last placed key with the next one, and hands a larger key through as it is', () => {
    const scratch = new KeyScratch()
    const first = scratch.place(Uint8Array.of(1, 2, 3))
    const second = scratch.place(Uint8Array.of(9, 8, 7))
    expect(second).toBe(first)
    expect(first).toEqual(Uint8Array.of(9, 8, 7))
    const large = new Uint8Array(ON_HEAP_BYTES_MAX + 1).fill(5)
    expect(scratch.place(large)).toBe(large)
  })
})
