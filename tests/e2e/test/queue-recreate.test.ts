import type { Delivery, MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalCluster } from '../src/cluster'
import { clusterWithJoinedNode, queueLedByJoinedNode, stopAll } from '../src/joined-leader'
import { waitFor } from '../src/scale-run'

// A queue deleted and created again under its name while a producer runs: every message the
// producer has acknowledged after the new queue exists is in the new queue (an incarnation's
// partitions are stored apart, so one acknowledged into the old queue is not found). The old queue's
// only partition is led by a node without a meta replica (n4, joined), which answers from
// cached routes: the producer's requests carry the route (and epoch) it had before.
describe('a queue deleted and created again under a running producer', () => {
  let cluster: LocalCluster | undefined
  let clients: MqClient[] = []
  let admin: MqClient
  let producing: MqClient

  beforeAll(async () => {
    ;({ cluster, clients } = await clusterWithJoinedNode(2))
    ;[admin, producing] = clients as [MqClient, MqClient]
  }, 120_000)

  afterAll(async () => stopAll(cluster, clients))

  it('puts every message acknowledged after the re-creation in the new queue', async () => {
    const queue = await queueLedByJoinedNode(admin, 'n4', 'again')
    const producer = producing.producer(queue)
    for (let i = 0; i < 10; i++) await producer.send({ body: `old${i}` })

    await admin.admin.deleteQueue(queue)
    const created = await admin.admin.createQueue(queue, { partitions: 1 })
    const recreatedAt = Date.now()
    // Bounded: 40 sends, ~2 s. A send may fail while the producer finds the new queue; one
    // that succeeds must be in it.
    const acked: string[] = []
    for (let i = 0; i < 40; i++) {
      const body = `new${i}`
      try {
        await producer.send({ body })
        acked.push(body)
      } catch {
        // not acknowledged: not looked for
      }
      await new Promise((r) => setTimeout(r, 50))
    }
    console.log(
      `queue re-creation: ${acked.length} of 40 sends acknowledged in ${Date.now() - recreatedAt} ms (new queue id ${created.queueId})`,
    )
    expect(acked.length).toBeGreaterThan(20)
    // The new queue's consumer is routed to the new incarnation only: a message acknowledged
    // into the old one (which the orphan sweeper drops within 10 s) is not found.
    const found = new Set<string>()
    const consumer = admin.consumer(queue, { prefetch: 64, waitMs: 500 })
    const drained = (async () => {
      for await (const d of consumer) {
        found.add(new TextDecoder().decode(d.body))
        await d.ack()
      }
    })()
    await waitFor(() => acked.every((b) => found.has(b)), 15_000, 100)
    await consumer.close()
    await drained
    const lost = acked.filter((b) => !found.has(b))
    expect(lost).toEqual([])
    await producer.close()
  }, 240_000)

  it('settles no lease of the new queue with a lease id of the old one (same message id)', async () => {
    const queue = 'twice'
    await admin.admin.createQueue(queue, { partitions: 1 })
    await admin.producer(queue).send({ body: 'old' })
    const first = admin.consumer(queue, { prefetch: 1, waitMs: 200 })
    const held = (await first[Symbol.asyncIterator]().next()).value as Delivery
    expect(new TextDecoder().decode(held.body)).toBe('old')

    await admin.admin.deleteQueue(queue)
    await admin.admin.createQueue(queue, { partitions: 1 })
    await producing.producer(queue).send({ body: 'new' })
    const second = producing.consumer(queue, { prefetch: 1, waitMs: 200 })
    const working = (await second[Symbol.asyncIterator]().next()).value as Delivery
    expect(new TextDecoder().decode(working.body)).toBe('new')
    expect(working.id).toBe(held.id) // message ids start again in a new incarnation

    // The old consumer acks late: the SDK follows the queue's new route, and the new
    // queue's partition must not take it as the other consumer's lease.
    const late = await held.ack().then(
      () => 'acked',
      (e: Error) => e.name,
    )
    // It may settle the old incarnation's lease (a node that had not dropped it yet), never the
    // new consumer's: that one's ack still succeeds (it failed with LeaseLostError before tags).
    console.log(`queue re-creation: a late ack of the old queue's lease ${held.id}: ${late}`)
    await working.ack()
    await first.close()
    await second.close()
  }, 60_000)
})
