import { describe, expect, it } from 'vitest'
import { ReadAheadBudget } from './read-ahead-budget'

describe('ReadAheadBudget', () => {
  it('drops the oldest holders until the total fits, the last one too when it alone is past the bound', () => {
    const budget = new ReadAheadBudget(100)
    const dropped: string[] = []
    const owners = { a: {}, b: {}, c: {} }
    const hold = (name: keyof typeof owners, bytes: number) =>
      budget.hold(owners[name], bytes, () => dropped.push(name))
    hold('a', 40)
    hold('b', 40)
    expect([budget.bytes, budget.owners, dropped]).toEqual([80, 2, []])
    // a holds again (it is the newest now), then c needs room: b, the oldest, goes.
    hold('a', 30)
    hold('c', 50)
    expect([budget.bytes, budget.owners, dropped]).toEqual([80, 2, ['b']])
    // Nothing kept: no longer counted, and never dropped.
    hold('a', 0)
    expect([budget.bytes, budget.owners]).toEqual([50, 1])
    hold('b', 120)
    expect([budget.bytes, budget.owners, dropped]).toEqual([0, 0, ['b', 'c', 'b']])
  })

  it('refuses a bound that is not a non-negative integer', () => {
    expect(() => new ReadAheadBudget(-1)).toThrow('bytesMax must be a non-negative integer, got -1')
    expect(() => new ReadAheadBudget(1.5)).toThrow(RangeError)
  })
})
