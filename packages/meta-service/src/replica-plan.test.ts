import { describe, expect, it } from 'vitest'
import type { MetaCommand } from './meta-commands'
import { MetaState } from './meta-state'
import { type ReplicaInput, replicaActions, replicasFor } from './replica-plan'
import { stateWith } from './test-state'

const cluster = stateWith

function must(s: MetaState, command: MetaCommand): void {
  const r = s.apply(command, 10)
  if (!r.ok) throw new Error(`${command.type}: ${r.message}`)
}

const all = (n: number) => new Set(Array.from({ length: n }, (_, i) => `n${i + 1}`))

/** Starts and finishes changes as the controller would, until there is nothing to do. */
function settle(s: MetaState, input: ReplicaInput): number {
  for (let round = 0; round < 100; round++) {
    for (const c of s.replicaChanges()) must(s, { type: 'finishReplicaChange', groupId: c.groupId })
    const actions = replicaActions(s, input)
    if (actions.length === 0) return round
    for (const a of actions) must(s, a)
    expect(s.replicaChanges().length).toBeLessThanOrEqual(input.changesMax)
  }
  throw new Error('replica placement did not settle')
}

function loads(s: MetaState): Map<string, number> {
  const out = new Map(s.nodes().map((n) => [n.nodeId, 0]))
  for (const g of s.groups()) for (const r of g.replicas) out.set(r, (out.get(r) ?? 0) + 1)
  return out
}

const G = ['n1', 'n2', 'n3']

