import { describe, expect, it } from 'vitest'
import { preferredLeaders, transfersFor } from './leader-balance'
import { LeaderBalanceCache } from './leader-balance-cache'
import { MetaState } from './meta-state'
import { stateWith } from './test-state'

const nodes = ['n1', 'n2', 'n3']

/** Three nodes and six groups of all three, every group led by n1. */
function ledByOne(): MetaState {
  const s = stateWith(
    3,
    Array.from({ length: 6 }, () => nodes),
  )
  for (const g of s.groups())
    s.apply({ type: 'reportLeader', groupId: g.groupId, leaderId: 'n1', term: 2 }, 2)
  return s
}

function input(leaders = new Set(nodes), overrides = new Map<number, string>()) {
  return { leaders, keepers: new Set(nodes), stable: new Set(nodes), overrides }
}

describe('LeaderBalanceCache', () => {
  it('answers each node as transfersFor does, computing once for one revision and input', () => {
    const s = ledByOne()
    const cache = new LeaderBalanceCache()
    const preferred = preferredLeaders(s, new Set(nodes), input())
    for (const n of nodes) expect(cache.transfersFor(s, n, input())).toEqual(transfersFor(s, n, preferred))
    expect(cache.transfersFor(s, 'n1', input())).toHaveLength(4)
    expect(cache.computed).toBe(1)
  })

  it('computes again after a command applied, a node set changed or an override changed', () => {
    const s = ledByOne()
    const cache = new LeaderBalanceCache()
    cache.transfersFor(s, 'n1', input())
    // n2 takes a group over: n1 is asked for one transfer fewer.
    s.apply({ type: 'reportLeader', groupId: 1, leaderId: 'n2', term: 3 }, 3)
    expect(cache.transfersFor(s, 'n1', input())).toHaveLength(3)
    expect(cache.computed).toBe(2)
    // n3 may no longer be given leaderships: n2 takes them all.
    const toN2 = cache.transfersFor(s, 'n1', input(new Set(['n1', 'n2'])))
    expect(toN2.every((t) => t.toNodeId === 'n2')).toBe(true)
    expect(cache.computed).toBe(3)
    const overrides = new Map([[6, 'n3']])
    expect(cache.transfersFor(s, 'n1', input(new Set(nodes), overrides))).toContainEqual({
      groupId: 6,
      toNodeId: 'n3',
    })
    expect(cache.computed).toBe(4)
    // The caller's map changing afterwards is a change too (the cache kept a copy).
    overrides.set(5, 'n3')
    cache.transfersFor(s, 'n1', input(new Set(nodes), overrides))
    expect(cache.computed).toBe(5)
  })

  it('computes again for another state object at the same revision (a replica restored)', () => {
    const image = ledByOne().snapshot()
    const restored = (leaderId: string) => {
      const s = new MetaState()
      s.restore(image)
      s.apply({ type: 'reportLeader', groupId: 1, leaderId, term: 3 }, 3)
      return s
    }
    const [a, b] = [restored('n2'), restored('n3')]
    expect(a.revision()).toBe(b.revision())
    const cache = new LeaderBalanceCache()
    cache.transfersFor(a, 'n1', input())
    expect(cache.transfersFor(b, 'n1', input())).toEqual(
      transfersFor(b, 'n1', preferredLeaders(b, new Set(nodes), input())),
    )
    expect(cache.computed).toBe(2)
  })
})
