import { describe, expect, it } from 'vitest'
import { BoundedCache } from './bounded-cache'

describe('BoundedCache', () => {
  it('keeps at most entriesMax entries, dropping the oldest insertion first', () => {
    const c = new BoundedCache<number, string>(2)
    c.set(1, 'a')
    c.set(2, 'b')
    c.set(1, 'a2') // an update keeps its place and drops nothing
    expect(c.size).toBe(2)
    c.set(3, 'c')
    expect(c.get(1)).toBeUndefined()
    expect(c.get(2)).toBe('b')
    expect(c.get(3)).toBe('c')
    c.delete(2)
    expect(c.get(2)).toBeUndefined()
    expect(c.size).toBe(1)
  })

  it('refuses a bound below one entry', () => {
    expect(() => new BoundedCache(0)).toThrow()
  })
})