describe('replicaActions (drain, dead nodes, joins)', () => {
  it('drains a node: every replica moves to the least loaded other node, then it holds none', () => {
    const s = cluster(4, [G, G, G])
    expect(s.apply({ type: 'drainNode', nodeId: 'n3' }, 5)).toEqual({ ok: true, value: 3 })
    // n4 is the only node to take them: it receives one at a time, though two may run.
    const first = replicaActions(s, { alive: all(4), lost: new Set(), changesMax: 2 })
    expect(first).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'drain' },
    ])
    settle(s, { alive: all(4), lost: new Set(), changesMax: 2 })
    expect(loads(s).get('n3')).toBe(0)
    for (const g of s.groups()) expect(new Set(g.replicas).size).toBe(3)
    expect(s.groupsOf('n3')).toEqual([])
  })

  it('replaces the replicas of a node lost past the timeout, only onto live nodes', () => {
    const s = cluster(5, [G, ['n1', 'n2', 'n4']])
    const alive = new Set(['n1', 'n2', 'n4', 'n5'])
    const actions = replicaActions(s, { alive, lost: new Set(['n3']), changesMax: 4 })
    expect(actions).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: 'n5', remove: 'n3', reason: 'dead' },
    ])
  })

  it("replaces a lost node's replicas in several groups at once, each onto a different node", () => {
    // n5 lost; each group misses a different live node.
    const s = cluster(5, [
      ['n1', 'n2', 'n5'],
      ['n1', 'n3', 'n5'],
      ['n2', 'n3', 'n5'],
      ['n1', 'n4', 'n5'],
    ])
    const input = { alive: all(4), lost: new Set(['n5']), changesMax: 3 }
    const actions = replicaActions(s, input)
    expect(actions).toHaveLength(3)
    expect(new Set(actions.map((a) => (a.type === 'abandonReplicaChange' ? '' : a.add))).size).toBe(3)
    expect(actions.every((a) => a.type === 'startReplicaChange' && a.remove === 'n5')).toBe(true)
    for (const a of actions) must(s, a)
    // The fourth waits for a slot (and for a node that receives nothing).
    expect(replicaActions(s, input)).toEqual([])
    settle(s, input)
    expect(s.groupsOf('n5')).toEqual([])
    for (const g of s.groups()) expect(new Set(g.replicas).size).toBe(3)
  })

  it('does nothing when no node can take the replica (3 nodes, one lost)', () => {
    const s = cluster(3, [G])
    expect(replicaActions(s, { alive: new Set(['n1', 'n2']), lost: new Set(['n3']), changesMax: 2 })).toEqual(
      [],
    )
  })

  it('spreads replicas onto a joined node until the nodes differ by at most one', () => {
    const s = cluster(4, [G, G, G, G])
    const input = { alive: all(4), lost: new Set<string>(), changesMax: 1 }
    settle(s, input)
    expect([...loads(s).values()]).toEqual([3, 3, 3, 3])
    for (const g of s.groups()) expect(new Set(g.replicas).size).toBe(3)
  })

  it('balances while a drained node is not alive: its replicas never come back to it', () => {
    // n5 drained, emptied and stopped (not removed yet); n4 joined. Balancing waited for n5 as
    // for a node briefly away until it counted as lost (--replace-dead-after-ms, 5 min).
    const s = cluster(5, [G, G, G, G])
    must(s, { type: 'drainNode', nodeId: 'n5' })
    const input = { alive: all(4), lost: new Set<string>(), changesMax: 1, abandon: true }
    expect(replicaActions(s, input)).toEqual([
      expect.objectContaining({ type: 'startReplicaChange', add: 'n4', reason: 'balance' }),
    ])
    // A node briefly away that is not being drained is still waited for.
    must(s, { type: 'undrainNode', nodeId: 'n5' })
    expect(replicaActions(s, input)).toEqual([])
  })

  it('grows groups created with fewer replicas up to the number wanted, one new replica per node at a time', () => {
    // A cluster founded by one node: its groups have one replica each; two nodes joined.
    const s = cluster(3, [['n1'], ['n1'], ['n1']])
    const input = { alive: all(3), lost: new Set<string>(), changesMax: 3, replicasWanted: 3 }
    expect(replicaActions(s, input)).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: 'n2', remove: '', reason: 'grow' },
      { type: 'startReplicaChange', groupId: 2, add: 'n3', remove: '', reason: 'grow' },
    ])
    settle(s, input)
    for (const g of s.groups()) expect([...g.replicas].sort()).toEqual(G)
    // Without the number wanted (a cluster below format level 25), nothing grows.
    const old = cluster(3, [['n1']])
    expect(replicaActions(old, { ...input, replicasWanted: undefined })).toEqual([])
    // A group a running scale plan removes does not grow.
    const shrinking = cluster(3, [['n1'], ['n1']])
    must(shrinking, { type: 'createQueue', name: 'q', config: { partitions: 2 } })
    must(shrinking, { type: 'scaleDataGroups', groups: 1 })
    const removing = shrinking.scale?.removing ?? []
    expect(removing).toHaveLength(1)
    const grown = replicaActions(shrinking, input)
    expect(grown.map((a) => a.groupId)).toEqual([1, 2].filter((g) => !removing.includes(g)))
  })

  it('wants the factor, or as many replicas as nodes, never an even count below the factor', () => {
    expect([1, 2, 3, 4, 5, 6].map((nodes) => replicasFor(3, nodes))).toEqual([1, 1, 3, 3, 3, 3])
    expect([1, 2, 3, 4, 5, 6].map((nodes) => replicasFor(5, nodes))).toEqual([1, 1, 3, 3, 5, 5])
    expect(replicasFor(2, 1)).toBe(1)
    expect(replicasFor(2, 2)).toBe(2)
    // A cluster of two nodes does not grow its one-replica groups (two would need both).
    const two = cluster(2, [['n1']])
    expect(replicaActions(two, { alive: all(2), lost: new Set(), changesMax: 3, replicasWanted: 3 })).toEqual(
      [],
    )
  })

  it('grows a group only as far as live, non-draining nodes allow, and replaces a lost replica first', () => {
    const s = cluster(4, [['n1', 'n2']])
    must(s, { type: 'drainNode', nodeId: 'n4' })
    const input = { alive: all(3), lost: new Set<string>(), changesMax: 3, replicasWanted: 5 }
    settle(s, input)
    expect(s.group(1)?.replicas).toEqual(['n1', 'n2', 'n3'])
    // n2 lost: replaced (by the joined n5), not grown around.
    must(s, { type: 'registerNode', nodeId: 'n5', address: 'n5:1' })
    const lost = { ...input, alive: new Set(['n1', 'n3', 'n5']), lost: new Set(['n2']) }
    expect(replicaActions(s, lost)).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: 'n5', remove: 'n2', reason: 'dead' },
    ])
  })

  it('shrinks groups above replicasMax one replica at a time: an away replica first, else a follower on the most loaded node', () => {
    const s = cluster(5, [
      ['n1', 'n2', 'n3', 'n4', 'n5'],
      ['n1', 'n2', 'n3', 'n4', 'n5'],
      ['n1', 'n2', 'n3'],
    ])
    must(s, { type: 'reportLeader', groupId: 1, leaderId: 'n5', term: 1 })
    must(s, { type: 'reportLeader', groupId: 2, leaderId: 'n5', term: 1 })
    const input = { alive: all(5), lost: new Set<string>(), changesMax: 3, replicasWanted: 3, replicasMax: 3 }
    // n1-n3 hold 3 replicas each, n4 and n5 two: a follower on the most loaded node goes
    // (highest id first), never the leader; n3 then holds fewer, so group 2 loses n2's.
    expect(replicaActions(s, input)).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: '', remove: 'n3', reason: 'shrink' },
      { type: 'startReplicaChange', groupId: 2, add: '', remove: 'n2', reason: 'shrink' },
    ])
    // A replica on a node not heard from lately goes first.
    const away = { ...input, alive: new Set(['n1', 'n2', 'n3', 'n5']) }
    expect(replicaActions(s, away).map((a) => (a.type === 'startReplicaChange' ? a.remove : ''))).toEqual([
      'n4',
      'n4',
    ])
    settle(s, input)
    for (const g of s.groups()) expect(g.replicas).toHaveLength(3)
    expect(s.group(1)?.replicas).toContain('n5')
    // Without replicasMax (a cluster below format level 34), nothing shrinks.
    const old = cluster(5, [['n1', 'n2', 'n3', 'n4', 'n5']])
    expect(replicaActions(old, { ...input, replicasMax: undefined })).toEqual([])
  })

  it('removes a draining or lost replica of a group above replicasMax instead of replacing it', () => {
    const s = cluster(6, [['n1', 'n2', 'n3', 'n4', 'n5']])
    must(s, { type: 'drainNode', nodeId: 'n2' })
    const input = { alive: all(6), lost: new Set(['n4']), changesMax: 3, replicasWanted: 3, replicasMax: 3 }
    expect(replicaActions(s, input)).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: '', remove: 'n2', reason: 'shrink' },
    ])
    settle(s, input)
    expect(s.group(1)?.replicas).toEqual(['n1', 'n3', 'n5'])
  })

  it('shrinking a group with a draining replica removes an away replica first', () => {
    // {n1, n2 draining, n3 away}, down to 2: without n2, {n1, n3} needs the away n3, so the
    // group's leader would wait on that shrink (replica-changer.ts) for as long as n3 is away,
    // and a shrink is never retargeted: the away n3 goes first, then n2 is replaced.
    const s = cluster(4, [G])
    must(s, { type: 'reportLeader', groupId: 1, leaderId: 'n1', term: 1 })
    must(s, { type: 'drainNode', nodeId: 'n2' })
    const input = {
      alive: new Set(['n1', 'n2', 'n4']),
      lost: new Set<string>(),
      changesMax: 3,
      replicasWanted: 2,
      replicasMax: 2,
    }
    expect(replicaActions(s, input)).toEqual([
      { type: 'startReplicaChange', groupId: 1, add: '', remove: 'n3', reason: 'shrink' },
    ])
  })

  it('records changes in the meta state and refuses bad ones with no state change', () => {
    const s = cluster(4, [G])
    must(s, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n1', reason: 'balance' })
    expect(s.groupsOf('n4').map((g) => g.groupId)).toEqual([1])
    const before = s.snapshot()
    const bad: [MetaCommand, RegExp][] = [
      [{ type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n2', reason: 'balance' }, /already/],
      [
        { type: 'startReplicaChange', groupId: 9, add: 'n4', remove: 'n2', reason: 'balance' },
        /does not exist/,
      ],
      [{ type: 'removeGroup', groupId: 1 }, /changing its replicas/],
      [{ type: 'finishReplicaChange', groupId: 9 }, /not changing/],
      [{ type: 'drainNode', nodeId: 'n9' }, /not registered/],
    ]
    for (const [command, message] of bad) {
      expect(s.apply(command, 20)).toMatchObject({ ok: false, message: expect.stringMatching(message) })
    }
    expect(s.snapshot()).toEqual(before)
    const epoch = s.routeEpoch
    must(s, { type: 'finishReplicaChange', groupId: 1 })
    expect(s.group(1)?.replicas).toEqual(['n2', 'n3', 'n4'])
    expect(s.routeEpoch).toBe(epoch + 1)
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.snapshot()).toEqual(s.snapshot())
  })

  it('retargets a change whose new node was lost before it became a voter, and only then', () => {
    const s = cluster(6, [G])
    must(s, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'dead' })
    const alive = new Set(['n1', 'n2', 'n5', 'n6'])
    const input = { alive, lost: new Set(['n3', 'n4']), changesMax: 1 }
    const voters = (v: string[]) => new Map([[1, v]])
    // n4 lost as a learner (or before it was added): n5 (fewest replicas, then id) instead.
    const retarget = { type: 'retargetReplicaChange', groupId: 1, add: 'n5' }
    expect(replicaActions(s, { ...input, groupVoters: voters(['n1', 'n2']) })).toEqual([retarget])
    // Not while n4 is merely away, nor once it is a voter (the change finishes without it),
    // nor when the group's voters are unknown (no answer yet, or a cluster below level 4).
    expect(replicaActions(s, { ...input, lost: new Set(['n3']), groupVoters: voters(['n1', 'n2']) })).toEqual(
      [],
    )
    expect(replicaActions(s, { ...input, groupVoters: voters(['n1', 'n2', 'n4']) })).toEqual([])
    expect(replicaActions(s, { ...input, groupVoters: new Map() })).toEqual([])
    expect(replicaActions(s, input)).toEqual([])
    // No live node outside the group: it waits.
    expect(
      replicaActions(s, { ...input, alive: new Set(['n1', 'n2']), groupVoters: voters(['n1', 'n2']) }),
    ).toEqual([])
    // Applied: n5 is being added, n4 no longer hosts the group; the record keeps its start.
    const startedAtMs = s.replicaChange(1)?.startedAtMs
    must(s, retarget as MetaCommand)
    expect(s.replicaChange(1)).toEqual({ groupId: 1, add: 'n5', remove: 'n3', reason: 'dead', startedAtMs })
    expect(s.groupsOf('n4')).toEqual([])
    expect(s.groupsOf('n5').map((g) => g.groupId)).toEqual([1])
    const bad: [MetaCommand, RegExp][] = [
      [{ type: 'retargetReplicaChange', groupId: 1, add: 'n5' }, /being added already/],
      [{ type: 'retargetReplicaChange', groupId: 1, add: 'n1' }, /is a replica of data group 1/],
      [{ type: 'retargetReplicaChange', groupId: 1, add: 'n9' }, /not registered/],
      [{ type: 'retargetReplicaChange', groupId: 2, add: 'n6' }, /not changing/],
    ]
    const before = s.snapshot()
    for (const [command, message] of bad) {
      expect(s.apply(command, 20)).toMatchObject({ ok: false, message: expect.stringMatching(message) })
    }
    expect(s.snapshot()).toEqual(before)
    must(s, { type: 'finishReplicaChange', groupId: 1 })
    expect(s.group(1)?.replicas).toEqual(['n1', 'n2', 'n5'])
  })

  it('gives up a change whose new node is gone with no other node to take it, and only then', () => {
    // A balance onto n4 (n3 to leave), n4 killed as a learner: n1..n3 hold the group already.
    const s = cluster(4, [G])
    must(s, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'balance' })
    const groupVoters = new Map([[1, ['n1', 'n2', 'n3']]])
    const input = { alive: new Set(G), lost: new Set(['n4']), changesMax: 1, groupVoters, abandon: true }
    const abandon = { type: 'abandonReplicaChange', groupId: 1 }
    expect(replicaActions(s, input)).toEqual([abandon])
    // Not below format level 36, nor while n4 is merely away or a voter, nor when its voters
    // are unknown, nor for a node that only stalled (it may still catch up).
    expect(replicaActions(s, { ...input, abandon: false })).toEqual([])
    expect(replicaActions(s, { ...input, lost: new Set() })).toEqual([])
    expect(replicaActions(s, { ...input, groupVoters: new Map([[1, ['n1', 'n2', 'n3', 'n4']]]) })).toEqual([])
    expect(replicaActions(s, { ...input, groupVoters: new Map() })).toEqual([])
    expect(
      replicaActions(s, { ...input, alive: all(4), lost: new Set(), stalled: new Map([[1, 'n4']]) }),
    ).toEqual([])
    // Nor for a live node being drained: it finishes the change (the drain moves it later).
    const drained = cluster(4, [G])
    must(drained, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'balance' })
    must(drained, { type: 'drainNode', nodeId: 'n4' })
    expect(replicaActions(drained, { ...input, alive: all(4), lost: new Set() })).toEqual([])
    // One being drained while it is not alive is given up at once: the drain of a dead node
    // waited --replace-dead-after-ms (5 min by default) for it, the node neither emptied nor removable.
    expect(replicaActions(drained, { ...input, lost: new Set() })).toEqual([abandon])
    expect(replicaActions(drained, { ...input, lost: new Set(), abandon: false })).toEqual([])
    // Applied: the change adds and removes nobody (n4 no longer hosts the group), keeps its
    // reason and start, and finishes with the replicas unchanged.
    const startedAtMs = s.replicaChange(1)?.startedAtMs
    must(s, abandon as MetaCommand)
    expect(s.replicaChange(1)).toEqual({ groupId: 1, add: '', remove: '', reason: 'balance', startedAtMs })
    expect(s.groupsOf('n4')).toEqual([])
    // Nothing more to plan for it: neither given up again nor retargeted.
    expect(replicaActions(s, input)).toEqual([])
    const bad: [MetaCommand, RegExp][] = [
      [abandon as MetaCommand, /adds no replica/],
      [{ type: 'abandonReplicaChange', groupId: 2 }, /not changing/],
    ]
    const before = s.snapshot()
    for (const [command, message] of bad) {
      expect(s.apply(command, 20)).toMatchObject({ ok: false, message: expect.stringMatching(message) })
    }
    expect(s.snapshot()).toEqual(before)
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.replicaChange(1)).toEqual(s.replicaChange(1))
    must(s, { type: 'finishReplicaChange', groupId: 1 })
    expect(s.group(1)?.replicas).toEqual(G)
    // A replacement of the dead n3 whose leader removed n3 before n4 died: finished without n3.
    const replacing = cluster(4, [G])
    must(replacing, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'dead' })
    must(replacing, abandon as MetaCommand)
    must(replacing, { type: 'finishReplicaChange', groupId: 1, removed: 'n3' })
    expect(replacing.group(1)?.replicas).toEqual(['n1', 'n2'])
  })

  it('lets no group that lost its majority for good hold the change slots: the groups that can change go on', () => {
    // n2 lost first: groups 1-3 (n1-n3) and 4 (n2, n4, n5) each have n2 replaced; three slots,
    // so group 4 waits. Then n3 is lost too: groups 1-3 keep n1 alone, no majority, and can
    // commit no membership change until n2 or n3 comes back (never): their changes never end.
    const healthy = [
      ['n2', 'n4', 'n5'],
      ['n4', 'n5', 'n7'],
      ['n4', 'n5', 'n8'],
    ]
    const s = cluster(8, [G, G, G, ...healthy])
    const first = {
      alive: new Set(['n1', 'n3', 'n4', 'n5', 'n6', 'n7', 'n8']),
      lost: new Set(['n2']),
      changesMax: 3,
    }
    for (const a of replicaActions(s, first)) must(s, a)
    expect(s.replicaChanges().map((c) => c.groupId)).toEqual([1, 2, 3])
    const input = {
      ...first,
      alive: new Set(['n1', 'n4', 'n5', 'n6', 'n7', 'n8']),
      lost: new Set(['n2', 'n3']),
    }
    // Group 4 still has a majority (n4, n5): its lost replica is replaced.
    expect(replicaActions(s, input)).toEqual([
      expect.objectContaining({ type: 'startReplicaChange', groupId: 4, remove: 'n2', reason: 'dead' }),
    ])
    for (const a of replicaActions(s, input)) must(s, a)
    must(s, { type: 'finishReplicaChange', groupId: 4 })
    // Nor do they hold balancing up for good: n9 joins and takes replicas (of the groups that can change).
    must(s, { type: 'registerNode', nodeId: 'n9', address: '127.0.0.1:7009' })
    const joined = { ...input, alive: new Set([...input.alive, 'n9']) }
    expect(replicaActions(s, joined)).toEqual([
      { type: 'startReplicaChange', groupId: 4, add: 'n9', remove: 'n5', reason: 'balance' },
    ])
    // Nor is such a group's change started in the first place (n2 and n3 lost at once).
    const both = cluster(8, [G, G, G, ...healthy])
    expect(replicaActions(both, input).map((a) => a.groupId)).toEqual([4])
  })

  it('counts drained nodes that are not alive as gone for a majority: their groups hold no slot before the timeout', () => {
    // n2 and n3 SIGKILLed, then drained (to be removed): groups 1-3 keep n1 alone and can commit
    // nothing. Their drain changes took the three slots, and group 4, which can change, waited
    // --replace-dead-after-ms (5 min) for n2 and n3 to count as lost.
    const healthy = [
      ['n2', 'n4', 'n5'],
      ['n4', 'n5', 'n7'],
      ['n4', 'n5', 'n8'],
    ]
    const s = cluster(8, [G, G, G, ...healthy])
    must(s, { type: 'drainNode', nodeId: 'n2' })
    must(s, { type: 'drainNode', nodeId: 'n3' })
    const alive = new Set(['n1', 'n4', 'n5', 'n6', 'n7', 'n8'])
    const input = { alive, lost: new Set<string>(), changesMax: 3, abandon: true }
    expect(replicaActions(s, input)).toEqual([
      expect.objectContaining({ type: 'startReplicaChange', groupId: 4, remove: 'n2', reason: 'drain' }),
    ])
    // Alive (drained while they run), they are replaced as any drained replica; so they are
    // without `abandon` (below format level 36, or before the meta leader heard from every node).
    expect(replicaActions(s, { ...input, alive: all(8) }).map((a) => a.groupId)).toEqual([1, 2, 3])
    expect(replicaActions(s, { ...input, abandon: false }).map((a) => a.groupId)).toEqual([1, 2, 3])
  })

  it('retargets a change whose live new node stalled, gives a stalled node no new replica, and keeps its replicas', () => {
    const s = cluster(6, [G, ['n1', 'n2', 'n4']])
    must(s, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'dead' })
    const alive = new Set(['n1', 'n2', 'n4', 'n5', 'n6'])
    const input = { alive, lost: new Set(['n3']), changesMax: 2, groupVoters: new Map([[1, ['n1', 'n2']]]) }
    // n4 alive and not stalled: the change waits for it.
    expect(replicaActions(s, input)).toEqual([])
    // Another group's change stalled on n4: not this one's.
    expect(replicaActions(s, { ...input, stalled: new Map([[2, 'n4']]) })).toEqual([])
    // Stalled: n5 (fewest replicas, then id) takes the change; n4's own replica of group 2 stays,
    // where a lost n4's would be replaced.
    const stalled = new Map([[1, 'n4']])
    expect(replicaActions(s, { ...input, stalled })).toEqual([
      { type: 'retargetReplicaChange', groupId: 1, add: 'n5' },
    ])
    expect(replicaActions(s, { ...input, lost: new Set(['n3', 'n4']), changesMax: 3 })).toContainEqual(
      expect.objectContaining({ type: 'startReplicaChange', groupId: 2, remove: 'n4' }),
    )
    // Once a voter, it is no longer waited for.
    expect(replicaActions(s, { ...input, stalled, groupVoters: new Map([[1, ['n1', 'n2', 'n4']]]) })).toEqual(
      [],
    )
    // A stalled node takes no new replica: a replacement goes to n6, never to n5 if it stalled too.
    must(s, { type: 'retargetReplicaChange', groupId: 1, add: 'n5' })
    must(s, { type: 'finishReplicaChange', groupId: 1 })
    must(s, { type: 'drainNode', nodeId: 'n1' })
    const drain = replicaActions(s, {
      ...input,
      lost: new Set(),
      stalled: new Map([
        [1, 'n4'],
        [0, 'n5'],
      ]),
    })
    expect(drain.every((a) => a.type === 'startReplicaChange' && a.add === 'n6')).toBe(true)
    expect(drain.length).toBeGreaterThan(0)
  })

  it('retargets a change whose new node is being drained before it became a voter', () => {
    const s = cluster(6, [G])
    must(s, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'balance' })
    const input = { alive: all(6), lost: new Set<string>(), changesMax: 1, groupVoters: new Map([[1, G]]) }
    expect(replicaActions(s, input)).toEqual([])
    must(s, { type: 'drainNode', nodeId: 'n4' })
    expect(replicaActions(s, input)).toEqual([{ type: 'retargetReplicaChange', groupId: 1, add: 'n5' }])
    // Once a voter, the drain replaces it as any replica.
    expect(replicaActions(s, { ...input, groupVoters: new Map([[1, [...G, 'n4']]]) })).toEqual([])
  })

  it('retargets onto a node that receives no other new replica', () => {
    const s = cluster(6, [G, G, ['n1', 'n2', 'n6'], ['n1', 'n2', 'n6']])
    must(s, { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'dead' })
    must(s, { type: 'startReplicaChange', groupId: 2, add: 'n5', remove: 'n3', reason: 'dead' })
    const input = {
      alive: new Set(['n1', 'n2', 'n5', 'n6']),
      lost: new Set(['n3', 'n4']),
      changesMax: 3,
      groupVoters: new Map([[1, ['n1', 'n2']]]),
    }
    // n5 holds fewer replicas than n6 (1 to come, against 2) but is being added to group 2:
    // n6 takes group 1's change.
    expect(replicaActions(s, input)).toEqual([{ type: 'retargetReplicaChange', groupId: 1, add: 'n6' }])
  })

  it('balances with the group holding the fewest partitions, and one whose leader stays', () => {
    const s = cluster(4, [G, G, G])
    must(s, { type: 'createQueue', name: 'q', config: { partitions: 1 } })
    const busy = s.queue('q')?.partitions[0]?.groupId
    for (const g of [1, 2, 3]) must(s, { type: 'reportLeader', groupId: g, leaderId: 'n3', term: 2 })
    const input = { alive: all(4), lost: new Set<string>(), changesMax: 1 }
    // n3 holds the most (a tie broken by id), n4 the fewest; of the groups without partitions,
    // each is led by n3: the lowest id goes.
    const idle = [1, 2, 3].filter((g) => g !== busy)
    expect(replicaActions(s, input)).toEqual([
      { type: 'startReplicaChange', groupId: idle[0], add: 'n4', remove: 'n3', reason: 'balance' },
    ])
    // Led by another node, the second idle group goes instead (its leader need not move).
    must(s, { type: 'reportLeader', groupId: idle[1] as number, leaderId: 'n1', term: 3 })
    expect(replicaActions(s, input)).toEqual([
      { type: 'startReplicaChange', groupId: idle[1], add: 'n4', remove: 'n3', reason: 'balance' },
    ])
  })

  it('waits to balance while a node is briefly away, a scale plan runs or a partition moves', () => {
    const s = cluster(4, [G, G, G])
    const input = { alive: all(4), lost: new Set<string>(), changesMax: 1 }
    expect(replicaActions(s, input)).toHaveLength(1)
    // n2 is not heard from, not yet lost: it may come back any moment.
    expect(replicaActions(s, { ...input, alive: new Set(['n1', 'n3', 'n4']) })).toEqual([])
    // Lost for good: the others balance without it (and its replicas are replaced first).
    expect(
      replicaActions(s, { ...input, alive: new Set(['n1', 'n3', 'n4']), lost: new Set(['n2']) }),
    ).toEqual([{ type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n2', reason: 'dead' }])
    must(s, { type: 'createQueue', name: 'q', config: { partitions: 3 } })
    must(s, { type: 'scaleDataGroups', groups: 2 })
    expect(s.scale?.running).toBe(true)
    expect(replicaActions(s, input)).toEqual([])
  })
})
