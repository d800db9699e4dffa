import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A cluster founded by one node creates its data groups with one replica (the founders are
// all there is); as nodes join, every group grows to the replication factor (3), so that the
// founder's loss loses no acknowledged message.
describe('a cluster founded by one node', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 1 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('grows its data groups to 3 replicas as nodes join, and survives losing the founder', async () => {
    const status = () => client.admin.clusterStatus()
    await client.admin.createQueue('early', { partitions: 2 })
    const producer = client.producer('early')
    const bodies = Array.from({ length: 20 }, (_, i) => `m${i}`)
    const sent = await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()
    expect((await status()).groups.every((g) => g.replicas.length === 1)).toBe(true)

    await cluster.join() // n2
    await cluster.join() // n3
    const startedAt = Date.now()
    const grown = await waitFor(
      async () => {
        const s = await status()
        return s.groups.length > 0 && s.groups.every((g) => g.replicas.length === 3 && g.state === 'active')
      },
      90_000,
      250,
    )
    expect(grown, JSON.stringify((await status()).groups)).toBe(true)
    console.log(`one founder: every data group at 3 replicas ${Date.now() - startedAt} ms after the joins`)
    expect(cluster.node('n1').output).toMatch(/added voter n[23] \(grow\)/)

    // The meta group is the operator's to grow (SetMetaVoters); then the founder may go.
    await client.admin.setMetaVoters(3)
    const metaGrown = await waitFor(
      async () => {
        const s = await status()
        return s.metaVoters.length === 3 && s.metaChange === undefined
      },
      60_000,
      250,
    )
    expect(metaGrown).toBe(true)
    await cluster.kill('n1')
    // A client that knows the joined nodes (the first one's only seed is gone).
    const after = await MqClient.connect({ servers: cluster.servers.slice(1), deadlineMs: 20_000 })
    try {
      const received = await consumeAll(after, 'early', sent.length, 30_000)
      // The very messages sent (a count would pass a foreign one standing in for a lost one).
      expect(received).toEqual(new Set(bodies))
    } finally {
      await after.close()
    }
  }, 240_000)
})
