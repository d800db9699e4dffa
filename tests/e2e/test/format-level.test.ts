import { credentials } from '@grpc/grpc-js'
import { FORMAT_LEVEL, type ProduceRequest, type ProduceResponse, QueueClient } from '@mq/protocol'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { waitFor } from '../src/scale-run'

// A rolling upgrade, through format levels: a node pinned to level 1 (as a node of the
// previous version reports) keeps the whole cluster at level 1, so no leader writes an entry
// that node could not read, and partitions tell producers not to pipeline; once the last node
// reports the new level, the level rises and partitions keep pipelined batches in order again.
describe('format levels (rolling upgrades)', () => {
  let cluster: LocalCluster
  let client: MqClient
  let pinned = true
  /** One raw Queue client per node address. */
  const queues = new Map<string, QueueClient>()

  beforeAll(async () => {
    cluster = await LocalCluster.start({
      nodes: 3,
      nodeArgs: (nodeId) => (nodeId === 'n3' && pinned ? ['--format-level', '1'] : []),
    })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000 })
  })

  afterAll(async () => {
    for (const q of queues.values()) q.close()
    await client?.close()
    await cluster?.stop()
  })

  /**
   * One Produce call, as a producer of the SDK would make it, to whichever node leads the
   * partition (the others answer NOT_LEADER or, holding no replica, STALE_ROUTE), for 10 s.
   */
  const produce = async (producerId: string, sequence: number, sequenceBase: number) => {
    const route = await client.admin.describeQueue('upgrade')
    const request: ProduceRequest = {
      target: { queue: 'upgrade', partition: 0, routeEpoch: route.routeEpoch },
      producerId,
      sequence,
      sequenceBase,
      messages: [
        {
          body: Buffer.from(`${producerId}-${sequence}`),
          weight: 1,
          headers: {},
          key: '',
          delayMs: 0,
          dedupKey: '',
        },
      ],
    }
    let last: unknown
    const deadline = Date.now() + 10_000
    while (Date.now() < deadline) {
      for (const address of cluster.servers) {
        let q = queues.get(address)
        if (!q) {
          q = new QueueClient(address, credentials.createInsecure())
          queues.set(address, q)
        }
        try {
          return await new Promise<ProduceResponse>((resolve, reject) =>
            q.produce(request, (error, response) => (error ? reject(error) : resolve(response))),
          )
        } catch (error) {
          last = error
          // 14 = UNAVAILABLE (NOT_LEADER, no leader yet), 9 = FAILED_PRECONDITION (no replica here).
          const code = (error as { code?: number }).code
          if (code !== 14 && code !== 9) throw error
        }
      }
      await new Promise((r) => setTimeout(r, 100))
    }
    throw last
  }

  it('runs at the lowest level reported, then rises once the last node is upgraded', async () => {
    const status = () => client.admin.clusterStatus()
    expect(
      await waitFor(
        async () => {
          const s = await status()
          return s.nodes.length === 3 && s.nodes.every((n) => n.alive)
        },
        20_000,
        200,
      ),
    ).toBe(true)
    const mixed = await status()
    expect(mixed.formatLevel).toBe(1)
    expect(mixed.nodes.map((n) => [n.nodeId, n.formatLevel])).toEqual([
      ['n1', FORMAT_LEVEL],
      ['n2', FORMAT_LEVEL],
      ['n3', 1],
    ])
    // Level 1 also holds back the meta group's membership commands (level 3): the members are
    // not recorded (a node's groups list 0 once they are).
    expect(mixed.nodes.some((n) => n.groupIds.includes(0))).toBe(false)
    await client.admin.createQueue('upgrade', { partitions: 1 })
    // Level 1: no enqueue carries a base (n3 could not read it) and the answers say "no
    // pipelining"; batch 3 sent while batch 2 is in flight (base 2) is refused (it could
    // overtake it); sent alone after the gap, it is stored as before levels.
    expect(await produce('p', 1, 1)).toMatchObject({ ids: [1], pipelining: false })
    await expect(produce('p', 3, 2)).rejects.toMatchObject({ code: 10 })
    expect(await produce('p', 3, 3)).toMatchObject({ ids: [2], pipelining: false })

    // n3 upgraded: restarted without the pin, it reports its version's level, and so does the
    // cluster (3: pipelining is 2 and up).
    pinned = false
    await cluster.kill('n3', 'SIGTERM')
    await cluster.restart('n3')
    expect(await waitFor(async () => (await status()).formatLevel === FORMAT_LEVEL, 20_000, 200)).toBe(true)
    expect(
      await waitFor(async () => (await status()).nodes.every((n) => n.groupIds.includes(0)), 10_000, 200),
    ).toBe(true)
    // The partition's leader hears the new level with its next heartbeat answer.
    let sequence = 0
    expect(
      await waitFor(async () => (await produce('q', ++sequence, sequence)).pipelining, 10_000, 100),
    ).toBe(true)
    // Level 2: an overtaking batch is refused (SEQUENCE_GAP: gRPC ABORTED, retriable) until
    // the batch before it arrives.
    await expect(produce('q', sequence + 2, sequence + 1)).rejects.toMatchObject({ code: 10 })
    expect(await produce('q', sequence + 1, sequence + 1)).toMatchObject({ pipelining: true })

    // The SDK's producers work throughout, in order.
    const producer = client.producer('upgrade', { batchMax: 1 })
    const sent = await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ body: `s${i}` })))
    await producer.close()
    expect(sent.map((r) => r.id)).toEqual([...sent.map((r) => r.id)].sort((a, b) => a - b))

    // Going back once the level rose: n3 restarted pinned to level 1 (as the previous version
    // would report) is refused and exits 1 — the level stays: n3 would not read what the
    // others write, nor they what it would.
    pinned = true
    await cluster.kill('n3', 'SIGTERM')
    const n3 = cluster.node('n3')
    n3.output = ''
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    // Refused at its start, from the level its data dir last heard of, before any group replays
    // its log (a new node of an older version is refused by the meta leader instead).
    expect(n3.output).toMatch(
      /data dir .*: node n3 reports format level 1, which is below the cluster format level/,
    )
    expect((await status()).formatLevel).toBe(FORMAT_LEVEL)
    // Upgraded again, it takes part as before.
    pinned = false
    await cluster.restart('n3')
    expect(
      await waitFor(async () => (await status()).nodes.every((n) => n.groupIds.includes(0)), 20_000, 200),
    ).toBe(true)
    const after = client.producer('upgrade')
    await after.send({ body: 'after' })
    await after.close()
  }, 150_000)
})
