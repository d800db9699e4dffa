import { afterEach, describe, expect, it, vi } from 'vitest'
import { LocalCluster } from './cluster'
import { runFaults } from './fault-run'

// A client that cannot be made (no meta leader within its deadline, say).
vi.mock('@mq/router-client', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@mq/router-client')>()),
  MqClient: {
    connect: async () => {
      throw new Error('no meta leader within the deadline')
    },
  },
}))

describe('runFaults', () => {
  let started: LocalCluster | undefined
  afterEach(async () => {
    await started?.stop()
    started = undefined
    vi.restoreAllMocks()
  })

  it('ends the processes it started when no client can be made of the cluster', async () => {
    const start = LocalCluster.start.bind(LocalCluster)
    vi.spyOn(LocalCluster, 'start').mockImplementation(async (options) => {
      started = await start(options)
      return started
    })
    await expect(runFaults({ seed: 1, nodes: 1, faultSeconds: 1, log: () => {} })).rejects.toThrow(
      /no meta leader/,
    )
    const cluster = started as LocalCluster
    expect(cluster.nodes.filter((n) => cluster.isRunning(n.nodeId)).map((n) => n.nodeId)).toEqual([])
  })
})
