import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MqClient } from '../src/client'
import { FakeBroker } from './fake-broker'

// A server takes a bounded number of calls at once on one connection (mq-server: 1,000,
// GRPC_LIMITS.connectionCallsMax); past it the client's HTTP/2 layer holds each new call until
// one ends. A client's long polls (one per partition a consumer reads whose leader is that node)
// went on the same connection as its sends, acks and route fetches: with that many polls open,
// every produce and ack to the node waited for a long poll to end (against a real node, 1,000
// polls of 20 s held a produce for 19 s), and leases could lapse while their acks waited.
describe('long polls and the calls per connection', () => {
  const CALLS_MAX = 8
  const broker = new FakeBroker({ 'grpc.max_concurrent_streams': CALLS_MAX })
  let client: MqClient

  beforeAll(async () => {
    broker.leaseWaitCapMs = 4_000
    await broker.start()
    client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 10_000 })
  })
  afterAll(async () => {
    await client?.close()
    broker.stop()
  })

  it('do not hold up sends and acks to the same node', async () => {
    broker.addQueue('idle', 2 * CALLS_MAX)
    broker.addQueue('work', 1)
    const idle = client.consumer('idle', { waitMs: 4_000 })
    const reading = (async () => {
      for await (const _ of idle) break
    })()
    // Every partition of the idle queue long-polls.
    const until = Date.now() + 3_000
    while (broker.leaseRequests.length < CALLS_MAX && Date.now() < until)
      await new Promise((r) => setTimeout(r, 10))
    expect(broker.leaseRequests.length).toBeGreaterThanOrEqual(CALLS_MAX)
    const producer = client.producer('work')
    let started = Date.now()
    await producer.send({ body: 'job' })
    expect(Date.now() - started, 'a send').toBeLessThan(1_000)
    const work = client.consumer('work', { waitMs: 0 })
    for await (const d of work) {
      started = Date.now()
      await d.ack()
      expect(Date.now() - started, 'an ack').toBeLessThan(1_000)
      break
    }
    await idle.close()
    await reading
  }, 30_000)
})
