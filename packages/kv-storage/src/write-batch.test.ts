import { describe, expect, it } from 'vitest'
import { InvalidArgumentError } from './errors'
import { checkOps, checkRange, WriteBatch } from './write-batch'

const b = (...xs: number[]) => Uint8Array.from(xs)

describe('WriteBatch', () => {
  it('collects ops in order and counts their bytes', () => {
    const batch = new WriteBatch()
      .put(b(1), b(1, 2, 3))
      .del(b(2))
      .clear(b(3), b(4, 0))
    batch.add([{ type: 'put', key: b(5), value: b() }])
    expect(batch.ops.map((o) => o.type)).toEqual(['put', 'del', 'clear', 'put'])
    expect(batch.length).toBe(4)
    expect(batch.byteLength).toBe(4 + 1 + 3 + 1)
  })
})

describe('checkOps / checkRange', () => {
  it('accept well-formed input and reject the rest with InvalidArgumentError', () => {
    expect(() => checkOps(new WriteBatch().put(b(1), b(2)).ops)).not.toThrow()
    for (const bad of [
      [{ type: 'put', key: b(1) }],
      [{ type: 'del', key: [1] }],
      [{ type: 'clear', gte: b(1) }],
      [{ type: 'merge', key: b(1) }],
      [null],
    ]) {
      expect(() => checkOps(bad as never)).toThrow(InvalidArgumentError)
    }
    expect(() => checkRange({ gte: 'a' })).toThrow(InvalidArgumentError)
    expect(() => checkRange({ limit: -1 })).toThrow(/limit/)
    expect(() => checkRange({ gt: b(1), limit: 0 })).not.toThrow()
  })
})
