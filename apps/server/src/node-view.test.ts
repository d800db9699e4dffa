import { Role } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
import { type GroupView, type NodeView, parsePartitionId, READY_APPLY_LAG_MAX, readiness } from './node-view'

function view(groups: Partial<GroupView['status']>[], metaLeaderId = 'n1', serving = true): NodeView {
  return {
    nodeId: 'n1',
    serving: () => serving,
    failed: () => false,
    metaLeaderId: () => metaLeaderId,
    ledPartitions: () => [],
    groups: () =>
      groups.map((s, i) => ({
        groupId: i,
        status: { role: Role.Follower, lead: 'n2', commit: 10, applied: 10, ...s } as GroupView['status'],
        imports: 0,
        sweeping: 0,
        logTail: { entries: 0, bytes: 0 },
      })),
  }
}

describe('readiness', () => {
  it('is ready when serving, the meta leader is known and every group has a leader and has applied its commits', () => {
    expect(readiness(view([{}, { role: Role.Leader, lead: 'n1' }]))).toEqual({ ready: true, reasons: [] })
  })

  it('names each reason it is not ready', () => {
    const r = readiness(
      view([{ lead: '' }, { commit: 5_000, applied: 5_000 - READY_APPLY_LAG_MAX - 1 }], '', false),
    )
    expect(r.ready).toBe(false)
    expect(r.reasons).toEqual([
      'not serving (starting, stopping or stopped after a fatal error)',
      'the meta group leader is not known yet',
      'group 0 has no known leader',
      `group 1 has ${READY_APPLY_LAG_MAX + 1} committed entries still to apply`,
    ])
  })

  it('splits stored partition ids into queue and partition', () => {
    expect(parsePartitionId('orders/eu#7/3')).toEqual({
      storedAs: 'orders/eu#7',
      queue: 'orders/eu',
      partition: 3,
    })
    expect(parsePartitionId('jobs/0')).toEqual({ storedAs: 'jobs', queue: 'jobs', partition: 0 })
  })
})
