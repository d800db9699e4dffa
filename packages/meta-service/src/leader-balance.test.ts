import { describe, expect, it } from 'vitest'
import { preferredLeaders, transfersFor } from './leader-balance'
import { MetaState } from './meta-state'

function state(groups: number): MetaState {
  const s = new MetaState()
  for (const n of ['n1', 'n2', 'n3']) s.apply({ type: 'registerNode', nodeId: n, address: `${n}:1` }, 1)
  for (let g = 0; g < groups; g++) s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 1)
  return s
}

describe('leader balance', () => {
  it('spreads leaderships evenly over live nodes', () => {
    const p = preferredLeaders(state(6), new Set(['n1', 'n2', 'n3']))
    const counts = new Map<string, number>()
    for (const leader of p.values()) counts.set(leader, (counts.get(leader) ?? 0) + 1)
    expect([...counts.values()]).toEqual([2, 2, 2])
  })

  it('leaves dead nodes out and honours an operator override', () => {
    const s = state(3)
    const p = preferredLeaders(s, new Set(['n1', 'n3']), new Map([[2, 'n3']]))
    expect([...p.values()].every((l) => l !== 'n2')).toBe(true)
    expect(p.get(2)).toBe('n3')
    expect(preferredLeaders(s, new Set(['n1']), new Map([[2, 'n2']])).get(2)).toBe('n1')
  })

  it('asks a leader to hand over the groups it should not lead', () => {
    const s = state(3)
    for (const g of [1, 2, 3]) s.apply({ type: 'reportLeader', groupId: g, leaderId: 'n1', term: 1 }, 2)
    const p = preferredLeaders(s, new Set(['n1', 'n2', 'n3']))
    const transfers = transfersFor(s, 'n1', p)
    expect(transfers).toHaveLength(2)
    expect(new Set(transfers.map((t) => t.toNodeId))).toEqual(new Set(['n2', 'n3']))
    expect(transfersFor(s, 'n2', p)).toEqual([])
  })
})
