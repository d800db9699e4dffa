import type { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalCluster } from '../src/cluster'
import { clusterWithJoinedNode, queueLedByJoinedNode, stopAll } from '../src/joined-leader'
import { waitFor } from '../src/scale-run'

// Partitions added to a queue in use: producers and consumers routed before learn of them
// from the broker (STALE_ROUTE) and use them, with nothing lost. The queue's first partition
// is led by a node without a meta replica (n4, joined), which hears of the change in the meta
// leader's heartbeat answers: it caches routes instead of reading a meta replica of its own.
describe('adding partitions to a queue in use', () => {
  let cluster: LocalCluster | undefined
  let clients: MqClient[] = []
  let admin: MqClient
  let producing: MqClient
  let consuming: MqClient

  beforeAll(async () => {
    ;({ cluster, clients } = await clusterWithJoinedNode(3))
    ;[admin, producing, consuming] = clients as [MqClient, MqClient, MqClient]
  }, 120_000)

  afterAll(async () => stopAll(cluster, clients))

  it('routes producers and consumers to the new partitions, losing nothing', async () => {
    expect(await waitFor(async () => (await admin.admin.clusterStatus()).formatLevel >= 9, 30_000, 200)).toBe(
      true,
    )
    const queue = await queueLedByJoinedNode(admin, 'n4', 'grow')

    const received = new Map<string, number>()
    const consumedFrom = new Set<number>()
    const consumer = consuming.consumer(queue, { prefetch: 32, waitMs: 500 })
    const consumerDone = (async () => {
      for await (const d of consumer) {
        const body = new TextDecoder().decode(d.body)
        received.set(body, (received.get(body) ?? 0) + 1)
        consumedFrom.add(d.partition)
        await d.ack()
      }
    })()
    const producer = producing.producer(queue, { keyless: 'round-robin' })
    const sent: string[] = []
    const producedTo = new Set<number>()
    const send = async (body: string) => {
      const r = await producer.send({ body })
      sent.push(body)
      producedTo.add(r.partition)
    }
    for (let i = 0; i < 10; i++) await send(`before${i}`)
    expect(await waitFor(() => received.size === 10, 20_000, 50)).toBe(true)

    const grown = await admin.admin.updateQueue(queue, { partitions: 4 })
    expect(grown.partitions.map((p) => p.partition)).toEqual([0, 1, 2, 3])
    expect(grown.partitionsEpoch).toBe(grown.routeEpoch)
    const grownAt = Date.now()
    // The producer goes on with its old route until a broker tells it otherwise; bounded.
    for (let i = 0; i < 400 && producedTo.size < 4 && Date.now() - grownAt < 20_000; i++) {
      await send(`after${i}`)
      await new Promise((r) => setTimeout(r, 20))
    }
    console.log(
      `partition growth: the producer used all 4 partitions ${Date.now() - grownAt} ms after the update (${sent.length - 10} sends)`,
    )
    expect(producedTo).toEqual(new Set([0, 1, 2, 3]))
    // n4 heard of the change in a heartbeat (every 500 ms); without that it would only refresh
    // its cached route with its next orphan sweep (every 10 s). A loose bound, not a figure.
    expect(Date.now() - grownAt).toBeLessThan(5_000)
    for (let i = 0; i < 20; i++) await send(`tail${i}`)
    // Every acknowledged message is delivered, from every partition.
    expect(await waitFor(() => sent.every((b) => received.has(b)), 30_000, 100)).toBe(true)
    console.log(
      `partition growth: the consumer received from all 4 partitions ${Date.now() - grownAt} ms after the update`,
    )
    expect(consumedFrom).toEqual(new Set([0, 1, 2, 3]))
    expect(received.size).toBe(sent.length)
    await producer.close()
    await consumer.close()
    await consumerDone

    // Fewer partitions are refused with the reason; the queue keeps its 4.
    await expect(admin.admin.updateQueue(queue, { partitions: 2 })).rejects.toThrow(
      /partitions can only be added: the queue has 4, asked for 2/,
    )
    expect((await admin.admin.describeQueue(queue)).partitions).toHaveLength(4)
  }, 240_000)
})
