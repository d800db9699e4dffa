import { InternalError, InvalidArgumentError, LeaseOutcome } from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MqClient } from '../src/client'
import { ConnectionPool } from '../src/connections'
import type { Delivery } from '../src/delivery'
import { ClientClosedError } from '../src/index'
import { SettleBatcher } from '../src/settle-batcher'
import { FakeBroker } from './fake-broker'

// Settling a delivery: a retriable failure leaves it to settle again; bad arguments are
// InvalidArgumentErrors; the SDK's own failures are typed.
describe('settlements and typed errors', () => {
  const broker = new FakeBroker()
  let queueNo = 0
  const freshQueue = (): string => {
    const q = `s${++queueNo}`
    broker.addQueue(q, 1)
    return q
  }
  beforeAll(() => broker.start())
  afterAll(() => broker.stop())

  /** A client, and `n` deliveries of a fresh queue held (handed out, unsettled) by its consumer. */
  const leased = async (n: number, deadlineMs = 5_000) => {
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs })
    const q = freshQueue()
    const producer = client.producer(q)
    for (let i = 0; i < n; i++) await producer.send({ body: `m${i}` })
    const consumer = client.consumer(q, { waitMs: 50, prefetch: n })
    const iterator = consumer[Symbol.asyncIterator]()
    const deliveries: Delivery[] = []
    for (let i = 0; i < n; i++) deliveries.push((await iterator.next()).value as Delivery)
    return { client, q, consumer, deliveries }
  }

  it('lets an ack that failed for a passing reason be made again (it said retriable)', async () => {
    const { client, deliveries } = await leased(1, 600)
    const [d] = deliveries as [Delivery]
    try {
      // The route goes stale and the only replica it names holds none: every attempt fails
      // with STALE_ROUTE (retriable) until the router gives up.
      broker.routedLeader = 'former'
      broker.formerOnly = true
      broker.epoch++
      const failed = await d.ack().catch((e: unknown) => e)
      expect(failed).toMatchObject({ retriable: true })
      expect(d.settled).toBe(false)
      broker.routedLeader = 'leader'
      broker.formerOnly = false
      // Before, the first call had marked it settled for good: LeaseLostError "already settled".
      await d.ack()
      expect(d.settled).toBe(true)
      expect(broker.leasedCount).toBe(0)
      await expect(d.ack()).rejects.toThrow(/already settled/)
    } finally {
      broker.routedLeader = 'leader'
      broker.formerOnly = false
      await client.close()
    }
  })

  it('refuses a negative or non-integer nack delay or extension with InvalidArgumentError, leaving the message unsettled', async () => {
    const { client, deliveries } = await leased(2)
    const [a, b] = deliveries as [Delivery, Delivery]
    try {
      for (const call of [() => a.nack(-1), () => a.nack(Number.NaN), () => a.nack(1.5)]) {
        await expect(call()).rejects.toThrow(InvalidArgumentError)
      }
      // Past the server's bounds (7 days, 12 h): refused here, where the server would refuse it.
      await expect(a.nack(8 * 86_400_000)).rejects.toThrow(
        /nack delayMs must be an integer from 0 to 604800000/,
      )
      await expect(b.extend(Number.NaN)).rejects.toThrow(InvalidArgumentError)
      await expect(b.extend(-5)).rejects.toThrow(
        /extend ms must be an integer from 1 to 43200000 \(12 h\), got -5/,
      )
      await expect(b.extend(13 * 3_600_000)).rejects.toThrow(InvalidArgumentError)
      expect(a.settled || b.settled).toBe(false)
      await a.nack(10)
      await b.ack()
    } finally {
      await client.close()
    }
  })

  it('leaves a message unsettled when the broker refuses the call (no lease result): it can be settled again', async () => {
    const { client, deliveries } = await leased(1)
    const [a] = deliveries as [Delivery]
    try {
      const nacks = broker.nackReleases.length
      broker.refuseNacks = 1
      await expect(a.nack(1_000)).rejects.toThrow(InvalidArgumentError)
      expect(a.settled).toBe(false)
      await a.nack(10)
      expect(a.settled).toBe(true)
      expect(broker.nackReleases).toHaveLength(nacks + 1) // the refused one applied nothing
    } finally {
      broker.refuseNacks = 0
      await client.close()
    }
  })

  it('types its own failures: no seed address, a closed pool, a lease the broker did not answer for', async () => {
    await expect(MqClient.connect({ servers: [] })).rejects.toThrow(InvalidArgumentError)
    const pool = new ConnectionPool()
    pool.close()
    expect(() => pool.get('127.0.0.1:1')).toThrow(ClientClosedError)
    const batcher = new SettleBatcher(async () => [
      { leaseId: 'a', outcome: LeaseOutcome.LEASE_OUTCOME_OK, deadlineMs: 0 },
    ])
    const [answered, missing] = [batcher.settle('a', { kind: 'ack' }), batcher.settle('b', { kind: 'ack' })]
    await answered
    await expect(missing).rejects.toThrow(InternalError)
  })
})
