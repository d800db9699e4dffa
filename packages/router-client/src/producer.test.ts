import { describe, expect, it } from 'vitest'
import { FakeBroker } from '../test/fake-broker'
import { MqClient } from './client'
import { fnv1a32 } from './partitioner'
import { PartitionNotFoundError } from './router'

describe('Producer', () => {
  it('sends again on the fresh route what its old one routed to a partition a queue created again with fewer lacks; a keyed send fails at once', async () => {
    const broker = new FakeBroker()
    await broker.start()
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 2_000 })
    try {
      broker.addQueue('q', 4)
      const producer = client.producer('q', { keyless: 'round-robin' })
      let key = 'k0'
      for (let i = 1; fnv1a32(key) % 4 !== 3; i++) key = `k${i}`
      await producer.send({ body: 'warm', key }) // the route (4 partitions) is cached
      // Deleted and created again with 2 partitions (a new route epoch).
      broker.addQueue('q', 2)
      broker.epoch++
      const started = Date.now()
      // All routed by the cached route: round-robin over its 4 partitions, two of them gone,
      // and the key's partition (3 of 4), gone too.
      const keyless = Promise.all(['a', 'b', 'c', 'd'].map((body) => producer.send({ body })))
      const keyed = producer.send({ body: 'keyed', key })
      keyed.catch(() => {}) // (looked at below)
      expect((await keyless).every((r) => r.partition < 2)).toBe(true)
      expect([...broker.ready('q', 0), ...broker.ready('q', 1)]).toHaveLength(4)
      // The keyed send is not retried until the deadline, nor moved to another partition.
      await expect(keyed).rejects.toBeInstanceOf(PartitionNotFoundError)
      await expect(keyed).rejects.toThrow('queue q has no partition 3: it has 2 partition(s) now')
      expect(Date.now() - started).toBeLessThan(1_000)
      // The next send of the key goes by the current count.
      expect((await producer.send({ body: 'again', key })).partition).toBe(fnv1a32(key) % 2)
    } finally {
      await client.close()
      broker.stop()
    }
  })
})
