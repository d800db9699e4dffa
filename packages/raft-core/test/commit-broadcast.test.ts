import { describe, expect, it } from 'vitest'
import { MessageType } from '../src/index'
import { Harness } from './harness'

describe('commitBroadcast', () => {
  const appsTo = (h: Harness, id: string) =>
    h.delivered.filter((m) => m.type === MessageType.App && m.to === id)

  it('by default, a leader sends a new commit index at once in an empty App', () => {
    const h = new Harness(['a', 'b', 'c'])
    h.elect('a')
    h.delivered.length = 0
    h.propose('a', 'x')
    for (const id of ['b', 'c']) {
      expect(appsTo(h, id).map((m) => m.entries.length)).toEqual([1, 0]) // the entry, then its commit
      expect(h.node(id).applied).toEqual(['x'])
    }
  })

  it('when false, followers learn the commit from the next App or heartbeat, and one App fewer goes out', () => {
    const h = new Harness(['a', 'b', 'c'], { commitBroadcast: false })
    h.elect('a')
    h.delivered.length = 0
    const i = h.propose('a', 'x')
    expect(h.raw('a').status().commit).toBe(i)
    expect(h.node('a').applied).toEqual(['x'])
    for (const id of ['b', 'c']) {
      expect(appsTo(h, id).map((m) => m.entries.length)).toEqual([1])
      expect(h.node(id).applied).toEqual([]) // stored, not yet known to be committed
    }
    // The next entry carries the commit of the one before it.
    h.propose('a', 'y')
    for (const id of ['b', 'c']) expect(h.node(id).applied).toEqual(['x'])
    // A heartbeat carries the rest.
    h.tick('a')
    h.settle()
    for (const id of ['b', 'c']) expect(h.node(id).applied).toEqual(['x', 'y'])
  })

  it('rejects a value that is not a boolean', () => {
    // biome-ignore lint/suspicious/noExplicitAny: the wrong type is the point
    expect(() => new Harness(['a'], { commitBroadcast: 'no' as any })).toThrow(
      /commitBroadcast must be true or false/,
    )
  })
})
