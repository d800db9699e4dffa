import { describe, expect, it, vi } from 'vitest'
import { metaChangeAction } from './meta-plan'
import { stateWith } from './test-state'

const cluster = stateWith

const all = (n: number) => new Set(Array.from({ length: n }, (_, i) => `n${i + 1}`))
const none = new Set<string>()
/** The meta group's Raft voters (the founders) in these tests. */
const voters = ['n1', 'n2', 'n3']

describe('metaChangeAction (replacing meta voters)', () => {
  it('plans nothing before the founders are recorded, nor while a change is under way', () => {
    const s = cluster(4, [])
    s.apply({ type: 'drainNode', nodeId: 'n1' }, 3)
    expect(metaChangeAction(s, { alive: all(4), lost: none, voters })).toBeUndefined()
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    const action = metaChangeAction(s, { alive: all(4), lost: none, voters })
    expect(action).toEqual({ type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'drain' })
    s.apply(action as NonNullable<typeof action>, 4)
    expect(metaChangeAction(s, { alive: all(4), lost: none, voters })).toBeUndefined()
    s.apply({ type: 'finishMetaChange' }, 5)
    expect(s.metaMembers()).toEqual(['n2', 'n3', 'n4'])
    // n1 is no member now: its drain asks nothing more of the meta group.
    expect(metaChangeAction(s, { alive: all(4), lost: none, voters })).toBeUndefined()
  })

  it('replaces a lost voter by the live node outside the group with the fewest replicas', () => {
    // n4 holds two data-group replicas, n5 one, n6 none but is not alive, n7 none but draining.
    const s = cluster(7, [
      ['n1', 'n4', 'n5'],
      ['n2', 'n3', 'n4'],
    ])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'drainNode', nodeId: 'n7' }, 3)
    const alive = new Set(['n1', 'n3', 'n4', 'n5', 'n7'])
    // n2 is away but not lost yet: nothing.
    expect(metaChangeAction(s, { alive, lost: none, voters })).toBeUndefined()
    expect(metaChangeAction(s, { alive, lost: new Set(['n2', 'n6']), voters })).toEqual({
      type: 'startMetaChange',
      add: 'n5',
      remove: 'n2',
      reason: 'dead',
    })
  })

  it('leaves a voter in place when no node outside the meta group can take it', () => {
    const s = cluster(3, [['n1', 'n2', 'n3']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'drainNode', nodeId: 'n3' }, 3)
    expect(metaChangeAction(s, { alive: all(3), lost: new Set(['n2']), voters })).toBeUndefined()
  })

  it('retargets a change whose new node was lost before it became a voter, and only then', async () => {
    const s = cluster(6, [['n4', 'n5', 'n6']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'dead' }, 4)
    const alive = new Set(['n1', 'n2', 'n5', 'n6'])
    // n4 away but not lost yet, or lost once a voter (the change finishes; n4 is replaced after).
    expect(metaChangeAction(s, { alive, lost: new Set(['n3']), voters })).toBeUndefined()
    expect(
      metaChangeAction(s, { alive, lost: new Set(['n3', 'n4']), voters: ['n1', 'n2', 'n4'] }),
    ).toBeUndefined()
    // Lost as a learner: the next candidate (n5, n6 hold one replica each: id order) takes it.
    const retarget = metaChangeAction(s, { alive, lost: new Set(['n3', 'n4']), voters: ['n1', 'n2'] })
    expect(retarget).toEqual({ type: 'retargetMetaChange', add: 'n5' })
    expect(s.apply(retarget as NonNullable<typeof retarget>, 5)).toMatchObject({
      ok: true,
      value: { add: 'n5', remove: 'n3' },
    })
    // Nobody left to take it: the change waits.
    expect(
      metaChangeAction(s, {
        alive: new Set(['n1', 'n2']),
        lost: new Set(['n3', 'n5']),
        voters: ['n1', 'n2'],
      }),
    ).toBeUndefined()
  })

  it('gives up a change whose new node is gone with no other to take it (from format level 36)', () => {
    // n3 dead, replaced by n4, which died a learner after n3 was removed (removed first).
    const s = cluster(4, [['n1', 'n2', 'n4']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'dead' }, 4)
    const input = { alive: new Set(['n1', 'n2']), lost: new Set(['n3', 'n4']), voters: ['n1', 'n2'] }
    expect(metaChangeAction(s, input)).toBeUndefined() // below level 36: it waits
    expect(metaChangeAction(s, { ...input, abandon: true })).toEqual({ type: 'abandonMetaChange' })
    // Not once n4 is a voter, nor while it only stalled (alive: it may still catch up).
    expect(metaChangeAction(s, { ...input, abandon: true, voters: ['n1', 'n2', 'n4'] })).toBeUndefined()
    expect(
      metaChangeAction(s, {
        ...input,
        abandon: true,
        alive: new Set(['n1', 'n2', 'n4']),
        lost: new Set(['n3']),
        stalled: new Map([[0, 'n4']]),
      }),
    ).toBeUndefined()
    // Nor while it is alive and being drained: it finishes the change (the drain moves it later).
    const draining = cluster(4, [['n1', 'n2', 'n4']])
    draining.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    draining.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'dead' }, 4)
    draining.apply({ type: 'drainNode', nodeId: 'n4' }, 5)
    expect(
      metaChangeAction(draining, {
        ...input,
        abandon: true,
        alive: new Set(['n1', 'n2', 'n4']),
        lost: new Set(['n3']),
      }),
    ).toBeUndefined()
    // Applied: adds and removes nobody; finished naming n3, gone before, the members lose it.
    expect(s.apply({ type: 'abandonMetaChange' }, 5)).toMatchObject({
      ok: true,
      value: { add: '', remove: '' },
    })
    expect(metaChangeAction(s, { ...input, abandon: true })).toBeUndefined()
    expect(s.apply({ type: 'abandonMetaChange' }, 6)).toMatchObject({ ok: false, message: /adding no voter/ })
    expect(s.apply({ type: 'finishMetaChange', removed: 'n9' }, 7)).toMatchObject({
      ok: false,
      message: /not a meta group member/,
    })
    expect(s.apply({ type: 'finishMetaChange', removed: 'n3' }, 8)).toEqual({ ok: true, value: ['n1', 'n2'] })
    expect(s.metaChange()).toBeUndefined()
    // Only a change given up names a voter removed.
    s.apply({ type: 'startMetaChange', add: 'n4', remove: '', reason: 'grow' }, 9)
    expect(s.apply({ type: 'finishMetaChange', removed: 'n1' }, 10)).toMatchObject({
      ok: false,
      message: /only a meta change given up/,
    })
    expect(s.apply({ type: 'abandonMetaChange' }, 11).ok).toBe(true)
    expect(s.apply({ type: 'finishMetaChange' }, 12)).toEqual({ ok: true, value: ['n1', 'n2'] })
  })

  it('gives up a change whose new node is being drained and not alive, before it is lost', () => {
    // n4 took n3's vote and died a learner; the operator drains it (to remove it): no other node
    // can take the vote. As a data group's change (replicaActions), it is given up at once:
    // waited for until n4 counts as lost (--replace-dead-after-ms), the drain answered 1 and
    // removeNode refused n4 ("a meta group vote") for that long.
    const s = cluster(4, [['n1', 'n2', 'n4']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'drain' }, 4)
    s.apply({ type: 'drainNode', nodeId: 'n3' }, 5)
    expect(s.apply({ type: 'drainNode', nodeId: 'n4' }, 6)).toMatchObject({ ok: true, value: 2 })
    const input = { alive: new Set(['n1', 'n2', 'n3']), lost: none, voters: ['n1', 'n2', 'n3'] }
    expect(metaChangeAction(s, { ...input, abandon: true })).toEqual({ type: 'abandonMetaChange' })
    expect(metaChangeAction(s, input)).toBeUndefined() // below level 36: it waits
    // Alive, it finishes the change (the drain moves the vote later); a voter already, it stays.
    expect(metaChangeAction(s, { ...input, abandon: true, alive: all(4) })).toBeUndefined()
    expect(metaChangeAction(s, { ...input, abandon: true, voters: ['n1', 'n2', 'n3', 'n4'] })).toBeUndefined()
  })

  it('retargets a change whose live new node stalled as a learner, and picks no stalled node', () => {
    const s = cluster(6, [['n4', 'n5', 'n6']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'dead' }, 4)
    const alive = new Set(['n1', 'n2', 'n4', 'n5', 'n6'])
    const lost = new Set(['n3'])
    expect(metaChangeAction(s, { alive, lost, voters: ['n1', 'n2'] })).toBeUndefined()
    expect(
      metaChangeAction(s, { alive, lost, voters: ['n1', 'n2', 'n4'], stalled: new Map([[0, 'n4']]) }),
    ).toBeUndefined()
    // A data group's change stalled on n4: the meta change's learner there goes on.
    expect(
      metaChangeAction(s, { alive, lost, voters: ['n1', 'n2'], stalled: new Map([[3, 'n4']]) }),
    ).toBeUndefined()
    // Stalled, with a data group's change stalled on n5 lately: n6 takes it.
    const stalled = new Map([
      [0, 'n4'],
      [2, 'n5'],
    ])
    expect(metaChangeAction(s, { alive, lost, voters: ['n1', 'n2'], stalled })).toEqual({
      type: 'retargetMetaChange',
      add: 'n6',
    })
  })

  it('retargets a change whose new node is being drained before it became a voter', () => {
    const s = cluster(6, [['n4', 'n5', 'n6']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'drain' }, 4)
    s.apply({ type: 'drainNode', nodeId: 'n3' }, 5)
    const input = { alive: all(6), lost: none, voters: ['n1', 'n2', 'n3'] }
    expect(metaChangeAction(s, input)).toBeUndefined()
    s.apply({ type: 'drainNode', nodeId: 'n4' }, 6)
    expect(metaChangeAction(s, input)).toEqual({ type: 'retargetMetaChange', add: 'n5' })
    expect(metaChangeAction(s, { ...input, voters: ['n1', 'n2', 'n3', 'n4'] })).toBeUndefined()
  })

  it('grows the meta group to the size wanted, one voter at a time, from the same candidates', () => {
    // n4 holds a data-group replica, n5 none, n6 none but is not alive.
    const s = cluster(6, [['n1', 'n2', 'n4']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    const alive = new Set(['n1', 'n2', 'n3', 'n4', 'n5'])
    expect(metaChangeAction(s, { alive, lost: none, voters })).toBeUndefined() // no size wanted
    expect(s.apply({ type: 'setMetaVoters', voters: 5 }, 4)).toEqual({ ok: true, value: 5 })
    const grow = metaChangeAction(s, { alive, lost: none, voters })
    expect(grow).toEqual({ type: 'startMetaChange', add: 'n5', remove: '', reason: 'grow' })
    s.apply(grow as NonNullable<typeof grow>, 5)
    s.apply({ type: 'finishMetaChange' }, 6)
    expect(metaChangeAction(s, { alive, lost: none, voters })).toMatchObject({ add: 'n4', reason: 'grow' })
    s.apply({ type: 'startMetaChange', add: 'n4', remove: '', reason: 'grow' }, 7)
    s.apply({ type: 'finishMetaChange' }, 8)
    expect(s.metaMembers()).toEqual(['n1', 'n2', 'n3', 'n4', 'n5'])
    expect(metaChangeAction(s, { alive, lost: none, voters })).toBeUndefined() // at its size
  })

  it('does not grow the meta group from an odd size to an even one it cannot grow past', () => {
    // 7 wanted of 4 live nodes: {n1, n2, n3} + n4 would need 3 of 4 and tolerate one failure, as 3 do.
    const s = cluster(5, [['n1', 'n2', 'n3']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'setMetaVoters', voters: 7 }, 4)
    expect(metaChangeAction(s, { alive: all(4), lost: none, voters })).toBeUndefined()
    // n5 too: it grows, to 4 on its way to 5.
    expect(metaChangeAction(s, { alive: all(5), lost: none, voters })).toMatchObject({ reason: 'grow' })
  })

  it('does not grow the meta group while one of its voters is not alive', () => {
    // Grown with n3 away, {n1, n2, n3, n4} would need n4 for a majority while n3 is gone.
    const s = cluster(5, [['n1', 'n2', 'n3']])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    s.apply({ type: 'setMetaVoters', voters: 5 }, 4)
    const away = new Set(['n1', 'n2', 'n4', 'n5'])
    expect(metaChangeAction(s, { alive: away, lost: none, voters })).toBeUndefined()
    // Lost, it is replaced first (the group stays at 3), then the group grows.
    expect(metaChangeAction(s, { alive: away, lost: new Set(['n3']), voters })).toMatchObject({
      remove: 'n3',
      reason: 'dead',
    })
    expect(metaChangeAction(s, { alive: all(5), lost: none, voters })).toMatchObject({ reason: 'grow' })
  })

  it('shrinks to the size wanted: a bad voter first, then a silent one, then the busiest, the leader last', () => {
    const s = cluster(5, [
      ['n1', 'n2', 'n3'],
      ['n3', 'n4', 'n5'],
    ])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3', 'n4', 'n5'] }, 3)
    s.apply({ type: 'setMetaVoters', voters: 3 }, 3)
    const five = ['n1', 'n2', 'n3', 'n4', 'n5']
    const input = { alive: all(5), lost: none, voters: five, leaderId: 'n3' }
    // n3 holds the most replicas but leads: the next busiest (ties by the last id) goes.
    expect(metaChangeAction(s, input)).toEqual({
      type: 'startMetaChange',
      add: '',
      remove: 'n5',
      reason: 'shrink',
    })
    // A voter not heard from goes before a busier one; a lost one (not replaced: shrunk) first.
    expect(metaChangeAction(s, { ...input, alive: new Set(['n1', 'n3', 'n4', 'n5']) })).toMatchObject({
      remove: 'n2',
    })
    expect(
      metaChangeAction(s, { ...input, alive: new Set(['n1', 'n3', 'n4']), lost: new Set(['n5']) }),
    ).toMatchObject({
      remove: 'n5',
      reason: 'shrink',
    })
    s.apply({ type: 'startMetaChange', add: '', remove: 'n5', reason: 'shrink' }, 4)
    expect(metaChangeAction(s, input)).toBeUndefined() // one change at a time
    s.apply({ type: 'finishMetaChange' }, 5)
    expect(s.metaMembers()).toEqual(['n1', 'n2', 'n3', 'n4'])
  })

  it('shrinks a voter not heard from before a draining live one, so that those alive stay a majority', () => {
    // n4 and n5 briefly away, n3 draining: without n3, {n1, n2, n4, n5} would need 3 of 4 voters
    // with 2 alive (the meta group stopped until one came back); without n5, 3 of 4 are alive.
    const s = cluster(5, [])
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3', 'n4', 'n5'] }, 3)
    s.apply({ type: 'setMetaVoters', voters: 3 }, 3)
    s.apply({ type: 'drainNode', nodeId: 'n3' }, 3)
    const five = ['n1', 'n2', 'n3', 'n4', 'n5']
    const input = { alive: new Set(['n1', 'n2', 'n3']), lost: none, voters: five, leaderId: 'n1' }
    for (const remove of ['n5', 'n4']) {
      const action = metaChangeAction(s, input)
      expect(action).toEqual({ type: 'startMetaChange', add: '', remove, reason: 'shrink' })
      s.apply(action as NonNullable<typeof action>, 4)
      s.apply({ type: 'finishMetaChange' }, 5)
      const members = s.metaMembers() ?? []
      expect(members.filter((m) => input.alive.has(m)).length * 2).toBeGreaterThan(members.length)
    }
    expect(s.metaMembers()).toEqual(['n1', 'n2', 'n3'])
  })

  it('reads the groups once to choose, not once per comparison of its sort over every node', () => {
    // It counted each candidate's groups afresh per comparison of its sort: with 1,000 nodes
    // hosting 10,000 groups (META_LIMITS), 0.75-2.5 s of the meta leader's event loop (no
    // heartbeat sent meanwhile) to replace one voter.
    const ids = Array.from({ length: 200 }, (_, i) => `n${i + 1}`)
    const s = cluster(200, [])
    for (let g = 0; g < 2_000; g++)
      s.apply({ type: 'createGroup', replicas: [0, 1, 2].map((i) => ids[(g + i) % ids.length] as string) }, 2)
    s.apply({ type: 'initMetaMembers', voters }, 3)
    s.apply({ type: 'drainNode', nodeId: 'n1' }, 3)
    const groups = vi.spyOn(s, 'groups')
    const action = metaChangeAction(s, { alive: new Set(ids), lost: none, voters })
    // groupsOf reads them all too: each call counts here.
    expect(groups.mock.calls.length).toBeLessThanOrEqual(1)
    // Every node hosts 30 groups: the lowest id outside the meta group (in id order) takes the vote.
    expect(action).toEqual({ type: 'startMetaChange', add: 'n10', remove: 'n1', reason: 'drain' })
  })
})
