import { FORMAT_LEVEL_DELIVERY_RATE } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

const RATE = 40
const BACKLOG = 400

// A rate-limited queue: its partitions' leaders hand out at most the queue's rate (each its
// share, with a burst of a second's worth), whatever the consumers ask for; lifted, the rest
// goes at once.
describe('a rate-limited queue', () => {
  const suite = suiteCluster()

  it('hands out at most its rate, and everything once the limit is lifted', async () => {
    const { client } = suite
    const level = async () => (await client.admin.clusterStatus()).formatLevel >= FORMAT_LEVEL_DELIVERY_RATE
    expect(await waitFor(level, 30_000, 200)).toBe(true)
    await client.admin.createQueue('paced', { partitions: 2, deliveryRate: RATE })
    // Spread evenly over both partitions (sticky keyless sends would fill mostly one).
    const producer = client.producer('paced', { keyless: 'round-robin' })
    await Promise.all(Array.from({ length: BACKLOG }, (_, i) => producer.send({ body: `m${i}` })))
    await producer.close()

    const deliveredAt: number[] = []
    const consumers = [0, 1].map(() => client.consumer('paced', { prefetch: 256, waitMs: 1_000 }))
    const loops = consumers.map(async (consumer) => {
      for await (const d of consumer) {
        deliveredAt.push(Date.now())
        await d.ack()
      }
    })
    const started = Date.now()
    await new Promise((r) => setTimeout(r, 3_000))
    const paced = deliveredAt.length
    // Each partition's burst (its 20 a second's worth) and 40 a second after it: 160 in 3 s.
    console.log(`delivery rate: ${paced} messages in the first 3 s at ${RATE}/s`)
    expect(paced).toBeLessThanOrEqual(RATE + 3 * RATE + 10)
    expect(paced).toBeGreaterThanOrEqual(RATE + RATE)

    const lifted = await client.admin.updateQueue('paced', { deliveryRate: 0 })
    expect(lifted.config?.deliveryRate).toBe(0)
    const liftedAt = Date.now()
    expect(await waitFor(() => deliveredAt.length === BACKLOG, 20_000, 20)).toBe(true)
    console.log(
      `delivery rate: the other ${BACKLOG - paced} within ${Date.now() - liftedAt} ms of the lift (${Date.now() - started} ms in all)`,
    )
    expect(Date.now() - liftedAt).toBeLessThan(5_000)
    await Promise.all(consumers.map((c) => c.close()))
    await Promise.all(loops)
    // A rate out of bounds is refused, the queue as it was.
    await expect(client.admin.updateQueue('paced', { deliveryRate: 2_000_000 })).rejects.toThrow(
      /deliveryRate must be an integer from 0 to 1000000/,
    )
  }, 120_000)
})
