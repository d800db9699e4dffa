import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'

// A follower that missed compacted entries of a partition holding large messages catches up
// by fetching its group's image in pages bounded in bytes: 64 bodies of 1.2 MiB read in one
// engine call made a page of ~77 MiB, past the peers' 64 MiB message limit, and the follower
// never caught up (until 2026-12-04).
describe('a data-group image of large messages', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3, serverArgs: ['--snapshot-entries', '20'] })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000 })
    await client.admin.createQueue('big', { partitions: 1, messageBytesMax: 2 << 20 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('reaches a follower that was down, which then carries the quorum', async () => {
    const route = await client.admin.describeQueue('big')
    const leader = route.partitions[0]?.leaderId as string
    const replicas = route.partitions[0]?.replicas.map((r) => r.nodeId) ?? []
    const follower = replicas.find((n) => n !== leader) as string
    const other = replicas.find((n) => n !== leader && n !== follower) as string
    const producer = client.producer('big', { lingerMs: 0 })
    const body = (i: number) => {
      const b = new Uint8Array(Math.floor(1.2 * 1024 * 1024)).fill(i)
      b.set(new TextEncoder().encode(`m${i}.`))
      return b
    }
    const ids = new Set<number>()
    await cluster.kill(follower)
    for (let i = 0; i < 70; i++) ids.add((await producer.send({ body: body(i) })).id)
    await cluster.restart(follower)
    // Without `other`, every majority needs the restarted follower: it must have caught up.
    await cluster.kill(other)
    ids.add((await producer.send({ body: 'last' })).id)
    const got = new Set<number>()
    for await (const m of client.consumer('big', { prefetch: 8, waitMs: 1_000 })) {
      got.add(m.id)
      await m.ack()
      if (got.size === ids.size) break
    }
    expect(got).toEqual(ids)
    // By the group's image (not by the entries it missed: the log was compacted past them).
    expect(cluster.node(follower).output).toMatch(
      new RegExp(`group ${route.partitions[0]?.groupId}: staged snapshot image \\d+ at index \\d+`),
    )
    await cluster.restart(other)
  }, 180_000)
})
