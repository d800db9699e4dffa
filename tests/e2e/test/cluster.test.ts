import { InvalidArgumentError, MqClient, QueueNotFoundError } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'

/** Receives and acks `count` messages of `queue`; returns their ids. */
async function consumeIds(client: MqClient, queue: string, count: number): Promise<Set<number>> {
  const got = new Set<number>()
  for await (const m of client.consumer(queue, { prefetch: 100, waitMs: 1_000 })) {
    got.add(m.id)
    await m.ack()
    if (got.size === count) break
  }
  return got
}

// A 3-node cluster of real processes: the meta group on all three, data groups placed by the
// meta leader, every request through the SDK.
describe('a 3-node cluster', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000 })
    // The first queue waits (retrying UNAVAILABLE) until the controller has made data groups.
    await client.admin.createQueue('jobs', { partitions: 3, visibilityTimeoutMs: 2_000, maxDeliveries: 3 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('produces and consumes every message once, by weight', async () => {
    const producer = client.producer('jobs')
    const sent = await Promise.all(
      Array.from({ length: 150 }, (_, i) => producer.send({ body: `m${i}`, weight: (i % 3) * 4 + 1 })),
    )
    const keys = new Set(sent.map((r) => `${r.partition}/${r.id}`))
    expect(keys.size).toBe(150)
    const got = new Set<string>()
    const consumer = client.consumer('jobs', { prefetch: 50, waitMs: 500 })
    for await (const m of consumer) {
      got.add(`${m.partition}/${m.id}`)
      await m.ack()
      if (got.size === 150) break
    }
    expect(got).toEqual(keys)
  })

  it('redelivers a nacked message and an expired lease', async () => {
    await client.admin.createQueue('retries', { partitions: 1, visibilityTimeoutMs: 500 })
    await client.producer('retries').send({ body: 'again' })
    const counts: number[] = []
    const consumer = client.consumer('retries', { prefetch: 1, waitMs: 2_000, autoExtend: false })
    for await (const m of consumer) {
      counts.push(m.deliveryCount)
      if (m.deliveryCount === 1) await m.nack()
      else if (m.deliveryCount === 2) {
        // Let the lease expire (visibility 500 ms, no extension): delivered a third time.
      } else {
        await m.ack()
        break
      }
    }
    expect(counts).toEqual([1, 2, 3])
  })

  it('answers bad input with clear errors and keeps serving', async () => {
    await expect(client.producer('nope').send({ body: 'x' })).rejects.toBeInstanceOf(QueueNotFoundError)
    await expect(client.admin.createQueue('bad name')).rejects.toBeInstanceOf(InvalidArgumentError)
    await expect(client.admin.createQueue('jobs')).rejects.toThrow(/already exists/)
    await client.admin.createQueue('small', { partitions: 1, messageBytesMax: 10 })
    await expect(client.producer('small').send({ body: 'x'.repeat(100) })).rejects.toBeInstanceOf(
      InvalidArgumentError,
    )
    expect((await client.producer('small').send({ body: 'ok' })).id).toBeGreaterThan(0)
    // In one batch with good ones, only the oversize message fails: the partition names it, and
    // the producer sends the others again.
    const mixed = client.producer('small')
    const sends = await Promise.allSettled(['a', 'x'.repeat(100), 'b'].map((body) => mixed.send({ body })))
    expect(sends.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled'])
    expect(sends[1]).toMatchObject({ reason: { code: 'INVALID_ARGUMENT', facts: { messageIndex: 1 } } })
  })

  it('applies changed queue settings to partitions already open', async () => {
    await client.admin.createQueue('tunable', { partitions: 2 })
    const producer = client.producer('tunable')
    await Promise.all([0, 1].map((i) => producer.send({ body: 'x'.repeat(100), key: `k${i}` })))
    await client.admin.updateQueue('tunable', { messageBytesMax: 16 })
    // Every partition, whichever node leads it, enforces the new limit from its next request.
    for (const key of ['k0', 'k1', 'k2', 'k3']) {
      await expect(producer.send({ body: 'y'.repeat(100), key })).rejects.toBeInstanceOf(InvalidArgumentError)
    }
    await client.admin.updateQueue('tunable', { messageBytesMax: 1024 })
    expect((await producer.send({ body: 'z'.repeat(100) })).id).toBeGreaterThan(0)
  })

  it('a queue deleted and created again starts empty', async () => {
    await client.admin.createQueue('phoenix', { partitions: 1 })
    await client.producer('phoenix').send({ body: 'old life' })
    await client.admin.deleteQueue('phoenix')
    await expect(client.producer('phoenix').send({ body: 'x' })).rejects.toBeInstanceOf(QueueNotFoundError)
    await client.admin.createQueue('phoenix', { partitions: 1 })
    await client.producer('phoenix').send({ body: 'new life' })
    const bodies: string[] = []
    for await (const m of client.consumer('phoenix', { prefetch: 10, waitMs: 300 })) {
      bodies.push(m.text())
      await m.ack()
      break
    }
    const more = client.consumer('phoenix', { prefetch: 10, waitMs: 300 })
    const extra: string[] = []
    const timer = setTimeout(() => void more.close(), 1_000)
    for await (const m of more) extra.push(m.text())
    clearTimeout(timer)
    expect([...bodies, ...extra]).toEqual(['new life'])
  })

  it('moves the leadership of a data group on request, and keeps serving', async () => {
    const before = (await client.admin.describeQueue('jobs')).partitions[0]
    const to = before?.replicas.map((r) => r.nodeId).find((n) => n !== before.leaderId) as string
    await client.admin.transferLeader(before?.groupId as number, to)
    const deadline = Date.now() + 15_000
    let leader = before?.leaderId
    while (leader !== to && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200))
      leader = (await client.admin.describeQueue('jobs')).partitions[0]?.leaderId
    }
    expect(leader).toBe(to)
    expect((await client.producer('jobs').send({ body: 'moved' })).partition).toBeGreaterThanOrEqual(0)
  })

  it('loses no acknowledged message when a data-group leader is killed', async () => {
    await client.admin.createQueue('durable', { partitions: 1 })
    const producer = client.producer('durable')
    const before = await Promise.all(Array.from({ length: 50 }, (_, i) => producer.send({ body: `a${i}` })))
    const route = await client.admin.describeQueue('durable')
    const leader = route.partitions[0]?.leaderId
    expect(leader).toMatch(/^n[123]$/)
    await cluster.kill(leader as string)
    const started = Date.now()
    const after = await Promise.all(Array.from({ length: 50 }, (_, i) => producer.send({ body: `b${i}` })))
    const failoverMs = Date.now() - started
    const ids = new Set([...before, ...after].map((r) => r.id))
    expect(ids.size).toBe(100)
    expect(await consumeIds(client, 'durable', ids.size)).toEqual(ids)
    console.log(`failover: produce resumed ${failoverMs} ms after SIGKILL of ${leader}`)
    await cluster.restart(leader as string)
  })

  it('goes on producing while a data-group leader is paused (silent, its sockets open), and it rejoins', async () => {
    await client.admin.createQueue('silent', { partitions: 1 })
    const producer = client.producer('silent')
    // The hardest case: the paused node leads the meta group too, and no other node has served
    // the queue yet (none has its route cached), so the data group's new leader cannot ask the
    // meta leader for the route: it must read its own meta replica.
    const leaderNow = async () => (await client.admin.describeQueue('silent')).partitions[0]?.leaderId ?? ''
    let meta = ''
    let leader = ''
    for (let i = 0; i < 100 && !(meta && leader); i++) {
      meta = (await client.admin.clusterStatus()).metaLeaderId
      leader = await leaderNow()
      if (!(meta && leader)) await new Promise((r) => setTimeout(r, 100)) // learnt from heartbeats
    }
    if (leader !== meta) {
      const groupId = (await client.admin.describeQueue('silent')).partitions[0]?.groupId ?? 0
      await client.admin.transferLeader(groupId, meta)
      for (let i = 0; i < 100 && leader !== meta; i++) {
        await new Promise((r) => setTimeout(r, 100))
        leader = await leaderNow()
      }
    }
    expect(leader).toBe(meta)
    const before = await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ body: `a${i}` })))
    cluster.pause(leader)
    let during: { id: number }[]
    let metaMs = 0
    let stallMs = 0
    const started = Date.now()
    try {
      // Served by a new leader while the old one is still stopped: the SDK asks the other
      // replicas once the leader stays silent, instead of waiting for its 5 s attempt deadline.
      during = await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ body: `b${i}` })))
      stallMs = Date.now() - started
      // A Meta read whose known meta leader is the stopped node: the SDK asks the other seeds
      // too, and a follower asks the new meta leader for the read index the silent one never
      // gave. Without either, the call waited out its 5 s attempt (10 s measured).
      const metaStarted = Date.now()
      expect((await client.admin.describeQueue('silent')).queue).toBe('silent')
      metaMs = Date.now() - metaStarted
    } finally {
      cluster.resume(leader)
    }
    expect(metaMs).toBeLessThan(5_000) // the attempt deadline: not waited out
    // The produce stall is reported, not asserted: ~0.7 s when the new leader takes the route
    // from its own meta replica, 3.7 s when it waited out a call to the silent meta leader;
    // one CI run under load took 4.6 s before the SDK probed its meta calls too.
    const after = await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ body: `c${i}` })))
    const ids = new Set([...before, ...during, ...after].map((r) => r.id))
    expect(ids.size).toBe(60)
    expect(await consumeIds(client, 'silent', ids.size)).toEqual(ids)
    console.log(
      `silent leader: produce resumed ${stallMs} ms after SIGSTOP of ${leader}, leader of the meta group and of the data group; a Meta read took ${metaMs} ms`,
    )
  })
})
