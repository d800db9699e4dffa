import type { ClusterStatusResponse } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { leadershipsBalanced } from './cluster'

const status = (leaders: string[]): Pick<ClusterStatusResponse, 'nodes' | 'groups'> => ({
  nodes: ['n1', 'n2', 'n3'].map((nodeId) => ({
    nodeId,
    address: '',
    alive: true,
    lastHeartbeatMs: 0,
    groupIds: [],
    draining: false,
    formatLevel: 2,
  })),
  groups: leaders.map((leaderId, i) => ({
    groupId: i + 1,
    leaderId,
    replicas: [],
    term: 1,
    commitIndex: 0,
    appliedIndex: 0,
    partitions: 0,
    state: '',
  })),
})

describe('leadershipsBalanced', () => {
  it('holds when every group is led and no node leads two more than another', () => {
    expect(leadershipsBalanced(status(['n1', 'n2', 'n3']))).toBe(true)
    expect(leadershipsBalanced(status(['n1', 'n2', 'n3', 'n1']))).toBe(true)
  })

  it('fails while a group has no leader or one node leads most groups (a node leading none counts)', () => {
    expect(leadershipsBalanced(status(['n1', '', 'n3']))).toBe(false)
    expect(leadershipsBalanced(status(['n1', 'n1', 'n3']))).toBe(false)
    expect(leadershipsBalanced(status(['n2', 'n2', 'n2']))).toBe(false)
  })
})
