import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { ByteReader, ByteWriter, SLAB_BYTES, Slab, slab, utf8, utf8Length } from './bytes'

describe('ByteWriter / ByteReader', () => {
  it('round-trips varints over [0, 2^53), the 31-bit fast path and past it', () => {
    const value = fc.oneof(
      fc.integer({ min: 0, max: 0x7f }),
      fc.integer({ min: 0x80, max: 0x7fff_ffff }),
      fc.integer({ min: 0x8000_0000, max: Number.MAX_SAFE_INTEGER }),
    )
    fc.assert(
      fc.property(fc.array(value, { maxLength: 20 }), (values) => {
        const w = new ByteWriter(4)
        for (const v of values) w.varint(v)
        const r = new ByteReader(w.finishInSlab())
        expect(values.map(() => r.varint())).toEqual(values)
        expect(r.done).toBe(true)
      }),
    )
  })

  it('writes LEB128: golden bytes at the 7-bit and 31-bit boundaries', () => {
    const bytes = (v: number) => [...new ByteWriter().varint(v).finish()]
    expect(bytes(0x7f)).toEqual([0x7f])
    expect(bytes(0x80)).toEqual([0x80, 0x01])
    expect(bytes(0x7fff_ffff)).toEqual([0xff, 0xff, 0xff, 0xff, 0x07])
    expect(bytes(0x8000_0000)).toEqual([0x80, 0x80, 0x80, 0x80, 0x08])
    expect(bytes(Number.MAX_SAFE_INTEGER)).toEqual([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f])
  })

  it('hands out copies and views that are independent of the writer and of each other', () => {
    const w = new ByteWriter()
    const small = w
      .reset()
      .bytes(Uint8Array.of(1, 2, 3))
      .finishInSlab()
    const large = w.reset().bytes(new Uint8Array(300).fill(7)).finishInSlab()
    w.reset().raw(new Uint8Array(400).fill(9))
    expect([...new ByteReader(small).bytes()]).toEqual([1, 2, 3])
    const body = new ByteReader(large).bytes()
    expect(body.length).toBe(300)
    expect(body.every((b) => b === 7)).toBe(true)
  })

  it('allocates zeroed arrays of the asked size from the slab, large ones apart', () => {
    for (const n of [0, 1, 64, 65, 1000, SLAB_BYTES / 4, SLAB_BYTES / 4 + 1, SLAB_BYTES]) {
      const a = slab.alloc(n)
      expect(a.length).toBe(n)
      expect(a.every((b) => b === 0)).toBe(true)
      a.fill(0xff)
    }
  })

  it('hands out views of slabs of the size it was made with, a new slab once one is full', () => {
    const small = new Slab(1024)
    const a = small.alloc(200)
    const b = small.alloc(200)
    expect(b.buffer).toBe(a.buffer)
    expect(a.buffer.byteLength).toBe(1024)
    expect(b.byteOffset).toBe(200)
    small.alloc(256)
    small.alloc(256)
    const d = small.alloc(200) // 912 bytes taken: 200 more do not fit
    expect(d.buffer).not.toBe(a.buffer)
    expect(d.byteOffset).toBe(0)
    // Above a quarter of its slab size (and up to 64 bytes): an array of its own.
    for (const n of [257, 64]) expect(small.alloc(n).buffer.byteLength).toBe(n)
    expect(small.alloc(256).buffer.byteLength).toBe(1024)
  })

  it('writes strings as UTF-8 with a length prefix (ASCII without the encoder) and reads them back', () => {
    const texts = [
      '',
      'a',
      '123.4',
      'x'.repeat(64),
      'y'.repeat(65),
      'é',
      'naïve-中文',
      '😀'.repeat(20),
      `${'z'.repeat(63)}é`,
    ]
    for (const text of texts) {
      const bytes = new ByteWriter(4).string(text).finish()
      const utf8 = new TextEncoder().encode(text)
      expect(bytes).toEqual(new ByteWriter(4).bytes(utf8).finish())
      expect(new ByteReader(bytes).string()).toBe(text)
    }
    expect(() => new ByteReader(Uint8Array.of(2, 0x61, 0xff)).string()).toThrow()
  })

  it('counts UTF-8 bytes as the encoder writes them, lone surrogates (U+FFFD, 3 bytes) too', () => {
    for (const text of ['', 'abc', 'é', '中', '😀', '\uD800\u4E00', '\uD800', '\uDC00x', 'a\uD83D'])
      expect(utf8Length(text), JSON.stringify(text)).toBe(utf8(text).length)
    fc.assert(fc.property(fc.string({ unit: 'binary' }), (text) => utf8Length(text) === utf8(text).length))
  })
})
