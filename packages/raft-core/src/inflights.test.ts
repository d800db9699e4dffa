import { describe, expect, it } from 'vitest'
import { Inflights } from './inflights'

describe('Inflights', () => {
  it('fills up by count, frees acknowledged messages in order', () => {
    const w = new Inflights(3, 1000)
    w.add(5, 1)
    w.add(9, 1)
    expect(w.full()).toBe(false)
    w.add(12, 1)
    expect(w.full()).toBe(true)
    expect(() => w.add(13, 1)).toThrow(/full/)
    w.freeLE(9)
    expect(w.count()).toBe(1)
    w.add(15, 1)
    w.add(20, 1)
    expect(w.full()).toBe(true)
    w.freeFirstOne()
    expect(w.count()).toBe(2)
  })

  it('fills up by bytes', () => {
    const w = new Inflights(100, 10)
    w.add(1, 6)
    expect(w.full()).toBe(false)
    w.add(2, 4)
    expect(w.full()).toBe(true)
    w.freeLE(1)
    expect(w.full()).toBe(false)
  })
})
