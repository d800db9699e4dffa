import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// The replication factor is the cluster's (kept in the meta state, format level 34): the first
// meta leader records its own "replicationFactor" (config file), and `SetReplicationFactor` changes it.
// Every data group shrinks to a lower one (the nodes let go delete their replicas) and grows
// back to a higher one, one replica at a time, without losing a message: once grown, a group
// survives losing the one node that held it while it had one replica.
describe('the replication factor', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3, outputCharsMax: 2_000_000 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('shrinks every data group to 1 replica and grows it back to 3, losing no message', async () => {
    const status = () => client.admin.clusterStatus()
    const settledAt = (replicas: number) =>
      waitFor(
        async () => {
          const s = await status()
          const data = s.groups.filter((g) => g.groupId !== 0)
          return (
            data.length === 3 &&
            data.every(
              (g) => g.replicas.length === replicas && g.replicas.every((r) => !r.learner) && !g.change,
            )
          )
        },
        90_000,
        250,
      )
    // The first meta leader's own setting (3, the default), recorded.
    expect(await waitFor(async () => (await status()).replicationFactor === 3, 20_000, 200)).toBe(true)
    expect(await settledAt(3)).toBe(true)

    await client.admin.createQueue('kept', { partitions: 3 })
    const producer = client.producer('kept')
    const before = Array.from({ length: 30 }, (_, i) => `before-${i}`)
    await Promise.all(before.map((body) => producer.send({ body })))

    const shrinkAt = Date.now()
    expect(await client.admin.setReplicationFactor(1)).toEqual({ previous: 3, factor: 1 })
    expect(await settledAt(1)).toBe(true)
    console.log(`replication: 3 → 1 replicas per group in ${Date.now() - shrinkAt} ms`)
    // Every node let go of the groups it no longer holds: two of three replicas of three groups.
    const removed = () =>
      cluster.nodes.reduce(
        (n, node) => n + (node.output.match(/removed data group \d+ and its storage/g) ?? []).length,
        0,
      )
    expect(await waitFor(async () => removed() === 6, 20_000, 200)).toBe(true)
    const during = Array.from({ length: 30 }, (_, i) => `during-${i}`)
    await Promise.all(during.map((body) => producer.send({ body })))
    // Bad factors are refused with a clear error, and change nothing.
    await expect(client.admin.setReplicationFactor(8)).rejects.toThrow(
      'the replication factor must be an integer from 1 to 7, not 8',
    )
    expect((await status()).replicationFactor).toBe(1)

    const growAt = Date.now()
    expect(await client.admin.setReplicationFactor(3)).toEqual({ previous: 1, factor: 3 })
    expect(await settledAt(3)).toBe(true)
    console.log(`replication: 1 → 3 replicas per group in ${Date.now() - growAt} ms`)
    await producer.close()

    // The node leading the most groups dies: their other replicas, grown from one, elect and
    // serve every message sent before.
    const leaders = (await status()).groups.filter((g) => g.groupId !== 0).map((g) => g.leaderId)
    const victim = leaders.sort(
      (a, b) => leaders.filter((l) => l === b).length - leaders.filter((l) => l === a).length,
    )[0] as string
    await cluster.kill(victim)
    const all = [...before, ...during]
    const received = await consumeAll(client, 'kept', all.length, 60_000)
    // The very messages sent (a count would pass a foreign one standing in for a lost one).
    expect(received).toEqual(new Set(all))
  }, 240_000)
})
