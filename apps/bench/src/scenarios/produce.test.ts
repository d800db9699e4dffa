import type { MqClient } from '@mq/router-client'
import { describe, expect, it, vi } from 'vitest'
import { connect } from './common'
import { spinCpu } from './cpu-spin'
import { PRODUCE_DEFAULTS, runProduce } from './produce'

// runProduce connects its own clients: here fakes whose connection costs CPU time, as a real
// one's does (routes, cluster status, a channel per node: ~2-3 ms of the client's CPU each).
vi.mock('./common', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./common')>()),
  connect: vi.fn(),
}))

/** A client whose sends are acked at once. */
function fakeClient(): MqClient {
  return {
    admin: { createQueue: async () => ({}), deleteQueue: async () => {} },
    producer: () => ({ send: async () => ({ partition: 0 }), close: async () => {} }),
    close: async () => {},
  } as unknown as MqClient
}

describe('produce scenario, its CPU per message', () => {
  // The audit's case: the meter started before the producers connected, while msgs/s is over
  // the sends alone: every producer's connection was charged to the messages (with -p 64, a
  // fifth of a 20,000-message run's client figure).
  it("charges the messages with the sends' CPU, not with the producers' connections", async () => {
    vi.mocked(connect).mockImplementation(async () => {
      spinCpu(200)
      return fakeClient()
    })
    const r = await runProduce(
      { servers: ['127.0.0.1:1'] },
      { ...PRODUCE_DEFAULTS, count: 2_000, inFlight: 16, producers: 2 },
    )
    expect(r.metrics.acked).toBe(2_000)
    // 2 × 200 ms of connections over 2,000 messages would be 200 µs each.
    expect(r.metrics.clientCpuUsPerMsg).toBeLessThan(100)
  })
})
