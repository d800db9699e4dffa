import { readFileSync } from 'node:fs'
import { connect as connectHttp2 } from 'node:http2'
import { connect } from 'node:net'
import { credentials, Metadata } from '@grpc/grpc-js'
import {
  fromGrpcError,
  PeerClient,
  QueueClient,
  QueueService,
  type RaftBatch,
  StaleRouteError,
} from '@mq/protocol'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster, waitServing } from '../src/cluster'

// What a cluster must shrug off: garbage on its port, forged Raft traffic, and the loss of
// the meta leader. After each, it still serves and nothing acknowledged is lost.
describe('hostile input and meta failover', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    // A low bound on unread answers per connection, so that its test is quick and clear.
    cluster = await LocalCluster.start({ nodes: 3, serverArgs: ['--connection-unsent-max-mb', '64'] })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000 })
    await client.admin.createQueue('hostile', { partitions: 1 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  async function drainIds(queue: string, count: number): Promise<Set<number>> {
    const got = new Set<number>()
    for await (const m of client.consumer(queue, { prefetch: count, waitMs: 1_000 })) {
      got.add(m.id)
      await m.ack()
      if (got.size === count) break
    }
    return got
  }

  it('survives garbage bytes on its port', async () => {
    const first = cluster.nodes[0]!
    const [host, port] = first.address.split(':') as [string, string]
    for (let round = 0; round < 5; round++) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(port), host, () => {
          socket.write(Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + round * 17) & 0xff)))
        })
        // The server may answer with a GOAWAY and keep the socket: we hang up after a moment.
        const done = () => {
          clearTimeout(timer)
          socket.destroy()
          resolve()
        }
        const timer = setTimeout(done, 500)
        socket.on('error', done)
        socket.on('close', done)
      })
    }
    await waitServing(first.address)
    const r = await client.producer('hostile').send({ body: 'still here' })
    expect(r.id).toBeGreaterThan(0)
  })

  it('answers a route epoch no route of this cluster carries with STALE_ROUTE and its epoch, on every node', async () => {
    const { routeEpoch } = await client.admin.describeQueue('hostile')
    for (const node of cluster.nodes) {
      const queue = new QueueClient(node.address, credentials.createInsecure())
      try {
        const stats = (epoch: number) =>
          new Promise<unknown>((resolve) =>
            queue.stats(
              { target: { queue: 'hostile', partition: 0, routeEpoch: epoch } },
              new Metadata(),
              { deadline: Date.now() + 10_000 },
              (error) => resolve(error ? fromGrpcError(error) : 'ok'),
            ),
          )
        // Made up (or another cluster's): the node neither serves it nor keeps asking.
        const made = await stats(1e12)
        expect([node.nodeId, made]).toEqual([node.nodeId, expect.any(StaleRouteError)])
        expect((made as StaleRouteError).facts.epoch).toBeGreaterThanOrEqual(routeEpoch)
        expect((made as StaleRouteError).facts.epoch).toBeLessThan(1e12)
        // Leaders and followers alike: 'ok' from the partition's leader, a redirect elsewhere.
        const real = await stats((made as StaleRouteError).facts.epoch as number)
        expect(real === 'ok' || !(real instanceof StaleRouteError)).toBe(true)
      } finally {
        queue.close()
      }
    }
  })

  it('drops forged and malformed Raft messages without harm', async () => {
    const producer = client.producer('hostile')
    const sent = await Promise.all(Array.from({ length: 10 }, (_, i) => producer.send({ body: `f${i}` })))
    const target = cluster.nodes[1]!
    const peer = new PeerClient(target.address, credentials.createInsecure())
    const forged: RaftBatch = {
      fromNode: 'intruder',
      messages: [
        // A vote request from a stranger at a huge term, addressed to the node.
        {
          groupId: 0,
          type: 2,
          from: 'intruder',
          to: target.nodeId,
          term: 1e12,
          logTerm: 1e12,
          index: 1e9,
          entries: [],
          commit: 0,
          reject: false,
          rejectHint: 0,
          context: 0,
          requestCtx: '',
          leaderTimeMs: 0,
        },
        // Entries that do not follow their index, for a data group.
        {
          groupId: 1,
          type: 0,
          from: 'n9',
          to: target.nodeId,
          term: 5,
          logTerm: 1,
          index: 3,
          entries: [{ index: 9, term: 5, type: 0, timestampMs: 0, data: new Uint8Array(3) }],
          commit: 99,
          reject: false,
          rejectHint: 0,
          context: 0,
          requestCtx: '',
          leaderTimeMs: 0,
        },
        // A message for another node, and one for a group that does not exist.
        {
          groupId: 1,
          type: 6,
          from: 'n1',
          to: 'someone-else',
          term: 1,
          logTerm: 0,
          index: 0,
          entries: [],
          commit: 0,
          reject: false,
          rejectHint: 0,
          context: 0,
          requestCtx: '',
          leaderTimeMs: 0,
        },
        {
          groupId: 777,
          type: 6,
          from: 'n1',
          to: target.nodeId,
          term: 1,
          logTerm: 0,
          index: 0,
          entries: [],
          commit: 0,
          reject: false,
          rejectHint: 0,
          context: 0,
          requestCtx: '',
          leaderTimeMs: 0,
        },
      ],
    }
    const outcome = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('no answer within 5 s'), 5_000)
      const stream = peer.raft(new Metadata(), (error) => {
        clearTimeout(timer)
        resolve(error ? `error ${error.code}` : 'ok')
      })
      stream.write(forged)
      stream.end()
    })
    expect(outcome).toBe('ok')
    peer.close()
    await waitServing(target.address)
    const more = await Promise.all(Array.from({ length: 10 }, (_, i) => producer.send({ body: `g${i}` })))
    const ids = new Set([...sent, ...more].map((r) => r.id))
    const got = await drainIds('hostile', ids.size + 1) // + the message of the previous test
    for (const id of ids) expect(got.has(id)).toBe(true)
  })

  it('closes a connection that stops reading its answers; the node stays within its memory bound and serves', async () => {
    await client.admin.createQueue('unread', { partitions: 1, messageBytesMax: 1024 * 1024 })
    const producer = client.producer('unread')
    // ~4 MiB ready: each ListReady answer carries all of it.
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => producer.send({ body: new Uint8Array(200 * 1024).fill(i) })),
    )
    const { partitions } = await client.admin.describeQueue('unread')
    const leader = cluster.nodes.find((n) => n.address === partitions[0]?.leaderAddress)
    if (leader?.child?.pid === undefined) throw new Error('no running leader for unread/0')
    const pid = leader.child.pid
    const rssMb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024
    const before = rssMb()
    const call = QueueService.listReady
    const request = Buffer.from(
      call.requestSerialize({ target: { queue: 'unread', partition: 0, routeEpoch: 0 }, limit: 1000 }),
    )
    const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), request])
    frame.writeUInt32BE(request.length, 1)
    // 300 answers of ~4 MiB (1.2 GB; a node held it all until 2026-12-02), none of them read.
    const session = connectHttp2(`http://${leader.listenAddress}`)
    session.on('error', () => {})
    const closed = new Promise<void>((resolve) => session.once('close', () => resolve()))
    for (let i = 0; i < 300; i++) {
      const stream = session.request({
        ':method': 'POST',
        ':path': call.path,
        'content-type': 'application/grpc',
        te: 'trailers',
      })
      stream.on('error', () => {})
      stream.end(frame)
      stream.pause()
    }
    let peakMb = before
    const sampler = setInterval(() => {
      peakMb = Math.max(peakMb, rssMb())
    }, 50)
    await closed
    clearInterval(sampler)
    console.log(
      `unread answers: rss ${before.toFixed(0)} MB before, peak ${peakMb.toFixed(0)} MB (bound 64 MiB per connection)`,
    )
    expect(peakMb - before).toBeLessThan(500)
    expect(leader.output).toMatch(
      /closed the connection of 127\.0\.0\.1:\d+: it left \d+\.\d MiB of answers unread, more than --connection-unsent-max-mb 64/,
    )
    const r = await producer.send({ body: 'after' })
    expect(r.id).toBeGreaterThan(0)
    expect((await client.admin.peek('unread', 100)).length).toBe(21)
  })

  it('keeps routing and admin working when the meta leader is killed', async () => {
    const status = await client.admin.clusterStatus()
    const metaLeader = status.metaLeaderId
    expect(metaLeader).toMatch(/^n[123]$/)
    await cluster.kill(metaLeader)
    const started = Date.now()
    await client.admin.createQueue('after-meta-failover', { partitions: 2 })
    const metaFailoverMs = Date.now() - started
    const r = await client.producer('after-meta-failover').send({ body: 'x' })
    expect(r.id).toBeGreaterThan(0)
    expect((await client.admin.clusterStatus()).metaLeaderId).not.toBe(metaLeader)
    console.log(`meta failover: admin resumed ${metaFailoverMs} ms after SIGKILL of ${metaLeader}`)
    await cluster.restart(metaLeader)
  })
})
