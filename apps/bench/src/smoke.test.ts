import { describe, expect, it } from 'vitest'
import { runProduce } from './scenarios/produce'

// One short run against real mq-server processes the bench starts itself. The server runs
// from source through tsx, or from MQ_BENCH_SERVER_MAIN when that names a built main.js.
describe('produce against a real local cluster', () => {
  it('acks every message and reports its rate and ack latency', async () => {
    const r = await runProduce(
      { fromSource: process.env.MQ_BENCH_SERVER_MAIN === undefined },
      {
        count: 300,
        sizeBytes: 32,
        inFlight: 16,
        producers: 1,
        partitions: 2,
        timeLimitMs: 30_000,
        idempotent: true,
        batchesInFlight: 4,
        keyless: 'sticky',
      },
    )
    expect(r.metrics.acked).toBe(300)
    expect(r.metrics.msgsPerS).toBeGreaterThan(0)
    expect(r.latency.ack?.count).toBe(300)
    expect(r.latency.ack?.p50).toBeGreaterThan(0)
    expect(r.latency.ack?.max).toBeGreaterThanOrEqual(r.latency.ack?.p99 ?? Number.POSITIVE_INFINITY)
    expect(r.timeline?.length).toBeGreaterThan(0)
    // The cluster's Raft timing, as run (a config file per node), is in the params.
    expect(r.params).toMatchObject({
      cluster: 'local',
      nodes: 3,
      tickMs: 20,
      electionTicks: 10,
      heartbeatTicks: 2,
    })
  }, 60_000)
})
