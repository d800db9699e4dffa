import type { MqClient } from '@mq/router-client'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { connect } from './common'
import { runE2e } from './e2e'

// runE2e connects its own clients: here one fake serves them all, so that a send can fail on cue.
vi.mock('./common', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./common')>()),
  connect: vi.fn(),
}))

/**
 * A client over an in-memory queue. Every `failEvery`-th send fails; it reaches the queue
 * (its outcome unknown to the client: the answer was lost) unless `stored` is false.
 */
function fakeClient(failEvery: number, stored = true): MqClient {
  const queue: Uint8Array[] = []
  let closed = false
  let sends = 0
  const consumer = {
    async *[Symbol.asyncIterator]() {
      while (!closed) {
        const body = queue.shift()
        if (body) yield { body, ack: () => Promise.resolve() }
        else await new Promise((resolve) => setTimeout(resolve, 1))
      }
    },
    close: async () => {
      closed = true
    },
  }
  const producer = {
    send: async ({ body }: { body: Uint8Array }) => {
      const fails = ++sends % failEvery === 0
      if (stored || !fails) queue.push(body)
      if (fails) throw new Error('outcome unknown')
      return { partition: 0 }
    },
  }
  return {
    admin: { createQueue: async () => ({}), deleteQueue: async () => {} },
    producer: () => producer,
    consumer: () => consumer,
    close: async () => {},
  } as unknown as MqClient
}

describe('e2e scenario', () => {
  const unhandled: unknown[] = []
  const onUnhandled = (reason: unknown) => void unhandled.push(reason)
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled)
  })

  // The audit's case: a send that failed was a rejected promise nobody listened to until the
  // schedule ended, so Node ended the whole bench with an unhandled rejection instead of
  // reporting the run (and the failure).
  it('reports a failed send instead of ending the process', async () => {
    process.on('unhandledRejection', onUnhandled)
    vi.mocked(connect).mockResolvedValue(fakeClient(10))
    const r = await runE2e(
      { servers: ['127.0.0.1:1'] },
      { ratePerS: 200, durationMs: 500, sizeBytes: 8, partitions: 1 },
    )
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(unhandled).toEqual([])
    expect(r.metrics).toMatchObject({ sent: 100, received: 100, failedSends: 10 })
    expect(r.latency.ack?.count).toBe(90)
  })

  it('stops receiving once the acknowledged sends arrived: a failed send that stored nothing never comes', async () => {
    vi.mocked(connect).mockResolvedValue(fakeClient(10, false))
    const r = await runE2e(
      { servers: ['127.0.0.1:1'] },
      { ratePerS: 200, durationMs: 500, sizeBytes: 8, partitions: 1 },
    )
    // It waited 30 s for the 10 that were never stored, and counted that wait in its rate.
    expect(r.metrics).toMatchObject({ sent: 100, received: 90, failedSends: 10 })
    expect(r.metrics.elapsedS).toBeLessThan(5)
    expect(r.metrics.receivedPerS).toBeGreaterThan(90)
  })

  // The audit's case: the receiving loop's promise was awaited only after the schedule, so a
  // consumer that failed during it (a non-retriable error) was an unhandled rejection: Node
  // ended the bench with a stack trace, past runMain's one-line error and the scenario's cleanup.
  it('fails the run with the error of a consumer that failed, instead of ending the process', async () => {
    process.on('unhandledRejection', onUnhandled)
    unhandled.splice(0)
    const client = fakeClient(1_000_000)
    const consumer = {
      async *[Symbol.asyncIterator]() {
        await new Promise((resolve) => setTimeout(resolve, 20))
        throw new Error('queue not found')
      },
      close: async () => {},
    }
    vi.mocked(connect).mockResolvedValue({ ...client, consumer: () => consumer } as unknown as MqClient)
    await expect(
      runE2e({ servers: ['127.0.0.1:1'] }, { ratePerS: 200, durationMs: 300, sizeBytes: 8, partitions: 1 }),
    ).rejects.toThrow(/queue not found/)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(unhandled).toEqual([])
  })

  // The audit's case: when the client falls more than 10 s behind its schedule the pacer stops
  // issuing (pacer.ts), but the run reported `sent` as the whole schedule and waited 30 s for
  // receipts of sends that were never made.
  it('counts as sent what the pacer issued, and waits only for those', async () => {
    const realNow = performance.now.bind(performance)
    let behindMs = 0
    const clock = vi.spyOn(performance, 'now').mockImplementation(() => realNow() + behindMs)
    try {
      const client = fakeClient(1_000_000)
      const producer = client.producer('q')
      const send = producer.send.bind(producer)
      let sends = 0
      // The first send holds the client up past the pacer's bound (a GC pause, a busy core).
      producer.send = (m) => {
        if (sends++ === 0) behindMs += 11_000
        return send(m)
      }
      vi.mocked(connect).mockResolvedValue({ ...client, producer: () => producer } as unknown as MqClient)
      const t0 = Date.now()
      const r = await runE2e(
        { servers: ['127.0.0.1:1'] },
        { ratePerS: 200, durationMs: 500, sizeBytes: 8, partitions: 1 },
      )
      expect(r.metrics).toMatchObject({ sent: sends, received: sends, failedSends: 0 })
      expect(sends).toBeLessThan(100)
      expect(Date.now() - t0).toBeLessThan(10_000)
    } finally {
      clock.mockRestore()
    }
  }, 45_000)
})
