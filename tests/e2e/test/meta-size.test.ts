import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// The meta group's size is the operator's to set (SetMetaVoters): grown from the 3 founders to
// 5 voters it survives losing two founders at once (3 of 3 would have lost its majority);
// shrunk back to 3, the voters it lets go drop their meta replicas.
describe('the meta group size', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    await cluster.join() // n4
    await cluster.join() // n5
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('grows to 5 voters, loses two founders and keeps working, then shrinks back to 3', async () => {
    const status = () => client.admin.clusterStatus()
    const settledAt = (voters: number) =>
      waitFor(
        async () => {
          const s = await status()
          return s.metaVoters.length === voters && s.metaLearners.length === 0 && s.metaChange === undefined
        },
        60_000,
        250,
      )
    expect((await status()).metaVoters).toEqual(['n1', 'n2', 'n3'])
    const startedAt = Date.now()
    expect(await client.admin.setMetaVoters(5)).toEqual({ voters: ['n1', 'n2', 'n3'], votersWanted: 5 })
    expect(await settledAt(5)).toBe(true)
    console.log(`meta size: 3 → 5 voters in ${Date.now() - startedAt} ms`)
    const grown = await status()
    expect(grown.metaVoters).toEqual(['n1', 'n2', 'n3', 'n4', 'n5'])
    expect(grown.metaVotersWanted).toBe(5)

    await client.admin.createQueue('kept', { partitions: 2 })
    const producer = client.producer('kept')
    const bodies = Array.from({ length: 20 }, (_, i) => `m${i}`)
    const sent = await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()

    // Two founders at once: n3, n4 and n5 are a majority of five.
    await Promise.all([cluster.kill('n1'), cluster.kill('n2')])
    expect(
      await waitFor(async () => ['n3', 'n4', 'n5'].includes((await status()).metaLeaderId), 20_000, 200),
    ).toBe(true)
    await client.admin.createQueue('after', { partitions: 1 })
    expect((await client.admin.listQueues()).map((q) => q.queue).sort()).toEqual(['after', 'kept'])

    await cluster.restart('n1')
    await cluster.restart('n2')
    const shrinkAt = Date.now()
    await client.admin.setMetaVoters(3)
    expect(await settledAt(3)).toBe(true)
    console.log(`meta size: 5 → 3 voters in ${Date.now() - shrinkAt} ms`)
    const shrunk = await status()
    const gone = ['n1', 'n2', 'n3', 'n4', 'n5'].filter((n) => !shrunk.metaVoters.includes(n))
    expect(gone).toHaveLength(2)
    for (const n of gone) {
      const left = await waitFor(
        async () => cluster.node(n).output.includes('left the meta group and deleted its replica'),
        20_000,
        200,
      )
      expect(left, `${n} drops its meta replica`).toBe(true)
    }
    // Bad sizes are refused with a clear error, and change nothing.
    await expect(client.admin.setMetaVoters(4)).rejects.toThrow(/1, 3, 5, 7 voters, not 4/)
    expect((await status()).metaVotersWanted).toBe(3)

    const received = await consumeAll(client, 'kept', sent.length, 20_000)
    // The very messages sent (a count would pass a foreign one standing in for a lost one).
    expect(received).toEqual(new Set(bodies))
  }, 180_000)
})
