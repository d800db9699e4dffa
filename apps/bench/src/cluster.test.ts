import { mkdtempSync, rmSync, statfsSync } from 'node:fs'
import type { ClusterStatusResponse } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { GIVEN_CLUSTER_FACTS, leadershipsBalanced, localClusterFacts } from './cluster'
import { withFacts } from './scenarios/common'

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

/** Whether /dev/shm is a tmpfs here (statfs type TMPFS_MAGIC). */
const shmIsTmpfs = (() => {
  try {
    return statfsSync('/dev/shm').type === 0x01021994
  } catch {
    return false
  }
})()

describe('localClusterFacts', () => {
  it("records the cluster's size and Raft timing as params, for every report", () => {
    const facts = localClusterFacts(3, { tickMs: 20, electionTicks: 10, heartbeatTicks: 2 }, true)
    expect(facts).toEqual({
      params: { cluster: 'local', nodes: 3, tickMs: 20, electionTicks: 10, heartbeatTicks: 2 },
      notes: [],
    })
    expect(GIVEN_CLUSTER_FACTS.params).toEqual({ cluster: 'given' })
  })

  it('notes a cluster whose leaderships were still unbalanced when the run started', () => {
    const facts = localClusterFacts(3, { tickMs: 20, electionTicks: 10, heartbeatTicks: 2 }, false)
    expect(facts.notes).toEqual([
      expect.stringMatching(
        /^the local cluster's leaderships were not balanced after 30 s; the run started anyway/,
      ),
    ])
  })

  // The audit's case: the nodes' data goes under $TMPDIR, a tmpfs on some systems (or with
  // TMPDIR=/dev/shm), where an fsync writes nothing to a disk; the report still read as figures
  // "with fsync before ack" and said nothing.
  it.skipIf(!shmIsTmpfs)(
    'notes a cluster whose data was on a memory file system (its fsyncs reached no disk)',
    () => {
      const dir = mkdtempSync('/dev/shm/mq-bench-test-')
      try {
        const facts = localClusterFacts(3, { tickMs: 20, electionTicks: 10, heartbeatTicks: 2 }, true, dir)
        expect(facts.notes).toEqual([
          expect.stringMatching(/^the nodes' data was on tmpfs \(.*\): their fsyncs reached no disk/),
        ])
      } finally {
        rmSync(dir, { recursive: true, force: true })
      }
    },
  )

  it('adds them to a result: params merged, caveats first in the notes', () => {
    const r = withFacts(
      { scenario: 'produce', params: { count: 1 }, metrics: {}, latency: {}, notes: ['x'] },
      localClusterFacts(3, { tickMs: 50, electionTicks: 10, heartbeatTicks: 2 }, false),
    )
    expect(r.params).toEqual({
      count: 1,
      cluster: 'local',
      nodes: 3,
      tickMs: 50,
      electionTicks: 10,
      heartbeatTicks: 2,
    })
    expect(r.notes).toHaveLength(2)
    expect(r.notes?.[1]).toBe('x')
  })
})
