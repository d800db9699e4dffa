import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { MqClient } from '../src/client'
import { Consumer } from '../src/consumer'
import type { Delivery } from '../src/delivery'
import { ClientClosedError } from '../src/index'
import { FakeBroker } from './fake-broker'

/** 'ended' once `p` settles, 'hung' if it has not within `ms` (a guard, not a timing measure). */
const endsWithin = (p: Promise<unknown>, ms: number): Promise<'ended' | 'hung'> =>
  Promise.race([
    p.then(
      () => 'ended' as const,
      () => 'ended' as const,
    ),
    new Promise<'hung'>((r) => setTimeout(() => r('hung'), ms)),
  ])

// Closing: of a client (what it made after), of a consumer read by several loops, of one whose
// route fetch is being retried; and an idle consumer that does not wait on the broker.
describe('closing and idling', () => {
  const broker = new FakeBroker()
  let queueNo = 0
  const freshQueue = (): string => {
    const q = `l${++queueNo}`
    broker.addQueue(q, 1)
    return q
  }
  beforeAll(() => broker.start())
  afterAll(() => broker.stop())

  it('refuses producers, consumers and consume loops once the client is closed, with a non-retriable ClientClosedError', async () => {
    const client = await MqClient.connect({ servers: [broker.leaderAddress] })
    const q = freshQueue()
    await client.producer(q).send({ body: 'x' })
    const consumer = client.consumer(q, { waitMs: 50 })
    let held: Delivery | undefined
    for await (const d of consumer) {
      held = d
      break
    }
    await client.close()
    expect(() => client.producer(q)).toThrow(ClientClosedError)
    expect(() => client.consumer(q)).toThrow(ClientClosedError)
    await expect(client.consume(q, () => {})).rejects.toBeInstanceOf(ClientClosedError)
    // Calls through the closed client fail at once, not retriable (they were retried for ever).
    const ack = (held as Delivery).ack()
    await expect(ack).rejects.toBeInstanceOf(ClientClosedError)
    await expect(ack).rejects.toMatchObject({ retriable: false, code: 'UNAVAILABLE' })
    await expect(client.admin.listQueues()).rejects.toBeInstanceOf(ClientClosedError)
  })

  it('shares messages between two loops over one consumer and ends both on close', async () => {
    const client = await MqClient.connect({ servers: [broker.leaderAddress] })
    try {
      const q = freshQueue()
      const consumer = client.consumer(q, { waitMs: 50 })
      const got: string[] = []
      const read = async () => {
        for await (const m of consumer) {
          got.push(m.text())
          await m.ack()
        }
      }
      const a = read()
      const b = read()
      // Both wait for a message (the buffer is empty) once leasing began.
      await vi.waitFor(() => expect(broker.leaseRequests.length).toBeGreaterThan(0))
      const producer = client.producer(q)
      for (let i = 0; i < 4; i++) await producer.send({ body: `m${i}` })
      await vi.waitFor(() => expect(got).toHaveLength(4))
      await consumer.close()
      // Before, the first loop's wake-up was replaced by the second's: it waited for ever.
      expect(await endsWithin(Promise.all([a, b]), 5_000)).toBe('ended')
      expect(got.sort()).toEqual(['m0', 'm1', 'm2', 'm3'])
    } finally {
      await client.close()
    }
  })

  it('forgets a consume loop that ended by itself (an application may start one again after each failure)', async () => {
    const client = await MqClient.connect({ servers: [broker.leaderAddress] })
    const stop = vi.spyOn(Consumer.prototype, 'stop')
    try {
      // A loop of a queue that does not exist (yet) ends at once with QueueNotFoundError; an
      // application waiting for the queue starts it again, say every second.
      for (let i = 0; i < 20; i++) {
        const subscription = await client.consume('l-none', () => {})
        await expect(subscription.done).rejects.toThrow(/does not exist/)
      }
      expect(client.openHandles).toBe(0)
      stop.mockClear()
      await client.close()
      // Nothing was left to close: before, the client kept every ended loop (with its consumer)
      // until it was closed, and closed all 20 again then.
      expect(stop).not.toHaveBeenCalled()
    } finally {
      stop.mockRestore()
      await client.close()
    }
  })

  it("closes a consumer at once while its first route fetch is being retried (it does not wait for the fetch's deadline)", async () => {
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 20_000 })
    try {
      const q = freshQueue()
      broker.failRoutesUntilMs = Date.now() + 60_000
      const consumer = client.consumer(q)
      const reading = (async () => {
        for await (const _ of consumer) {
        }
      })()
      const fetches = () => broker.routeRequests.filter((r) => r[0] === q).length
      await vi.waitFor(() => expect(fetches()).toBeGreaterThanOrEqual(2))
      const started = Date.now()
      await consumer.close()
      await reading
      expect(Date.now() - started).toBeLessThan(2_000)
    } finally {
      broker.failRoutesUntilMs = 0
      await client.close()
    }
  })

  it('backs off between leases that do not wait (waitMs 0) while they find nothing', async () => {
    // Full jitter drawn at its top: each backoff is ~the policy's ceiling (300 ms here).
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.99)
    const client = await MqClient.connect({
      servers: [broker.leaderAddress],
      backoff: { initialMs: 300, maxMs: 300, multiplier: 1 },
    })
    try {
      const q = freshQueue()
      const consumer = client.consumer(q, { waitMs: 0 })
      const reading = (async () => {
        for await (const _ of consumer) {
        }
      })()
      const leases = () => broker.leaseRequests.length
      const before = leases()
      await vi.waitFor(() => expect(leases()).toBeGreaterThan(before))
      const first = leases()
      await new Promise((r) => setTimeout(r, 150))
      // Before, an idle consumer sent them back to back: dozens in 150 ms.
      expect(leases() - first).toBeLessThanOrEqual(1)
      await consumer.close()
      await reading
    } finally {
      random.mockRestore()
      await client.close()
    }
  })
})
