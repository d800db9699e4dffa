import { FORMAT_LEVEL_LEASE_BYTES } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

const MESSAGES = 30
const BYTES = 3 * 1024 * 1024

// Large messages and a consumer that prefetches many: a lease stops at its byte budget, so
// its answer fits in a gRPC message (64 MiB) however many messages it asked for. Before the
// budget, a first lease of 32 × 3 MiB could not be sent: the consumer retried, each retry
// leased another batch, and every message went to the dead letters without being consumed.
describe('large messages', () => {
  const suite = suiteCluster()

  it('are each delivered once to a consumer that asks for more than a gRPC message holds', async () => {
    const { client } = suite
    const level = async () => (await client.admin.clusterStatus()).formatLevel >= FORMAT_LEVEL_LEASE_BYTES
    expect(await waitFor(level, 30_000, 200)).toBe(true)
    await client.admin.createQueue('big', {
      partitions: 1,
      messageBytesMax: 4 * 1024 * 1024,
      maxDeliveries: 2,
    })
    const producer = client.producer('big')
    for (let i = 0; i < MESSAGES; i++) {
      const body = new Uint8Array(BYTES).fill(i)
      await producer.send({ body, headers: { n: `${i}` } })
    }
    await producer.close()

    const seen = new Map<string, number>()
    const consumer = client.consumer('big', { prefetch: 64, waitMs: 1_000 })
    const started = Date.now()
    const loop = (async () => {
      for await (const d of consumer) {
        const n = d.headers.n ?? '?'
        expect(d.body.length).toBe(BYTES)
        expect(d.body[BYTES - 1]).toBe(Number(n))
        seen.set(n, (seen.get(n) ?? 0) + 1)
        await d.ack()
      }
    })()
    const all = await waitFor(() => seen.size === MESSAGES, 60_000, 50)
    console.log(`large messages: ${seen.size} of ${MESSAGES} × 3 MiB consumed in ${Date.now() - started} ms`)
    await consumer.close()
    await loop
    expect(all).toBe(true)
    expect([...seen.values()].every((n) => n === 1)).toBe(true)
    expect(await client.admin.deadLetters('big')).toEqual([])
  }, 120_000)
})
