import { expect, it, vi } from 'vitest'

// runScale ends every process it started, also when its client cannot connect (no meta
// leader within the deadline, say): the cluster and the client stood in for, no processes.
const state = vi.hoisted(() => ({ stopped: 0 }))
vi.mock('../src/cluster', () => ({
  LocalCluster: {
    start: async () => ({
      servers: ['127.0.0.1:1'],
      nodes: [],
      stop: async () => {
        state.stopped++
      },
    }),
  },
}))
vi.mock('@mq/router-client', () => ({
  MqClient: {
    connect: async () => {
      throw new Error('connect failed')
    },
  },
}))

it('runScale stops the cluster it started when its client cannot connect', async () => {
  const { runScale } = await import('../src/scale-run')
  await expect(
    runScale({ seed: 1, nodes: 3, steps: [6], partitions: 6, killMetaLeader: false, log: () => {} }),
  ).rejects.toThrow(/connect failed/)
  expect(state.stopped).toBe(1)
})
