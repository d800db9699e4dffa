import { describe, expect, it } from 'vitest'
import { metaChangeAction } from './meta-plan'
import { stateWith } from './test-state'

const cluster = stateWith

const all = (n: number) => new Set(Array.from({ length: n }, (_, i) => `n${i + 1}`))
const none = new Set<string>()

describe('metaChangeAction (replacing meta voters)', () => {
  it('plans nothing before the founders are recorded, nor while a change is under way', () => {
    const s = cluster(4, [])
    s.apply({ type: 'drainNode', nodeId: 'n1' }, 3)
    expect(metaChangeAction(s, { alive: all(4), lost: none })).toBeUndefined()
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    const action = metaChangeAction(s, { alive: all(4), lost: none })
    expect(action).toEqual({ type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'drain' })
    s.apply(action as NonNullable<typeof action>, 4)
    expect(metaChangeAction(s, { alive: all(4), lost: none })).toBeUndefined()
    s.apply({ type: 'finishMetaChange' }, 5)
    expect(s.metaMembers()).toEqual(['n2', 'n3', 'n4'])
    // n1 is no member now: its drain asks nothing more of the meta group.
    expect(metaChangeAction(s, { alive: all(4), lost: none })).toBeUndefined()
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
    expect(metaChangeAction(s, { alive, lost: none })).toBeUndefined()
    expect(metaChangeAction(s, { alive, lost: new Set(['n2', 'n6']) })).toEqual({
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
    expect(metaChangeAction(s, { alive: all(3), lost: new Set(['n2']) })).toBeUndefined()
  })
})
