import { describe, expect, it } from 'vitest'
import { preferredLeaders, transfersFor } from './leader-balance'
import { MetaState } from './meta-state'

function state(groups: number): MetaState {
  const s = new MetaState()
  for (const n of ['n1', 'n2', 'n3']) s.apply({ type: 'registerNode', nodeId: n, address: `${n}:1` }, 1)
  for (let g = 0; g < groups; g++) s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 1)
  return s
}

/** Five nodes and eight groups of three replicas, each group on the next three nodes in turn. */
function fiveNodes(): MetaState {
  const nodes = ['n1', 'n2', 'n3', 'n4', 'n5']
  const s = new MetaState()
  for (const n of nodes) s.apply({ type: 'registerNode', nodeId: n, address: `${n}:1` }, 1)
  for (let g = 0; g < 8; g++) {
    s.apply({ type: 'createGroup', replicas: [0, 1, 2].map((i) => nodes[(g + i) % 5] as string) }, 1)
  }
  return s
}

function lead(s: MetaState, leaders: Record<number, string>, term = 2): void {
  for (const [g, leaderId] of Object.entries(leaders)) {
    const r = s.apply({ type: 'reportLeader', groupId: Number(g), leaderId, term }, 2)
    expect(r.ok).toBe(true)
  }
}

function loads(p: ReadonlyMap<number, string>): number[] {
  const counts = new Map<string, number>()
  for (const leader of p.values()) counts.set(leader, (counts.get(leader) ?? 0) + 1)
  return [...counts.values()].sort()
}

/** The groups whose preferred leader differs from the one the state records. */
function moves(s: MetaState, p: ReadonlyMap<number, string>): number[] {
  return s
    .groups()
    .filter((g) => p.get(g.groupId) !== g.leaderId)
    .map((g) => g.groupId)
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
    const p = preferredLeaders(s, new Set(['n1', 'n3']), { overrides: new Map([[2, 'n3']]) })
    expect([...p.values()].every((l) => l !== 'n2')).toBe(true)
    expect(p.get(2)).toBe('n3')
    expect(preferredLeaders(s, new Set(['n1']), { overrides: new Map([[2, 'n2']]) }).get(2)).toBe('n1')
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

  it('keeps every leader where it is while the spread is within one leadership', () => {
    const s = fiveNodes()
    const groups = s.groups().map((g) => g.groupId)
    // Each group led by its last replica: n3 n4 n5 n1 n2 n3 n4 n5 — 2, 1, 2, 2, 1 leaderships.
    lead(s, Object.fromEntries(groups.map((g) => [g, s.group(g)?.replicas[2] as string])))
    const p = preferredLeaders(s, new Set(['n1', 'n2', 'n3', 'n4', 'n5']))
    expect(moves(s, p)).toEqual([])
    for (const n of ['n1', 'n2', 'n3', 'n4', 'n5']) expect(transfersFor(s, n, p)).toEqual([])
  })

  it('gives a node back from the dead only the leaderships that even the spread out', () => {
    const s = state(6)
    const groups = s.groups().map((g) => g.groupId)
    // n3 was down: n1 and n2 took three groups each.
    lead(s, Object.fromEntries(groups.map((g, i) => [g, i < 3 ? 'n1' : 'n2'])))
    const p = preferredLeaders(s, new Set(['n1', 'n2', 'n3']))
    expect(loads(p)).toEqual([2, 2, 2])
    expect(moves(s, p)).toHaveLength(2)
    expect(transfersFor(s, 'n1', p)).toHaveLength(1)
    expect(transfersFor(s, 'n2', p)).toHaveLength(1)
  })

  it('moves no other leadership when a group is removed or added and the spread stays within one', () => {
    const s = state(6)
    const groups = s.groups().map((g) => g.groupId)
    lead(s, Object.fromEntries(groups.map((g, i) => [g, ['n3', 'n1', 'n2'][i % 3] as string])))
    const alive = new Set(['n1', 'n2', 'n3'])
    expect(moves(s, preferredLeaders(s, alive))).toEqual([])
    expect(s.apply({ type: 'removeGroup', groupId: groups[0] as number }, 3).ok).toBe(true)
    expect(moves(s, preferredLeaders(s, alive))).toEqual([])
    s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 4)
    const p = preferredLeaders(s, alive)
    expect(moves(s, p)).toHaveLength(1) // only the new group, which has no leader yet
    expect(loads(p)).toEqual([2, 2, 2])
  })

  it('lets a keeper whose heartbeat is late keep its groups, and gives it no new one', () => {
    const s = state(3)
    lead(s, { 1: 'n1', 2: 'n2' })
    const keepers = new Set(['n1', 'n2', 'n3'])
    const p = preferredLeaders(s, new Set(['n2', 'n3']), { keepers })
    expect(p.get(1)).toBe('n1')
    expect(p.get(2)).toBe('n2')
    expect(p.get(3)).toBe('n3')
    // Not a keeper either (dead or draining): its group goes to a live node.
    expect(preferredLeaders(s, new Set(['n2', 'n3'])).get(1)).not.toBe('n1')
  })

  it('gives a node that is not yet stable (just back) no leadership, unless an operator asks', () => {
    const s = state(6)
    const groups = s.groups().map((g) => g.groupId)
    lead(s, Object.fromEntries(groups.map((g, i) => [g, i < 3 ? 'n1' : 'n2'])))
    const alive = new Set(['n1', 'n2', 'n3'])
    const stable = new Set(['n1', 'n2'])
    const p = preferredLeaders(s, alive, { stable })
    expect(moves(s, p)).toEqual([])
    // Once stable, it gets its share.
    expect(moves(s, preferredLeaders(s, alive))).toHaveLength(2)
    // An operator's choice does not wait.
    const first = groups[0] as number
    expect(preferredLeaders(s, alive, { stable, overrides: new Map([[first, 'n3']]) }).get(first)).toBe('n3')
  })
})
