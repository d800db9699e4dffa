import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A queue with a message TTL: messages nobody consumed in time are deleted on every replica,
// with no traffic to trigger it (the leader's TTL ticker), and never delivered; fresh ones are.
describe('a queue with a message TTL', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('deletes what waited longer than the TTL, delivers what did not, and takes a TTL change', async () => {
    // Every node reports the version's format level once it has heartbeated.
    expect(
      await waitFor(async () => (await client.admin.clusterStatus()).formatLevel >= 8, 20_000, 200),
    ).toBe(true)
    await client.admin.createQueue('short', { partitions: 2, messageTtlMs: 2_000 })
    expect((await client.admin.describeQueue('short')).config?.messageTtlMs).toBe(2_000)
    const depth = async () => (await client.admin.queueStats('short')).reduce((n, p) => n + p.messages, 0)
    const producer = client.producer('short', { keyless: 'round-robin' })
    await Promise.all(Array.from({ length: 40 }, (_, i) => producer.send({ body: `old${i}` })))
    expect(await depth()).toBe(40)
    const sentAt = Date.now()
    // Gone without anyone leasing: the leaders' ticks deleted them (TTL 2 s, rounds of 1 s).
    expect(await waitFor(async () => (await depth()) === 0, 10_000, 100)).toBe(true)
    console.log(`message TTL: 40 messages of a 2-s TTL gone ${Date.now() - sentAt} ms after they were sent`)
    const discarded = async () =>
      (await client.admin.queueStats('short')).reduce((n, p) => n + (p.counters?.discarded ?? 0), 0)
    expect(await discarded()).toBe(40)
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(2_000)
    // Fresh messages are delivered, none of the old ones.
    const fresh = Array.from({ length: 10 }, (_, i) => `new${i}`)
    await Promise.all(fresh.map((body) => producer.send({ body })))
    const received = await consumeAll(client, 'short', fresh.length, 10_000)
    expect(received).toEqual(new Set(fresh))
    // The TTL removed (0): messages wait again however long.
    await client.admin.updateQueue('short', { messageTtlMs: 0 })
    await Promise.all(Array.from({ length: 5 }, (_, i) => producer.send({ body: `kept${i}` })))
    await new Promise((r) => setTimeout(r, 3_500))
    expect(await depth()).toBe(5)
    await producer.close()
    // A TTL out of bounds is refused with the reason, nothing changed.
    await expect(client.admin.updateQueue('short', { messageTtlMs: 400 * 24 * 3600_000 })).rejects.toThrow(
      /messageTtlMs must be an integer from 0 to/,
    )
  }, 90_000)
})
