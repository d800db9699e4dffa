import { type RaftStatus, Role } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
import { CAUGHT_UP_ENTRIES } from './caught-up'
import { type LeaderTransferRaft, stopTransferTarget, transferWhenCaughtUp } from './leader-transfer'

/** A replica of group 1 in `role` at commit index `commit`, knowing the others' match indexes. */
function replica(role: Role, commit: number, match: Record<string, number>, busy = false) {
  const transfers: string[] = []
  const raft: LeaderTransferRaft = {
    status: () =>
      ({ id: 'n1', role, commit, conf: { voters: ['n1', 'n2', 'n3', 'n4'] } }) as unknown as RaftStatus,
    matchIndex: (_groupId, id) => match[id],
    transferLeader: (_groupId, to) => {
      if (busy) throw new Error('leadership is being transferred already')
      transfers.push(to)
    },
  }
  return { raft, transfers }
}

describe('transferWhenCaughtUp (leader balancing on the data-group leader)', () => {
  it('hands leadership only to a replica whose log is caught up', () => {
    const lagging = replica(Role.Leader, 9_000, { n2: 9_000 - CAUGHT_UP_ENTRIES - 1 })
    expect(transferWhenCaughtUp(lagging.raft, 1, 'n2')).toBe(false)
    expect(lagging.transfers).toEqual([])
    // A node just restarted that this leader has not heard from yet (match unknown or 0).
    for (const match of [{}, { n2: 0 }] as Record<string, number>[]) {
      const unheard = replica(Role.Leader, 10, match)
      expect(transferWhenCaughtUp(unheard.raft, 1, 'n2')).toBe(false)
      expect(unheard.transfers).toEqual([])
    }
    const close = replica(Role.Leader, 9_000, { n2: 9_000 - CAUGHT_UP_ENTRIES })
    expect(transferWhenCaughtUp(close.raft, 1, 'n2')).toBe(true)
    expect(close.transfers).toEqual(['n2'])
  })

  it('does nothing on a follower, and reports a transfer already under way as not started', () => {
    const follower = replica(Role.Follower, 10, { n2: 10 })
    expect(transferWhenCaughtUp(follower.raft, 1, 'n2')).toBe(false)
    expect(follower.transfers).toEqual([])
    const busy = replica(Role.Leader, 10, { n2: 10 }, true)
    expect(transferWhenCaughtUp(busy.raft, 1, 'n2')).toBe(false)
  })
})

describe('stopTransferTarget (a leader stopping)', () => {
  it('picks the other voter whose log matches furthest, only if caught up', () => {
    const { raft } = replica(Role.Leader, 9_000, { n1: 9_000, n2: 100, n3: 8_990, n4: 8_950 })
    expect(stopTransferTarget(raft, 1)).toBe('n3')
    // The first voter in the configuration, dead and far behind, is not chosen.
    const behind = replica(Role.Leader, 9_000, { n1: 9_000, n2: 100, n3: 200 })
    expect(stopTransferTarget(behind.raft, 1)).toBeUndefined()
  })

  it('prefers a voter that answered lately: in an idle group a dead one matches as far', () => {
    const { raft } = replica(Role.Leader, 500, { n1: 500, n2: 500, n3: 500, n4: 480 })
    expect(stopTransferTarget(raft, 1)).toBe('n2')
    const active = new Set(['n4'])
    const watched = { ...raft, recentlyActive: (_g: number, id: string) => active.has(id) }
    expect(stopTransferTarget(watched, 1)).toBe('n4')
    active.add('n3')
    expect(stopTransferTarget(watched, 1)).toBe('n3')
  })
})
