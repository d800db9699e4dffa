import {
  type ConfState,
  MemoryLogStorage,
  type Message,
  Prng,
  type RaftStatus,
  RawNode,
  Role,
} from '@mq/raft-core'
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

  it('does not hand leadership to a caught-up voter that has not answered lately', () => {
    // In a quiet group a voter cut off from this leader still matches the commit index.
    const { raft, transfers } = replica(Role.Leader, 500, { n2: 500, n3: 500 })
    const silent = { ...raft, recentlyActive: (_g: number, id: string) => id !== 'n2' }
    expect(transferWhenCaughtUp(silent, 1, 'n2')).toBe(false)
    expect(transfers).toEqual([])
    expect(transferWhenCaughtUp(silent, 1, 'n3')).toBe(true)
    expect(transfers).toEqual(['n3'])
  })

  it('keeps a quiet group writable while the meta leader asks, heartbeat after heartbeat, for a transfer to a voter its leader cannot reach', () => {
    // Three RawNodes of group 1; n1 leads; then n1 and n3 cannot reach each other (the meta
    // leader still hears n3, so balancing keeps naming it).
    const conf: ConfState = { voters: ['n1', 'n2', 'n3'], learners: [], votersOutgoing: [], learnersNext: [] }
    const nodes = new Map(
      ['n1', 'n2', 'n3'].map((id, i) => {
        const storage = new MemoryLogStorage(conf)
        const raw = new RawNode({ id, electionTicks: 10, heartbeatTicks: 1, prng: new Prng(i + 1) }, storage)
        return [id, { raw, storage }] as const
      }),
    )
    const cut = new Set<string>()
    const settle = () => {
      for (let round = 0; round < 1_000; round++) {
        const out: Message[] = []
        for (const { raw, storage } of nodes.values()) {
          while (raw.hasReady()) {
            const rd = raw.ready()
            if (rd.entries.length > 0) storage.append(rd.entries)
            if (rd.hardState !== null) storage.setHardState(rd.hardState)
            storage.sync()
            out.push(...rd.messages)
            raw.advance(rd)
          }
        }
        if (out.length === 0) return
        for (const m of out) if (!cut.has(`${m.from}>${m.to}`)) nodes.get(m.to)?.raw.step(m)
      }
    }
    const leader = (nodes.get('n1') as { raw: RawNode }).raw
    leader.campaign()
    settle()
    leader.propose(new Uint8Array([1]))
    settle()
    expect(leader.status().role).toBe(Role.Leader)
    cut.add('n1>n3').add('n3>n1')
    const raft: LeaderTransferRaft = {
      status: () => leader.status(),
      matchIndex: (_g, id) => leader.matchIndex(id),
      recentlyActive: (_g, id) => leader.recentlyActive(id),
      transferLeader: (_g, to) => leader.transferLeader(to),
    }
    let refused = 0
    // Ten meta heartbeats, an election timeout apart, each asking n1 to hand group 1 to n3,
    // then a write.
    for (let beat = 0; beat < 10; beat++) {
      for (let t = 0; t < 10; t++) {
        leader.tick()
        settle()
      }
      transferWhenCaughtUp(raft, 1, 'n3')
      try {
        leader.propose(new Uint8Array([2]))
      } catch {
        refused++
      }
      settle()
    }
    expect(leader.status().role).toBe(Role.Leader)
    expect(refused).toBe(0)
    // Once n3 answers again, the next heartbeat's transfer goes ahead.
    cut.clear()
    leader.tick()
    settle()
    expect(transferWhenCaughtUp(raft, 1, 'n3')).toBe(true)
    settle()
    expect(nodes.get('n3')?.raw.status().role).toBe(Role.Leader)
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
