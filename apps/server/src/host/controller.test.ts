import { type MetaCommand, MetaState } from '@mq/meta-service'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { Controller } from './controller'
import type { PeerCalls } from './peer-calls'

const NODES = ['n1', 'n2', 'n3']

/** A meta leader's controller over an in-memory meta state: 3 nodes, 6 groups all led by n1. */
function leading() {
  const state = new MetaState()
  const apply = (command: MetaCommand) => state.apply(command, Date.now())
  for (const n of NODES) apply({ type: 'registerNode', nodeId: n, address: `${n}:1` })
  for (let g = 0; g < 6; g++) apply({ type: 'createGroup', replicas: NODES })
  apply({ type: 'createQueue', name: 'q', config: { partitions: 6 } })
  for (const g of state.groups()) apply({ type: 'reportLeader', groupId: g.groupId, leaderId: 'n1', term: 2 })
  const controller = new Controller({
    nodeId: 'n1',
    replicas: 3,
    dataGroups: 6,
    replaceDeadAfterMs: 60_000,
    calls: {} as PeerCalls,
    leaderState: () => state,
    barrier: async () => {},
    propose: async (command) => apply(command),
    notLeader: () => new Error('not the leader'),
    transferMetaLeader: () => {},
  })
  /** One heartbeat of `nodeId`, reporting the groups it leads; the transfers asked of it. */
  const beat = async (nodeId: string) => {
    const groups = state
      .groups()
      .filter((g) => g.leaderId === nodeId)
      .map((g) => ({ groupId: g.groupId, leaderId: nodeId, term: 2, commitIndex: 10, appliedIndex: 10 }))
    const r = await controller.onHeartbeat({ nodeId, address: `${nodeId}:1`, groups, tokensFingerprint: '' })
    return r.transfers
  }
  /** Every node beats every 500 ms for `ms`; the transfers asked of n1 at the last beat. */
  const beatFor = async (ms: number) => {
    let transfers: Awaited<ReturnType<typeof beat>> = []
    for (let t = 0; t < ms; t += 500) {
      vi.advanceTimersByTime(500)
      for (const n of NODES) {
        const asked = await beat(n)
        if (n === 'n1') transfers = asked
      }
    }
    return transfers
  }
  return { state, apply, beat, beatFor }
}

describe('Controller leader balancing', () => {
  beforeEach(() => {
    vi.useFakeTimers()
    vi.setSystemTime(1_000_000)
  })
  afterEach(() => vi.useRealTimers())

  it('gives leaderships to nodes only once their heartbeats have been regular for 10 s', async () => {
    const c = leading()
    expect(await c.beatFor(9_000)).toEqual([])
    const transfers = await c.beatFor(2_000)
    expect(transfers).toHaveLength(4)
    expect(new Set(transfers.map((t) => t.toNodeId))).toEqual(new Set(['n2', 'n3']))
    // n3 goes quiet for 3 s (restarted, say): only n2 may be given leaderships for 10 s more.
    for (let t = 0; t < 5_000; t += 500) {
      vi.advanceTimersByTime(500)
      await c.beat('n1')
      await c.beat('n2')
      if (t >= 3_000) await c.beat('n3')
    }
    const meanwhile = await c.beat('n1')
    expect(meanwhile.every((t) => t.toNodeId === 'n2')).toBe(true)
    expect(meanwhile.length).toBeGreaterThan(0)
  })

  it('keeps the leader of a group a partition is being copied from or into', async () => {
    const c = leading()
    const route = c.state.queue('q')?.partitions[0]
    const groups = c.state.groups().map((g) => g.groupId)
    const to = groups.find((g) => g !== route?.groupId) as number
    expect(c.apply({ type: 'startMove', queue: 'q', partition: 0, toGroup: to }).ok).toBe(true)
    const transfers = await c.beatFor(11_000)
    expect(transfers.length).toBeGreaterThan(0)
    expect(transfers.map((t) => t.groupId)).not.toContain(route?.groupId)
    expect(transfers.map((t) => t.groupId)).not.toContain(to)
  })
})
