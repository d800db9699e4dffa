import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'

// Data groups snapshot and compact their logs (here every 40 entries): a follower that was
// down while the log moved past its position catches up by installing a snapshot.
describe('data-group snapshots', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3, serverArgs: ['--snapshot-entries', '40'] })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000 })
    await client.admin.createQueue('snap', { partitions: 1 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('a follower that missed compacted entries catches up by snapshot and can carry the quorum', async () => {
    const route = await client.admin.describeQueue('snap')
    const leader = route.partitions[0]?.leaderId as string
    const follower = route.partitions[0]?.replicas.map((r) => r.nodeId).find((n) => n !== leader) as string
    const other = route.partitions[0]?.replicas
      .map((r) => r.nodeId)
      .find((n) => n !== leader && n !== follower) as string
    const ids = new Set<number>()
    // One at a time, so that each message is its own entry: far more entries than the threshold.
    const producer = client.producer('snap', { lingerMs: 0 })
    for (let i = 0; i < 10; i++) ids.add((await producer.send({ body: `a${i}` })).id)
    await cluster.kill(follower)
    for (let i = 0; i < 150; i++) ids.add((await producer.send({ body: `b${i}` })).id)
    await cluster.restart(follower)
    // Without `other`, every majority needs the restarted follower: it must have caught up.
    await cluster.kill(other)
    for (let i = 0; i < 10; i++) ids.add((await producer.send({ body: `c${i}` })).id)
    const got = new Set<number>()
    for await (const m of client.consumer('snap', { prefetch: 200, waitMs: 1_000 })) {
      got.add(m.id)
      await m.ack()
      if (got.size === ids.size) break
    }
    expect(got).toEqual(ids)
    // By a snapshot (its image fetched from the leader), not by the entries it missed.
    expect(cluster.node(follower).output).toMatch(
      new RegExp(`group ${route.partitions[0]?.groupId}: staged snapshot image \\d+ at index \\d+`),
    )
    expect(cluster.node(follower).output).not.toMatch(/fatal/i)
    await cluster.restart(other)
  })
})
