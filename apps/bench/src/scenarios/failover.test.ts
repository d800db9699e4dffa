import type { MqClient } from '@mq/router-client'
import { describe, expect, it, vi } from 'vitest'
import { BenchCluster } from '../cluster'
import type { ScenarioResult } from '../result'
import { connect } from './common'
import { FAILOVER_DEFAULTS, failoverFailures, runFailover } from './failover'

// runFailover starts its own cluster and clients: in the run below they are fakes.
vi.mock('../cluster', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../cluster')>()),
  BenchCluster: { start: vi.fn() },
}))
vi.mock('./common', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./common')>()),
  connect: vi.fn(),
}))

/** A cluster that is never there: the fault hits nothing. */
function fakeCluster(): BenchCluster {
  const timing = { tickMs: 20, electionTicks: 10, heartbeatTicks: 2 }
  return {
    servers: ['127.0.0.1:1'],
    nodes: [{ nodeId: 'n1', address: '127.0.0.1:1', child: {} }],
    timing,
    facts: () => ({ params: { cluster: 'local', nodes: 1, ...timing }, notes: [] }),
    kill: async () => {},
    pause: () => {},
    resume: () => {},
    stop: async () => {},
  } as unknown as BenchCluster
}

/** A client over an in-memory queue of 2 partitions whose sends are acked `ackMs` later. */
function fakeClient(ackMs: number): MqClient {
  const queue: Uint8Array[] = []
  let sends = 0
  const consumer = {
    async *[Symbol.asyncIterator]() {
      for (let body = queue.shift(); body; body = queue.shift()) yield { body, ack: () => Promise.resolve() }
    },
    close: async () => {},
  }
  const route = { partitions: [0, 1].map((partition) => ({ partition, leaderId: 'n1' })) }
  return {
    admin: {
      createQueue: async () => route,
      describeQueue: async () => route,
      clusterStatus: async () => ({ metaLeaderId: 'n1' }),
      deleteQueue: async () => {},
    },
    producer: () => ({
      send: async ({ body }: { body: Uint8Array }) => {
        const partition = sends++ % 2
        await new Promise((resolve) => setTimeout(resolve, ackMs))
        queue.push(body)
        return { partition }
      },
      close: async () => {},
    }),
    consumer: () => consumer,
    close: async () => {},
  } as unknown as MqClient
}

const result = (metrics: Record<string, number>): ScenarioResult => ({
  scenario: 'failover',
  params: {},
  metrics: { sent: 100, acked: 100, failedSends: 0, unrecoveredPartitions: 0, lost: 0, ...metrics },
  latency: {},
})

describe('failoverFailures', () => {
  it('passes a run where every send was acked, every partition recovered and nothing was lost', () => {
    expect(failoverFailures(result({}))).toEqual([])
  })

  // The audit's case: only `lost` failed a run; failed sends and a partition that never
  // recovered read as a pass.
  it('fails a run with failed sends or a partition that never acked after the fault', () => {
    expect(failoverFailures(result({ failedSends: 12 }))).toEqual(['12 sends failed'])
    expect(failoverFailures(result({ unrecoveredPartitions: 1 }))).toEqual([
      '1 partition(s) never acked after the fault',
    ])
  })

  it('fails on lost messages, and on a drain that stopped before it could tell (not counted as lost)', () => {
    expect(failoverFailures(result({ lost: 3 }))).toEqual(['3 acknowledged messages lost'])
    const { lost: _, ...capped } = result({}).metrics
    expect(failoverFailures({ ...result({}), metrics: { ...capped, unseenAtDrainEnd: 40 } })).toEqual([
      'loss not determined: the drain stopped with 40 acknowledged messages not yet seen',
    ])
  })
})

describe('failover scenario, its timeline', () => {
  // The audit's case: the timeline's rates were computed as if the run ended at the end of
  // the schedule (durationMs), but the last sends are acked after it: the bucket holding those
  // acks was rated over a whole 250 ms instead of the few ms the run still lasted, so every
  // failover chart ended in a false cliff (4 acks in 20 ms read as 16 msgs/s, not 200).
  it('rates the last bucket over the time the run lasted past the schedule', async () => {
    vi.mocked(BenchCluster.start).mockResolvedValue(fakeCluster())
    vi.mocked(connect).mockResolvedValue(fakeClient(20))
    const r = await runFailover(
      {},
      { ratePerS: 200, durationMs: 1_500, partitions: 2, kill: 'data', fault: 'kill' },
    )
    expect(r.metrics).toMatchObject({ sent: 300, acked: 300, lost: 0 })
    const last = r.timeline?.at(-1)
    expect(last?.tS).toBe(1.5)
    expect(last?.perS).toBeGreaterThan(100)
  })
})

describe('failover scenario, a fault after the load', () => {
  // The audit's case: the fault is made once the route is known, a third of the way in; when
  // that lookup took the rest of the run (a loaded machine), the node was hit after the last
  // send had settled. No gap ended after the fault, the stall read 0 ms (under any target),
  // and the run passed though it measured no failover at all.
  it('fails a run whose fault came after the sends had all settled', async () => {
    vi.mocked(BenchCluster.start).mockResolvedValue(fakeCluster())
    const client = fakeClient(5)
    const slow = {
      ...client,
      admin: {
        ...client.admin,
        describeQueue: async (queue: string) => {
          await new Promise((resolve) => setTimeout(resolve, 1_500))
          return client.admin.describeQueue(queue)
        },
      },
    } as unknown as MqClient
    vi.mocked(connect).mockResolvedValue(slow)
    const r = await runFailover(
      {},
      { ratePerS: 200, durationMs: 900, partitions: 2, kill: 'data', fault: 'kill' },
    )
    expect(r.metrics).toMatchObject({ acked: 180, lost: 0, stallPartition: -1 })
    expect(r.metrics.killAtS).toBeGreaterThan(0.9)
    expect(failoverFailures(r)).toEqual(['the fault came after the load: no failover was measured'])
  })
})

describe('failover scenario, its cluster', () => {
  // The audit's case: the clients were connected before the try whose finally stops the
  // cluster, so a connect that failed left its three mq-server processes and their data folder
  // behind (and the CLI waiting on their pipes).
  it('stops the cluster it started when a client cannot connect', async () => {
    const cluster = fakeCluster()
    const stop = vi.fn(async () => {})
    vi.mocked(BenchCluster.start).mockResolvedValue({ ...cluster, stop } as unknown as BenchCluster)
    vi.mocked(connect).mockRejectedValue(new Error('deadline exceeded'))
    await expect(runFailover({}, FAILOVER_DEFAULTS)).rejects.toThrow(/deadline exceeded/)
    expect(stop).toHaveBeenCalledTimes(1)
  })
})
