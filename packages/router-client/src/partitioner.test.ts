import { describe, expect, it } from 'vitest'
import { fnv1a32, Partitioner } from './partitioner'

describe('Partitioner', () => {
  it('hashes with FNV-1a (reference vectors)', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5)
    expect(fnv1a32('a')).toBe(0xe40c292c)
    expect(fnv1a32('foobar')).toBe(0xbf9cf968)
  })
  it('sends one key to one partition', () => {
    const p = new Partitioner()
    const first = p.choose(8, 'user-42')
    for (let i = 0; i < 10; i++) expect(p.choose(8, 'user-42')).toBe(first)
  })
  it('round-robins messages without a key', () => {
    const p = new Partitioner()
    expect([0, 1, 2, 3, 4].map(() => p.choose(3))).toEqual([0, 1, 2, 0, 1])
  })
  it('rejects a bad partition count', () => {
    expect(() => new Partitioner().choose(0)).toThrow(RangeError)
  })
})
