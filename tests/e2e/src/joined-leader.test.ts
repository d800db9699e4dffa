import { afterEach, describe, expect, it, vi } from 'vitest'
import { LocalCluster } from './cluster'
import { clusterWithJoinedNode } from './joined-leader'

describe('clusterWithJoinedNode', () => {
  let started: LocalCluster | undefined
  afterEach(async () => {
    await started?.stop()
    started = undefined
    vi.restoreAllMocks()
  })

  it('ends the processes it started when the join fails', async () => {
    const start = LocalCluster.start.bind(LocalCluster)
    vi.spyOn(LocalCluster, 'start').mockImplementation(async (options) => {
      started = await start(options)
      return started
    })
    vi.spyOn(LocalCluster.prototype, 'join').mockRejectedValue(new Error('n4 did not serve'))
    await expect(clusterWithJoinedNode(1)).rejects.toThrow(/n4 did not serve/)
    const cluster = started as LocalCluster
    expect(cluster.nodes.filter((n) => cluster.isRunning(n.nodeId)).map((n) => n.nodeId)).toEqual([])
  })
})
