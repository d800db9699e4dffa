import { describe, expect, it } from 'vitest'
import { type LeaderBalanceOptions, preferredLeaders, transfersFor } from './leader-balance'
import { type GroupRecord, MetaState } from './meta-state'

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

  it('chooses as the plain scan of every group each round did, over random clusters', () => {
    let seed = 7
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648
      return Math.floor((seed / 2147483648) * n)
    }
    for (let run = 0; run < 2000; run++) {
      const nodes = Array.from({ length: 1 + random(9) }, (_, i) => `n${i + 1}`)
      const s = new MetaState()
      for (const n of nodes) s.apply({ type: 'registerNode', nodeId: n, address: `${n}:1` }, 1)
      const groups = 1 + random(40)
      for (let g = 0; g < groups; g++) {
        const replicas = nodes.filter(() => random(2) === 0).slice(0, 1 + random(5))
        s.apply({ type: 'createGroup', replicas: replicas.length > 0 ? replicas : [nodes[0] as string] }, 1)
      }
      for (const g of s.groups()) {
        if (random(5) === 0) continue
        const leaderId = g.replicas[random(g.replicas.length)] as string
        s.apply({ type: 'reportLeader', groupId: g.groupId, leaderId, term: 2 }, 2)
      }
      const some = () => new Set(nodes.filter(() => random(5) !== 0))
      const alive = some()
      const overrides = new Map<number, string>()
      for (const g of s.groups())
        if (random(8) === 0) overrides.set(g.groupId, nodes[random(nodes.length)] as string)
      const options = { overrides, keepers: some(), stable: some() }
      expect(preferredLeaders(s, alive, options), `run ${run}`).toEqual(plainScan(s, alive, options))
    }
  })
})

/**
 * The balancing as it was before rounds looked only at the most loaded nodes (each round
 * scanned every group's replicas): the reference its choices must match.
 */
function plainScan(
  state: MetaState,
  alive: ReadonlySet<string>,
  options: LeaderBalanceOptions,
): Map<number, string> {
  const overrides = options.overrides ?? new Map<number, string>()
  const keepers = options.keepers ?? alive
  const stable = options.stable ?? alive
  const target = (node: string) => alive.has(node) && stable.has(node)
  const rotation = (group: GroupRecord) =>
    group.replicas.map((_, i) => group.replicas[(group.groupId + i) % group.replicas.length] as string)
  const preferred = new Map<number, string>()
  const load = new Map<string, number>()
  const assign = (groupId: number, node: string): void => {
    const before = preferred.get(groupId)
    if (before !== undefined) load.set(before, (load.get(before) ?? 1) - 1)
    preferred.set(groupId, node)
    load.set(node, (load.get(node) ?? 0) + 1)
  }
  const pinned = new Set<number>()
  const movable: GroupRecord[] = []
  const unled: GroupRecord[] = []
  for (const group of state.groups()) {
    const override = overrides.get(group.groupId)
    if (override !== undefined && alive.has(override) && group.replicas.includes(override)) {
      assign(group.groupId, override)
      pinned.add(group.groupId)
    } else if (
      group.leaderId !== '' &&
      keepers.has(group.leaderId) &&
      group.replicas.includes(group.leaderId)
    ) {
      assign(group.groupId, group.leaderId)
      movable.push(group)
    } else if (group.replicas.some(target)) {
      unled.push(group)
    }
  }
  for (const group of unled) {
    const live = rotation(group).filter(target)
    let choice = live[0] as string
    for (const candidate of live) if ((load.get(candidate) ?? 0) < (load.get(choice) ?? 0)) choice = candidate
    assign(group.groupId, choice)
    movable.push(group)
  }
  movable.sort((a, b) => a.groupId - b.groupId)
  for (let round = 0; round < movable.length * Math.max(alive.size, 1); round++) {
    let best: { groupId: number; to: string; gap: number } | undefined
    for (const group of movable) {
      if (pinned.has(group.groupId)) continue
      const from = preferred.get(group.groupId) as string
      for (const to of rotation(group)) {
        if (to === from || !target(to)) continue
        const gap = (load.get(from) ?? 0) - (load.get(to) ?? 0)
        if (gap >= 2 && (best === undefined || gap > best.gap)) best = { groupId: group.groupId, to, gap }
      }
    }
    if (best === undefined) break
    assign(best.groupId, best.to)
  }
  return preferred
}
