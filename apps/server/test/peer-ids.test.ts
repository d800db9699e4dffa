import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ChannelCredentials, credentials, Metadata, status } from '@grpc/grpc-js'
import {
  ClusterStatusRequest,
  CreateQueueRequest,
  GetRoutesRequest,
  HeartbeatRequest,
  MetaClient,
  PeerClient,
  ProduceRequest,
  QueueClient,
  RaftBatch,
} from '@mq/protocol'
import { MessageType } from '@mq/raft-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { devCerts } from './dev-certs-run'
import { call, callUntilOk, httpUntilOk, type Outcome } from './grpc-calls'
import {
  clusterNodeArgs,
  type ServerProcess,
  startServer,
  type TestNode,
  testNodes,
  waitServing,
} from './processes'

const PEER_SECRET = 'peer-secret-0123456789'
const dir = mkdtempSync(join(tmpdir(), 'mq-peer-ids-'))
const certs = join(dir, 'certs')
const pem = (f: string) => readFileSync(join(certs, f))
const nodes: (TestNode & { server?: ServerProcess })[] = []

/** TLS credentials of the cluster CA with the certificate `name`.crt/.key of the dev-certs dir. */
const tlsAs = (name: string): ChannelCredentials =>
  credentials.createSsl(pem('ca.crt'), pem(`${name}.key`), pem(`${name}.crt`))
const PEER = { 'mq-peer-token': PEER_SECRET }

beforeAll(async () => {
  const io = await devCerts([certs, '--node-ids', 'n1,n2,n3'])
  expect(io.code).toBeUndefined()
  expect(io.lines.join('\n')).toMatch(/--node-id n2 … --tls-cert .*node-n2\.crt .*--tls-peer-ids/)
  nodes.push(...(await testNodes(3)))
  for (const n of nodes) {
    n.server = startServer(
      clusterNodeArgs(n, nodes, dir, [
        '--peer-token',
        PEER_SECRET,
        '--tls-cert',
        join(certs, `node-${n.id}.crt`),
        '--tls-key',
        join(certs, `node-${n.id}.key`),
        '--tls-ca',
        join(certs, 'ca.crt'),
        '--tls-client-auth',
        '--tls-peer-ids',
      ]),
    )
  }
  await Promise.all(nodes.map((n) => waitServing(n.address, 30_000, tlsAs('client'))))
}, 90_000)

afterAll(async () => {
  for (const n of nodes) n.server?.child.kill('SIGTERM')
  await Promise.all(nodes.map((n) => n.server?.exited))
  rmSync(dir, { recursive: true, force: true })
})

/** Opens a Peer.Raft stream to `address` as the holder of certificate `as`, writes `batch`; the status it ends with. */
function raftStream(
  address: string,
  as: string,
  batch: RaftBatch,
): Promise<{ code: number; details: string }> {
  const client = new PeerClient(address, tlsAs(as))
  const metadata = new Metadata()
  metadata.set('mq-peer-token', PEER_SECRET)
  return new Promise((resolve) => {
    const stream = client.raft(metadata, { deadline: Date.now() + 5_000 }, (error) => {
      client.close()
      resolve(error ? { code: error.code, details: error.details } : { code: status.OK, details: '' })
    })
    // The check runs as the batch arrives, before the end does: a refused stream ends with
    // the refusal, an accepted one with OK.
    stream.write(batch)
    stream.end()
  })
}

/** Runs a Meta call on each node in turn (the meta leader takes it) until one succeeds, for up to 30 s. */
function onMetaLeader<Res>(attempt: (meta: MetaClient) => Promise<Outcome<Res>>): Promise<Outcome<Res>> {
  return callUntilOk(async () => {
    let last: Outcome<Res> = { ok: false, code: status.UNAVAILABLE, details: 'no node answered' }
    for (const n of nodes) {
      const meta = new MetaClient(n.address, tlsAs('client'))
      last = await attempt(meta).finally(() => meta.close())
      if (last.ok) break
    }
    return last
  }, 30_000)
}

// Three mq-server processes, each with a certificate of its own id and --tls-peer-ids.
describe('mq-server --tls-peer-ids', () => {
  it('runs the cluster: each node speaks for itself with its own certificate', async () => {
    for (const n of nodes) expect((await httpUntilOk(`http://${n.http}/readyz`, 30_000)).status).toBe(200)
    const client = tlsAs('client')
    const meta = new MetaClient(nodes[0]?.address as string, client)
    const queues = new Map(nodes.map((n) => [n.address, new QueueClient(n.address, client)]))
    try {
      const created = await onMetaLeader((m) =>
        call(m, m.createQueue, CreateQueueRequest.fromPartial({ name: 'ids', config: { partitions: 1 } })),
      )
      expect(created.ok).toBe(true)
      // Produce needs a majority of the data group over the peers' Raft streams.
      const produced = await callUntilOk(async () => {
        const routes = await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({ queues: ['ids'] }))
        const route = routes.ok ? routes.response.routes[0] : undefined
        const q = queues.get(route?.partitions[0]?.leaderAddress ?? '')
        if (!route || !q) return { ok: false as const, code: status.UNAVAILABLE, details: 'no leader yet' }
        const target = { queue: 'ids', partition: 0, routeEpoch: route.routeEpoch }
        return call(
          q,
          q.produce,
          ProduceRequest.fromPartial({ target, messages: [{ body: Buffer.from('x') }] }),
        )
      }, 30_000)
      expect(produced.ok).toBe(true)
    } finally {
      meta.close()
      for (const q of queues.values()) q.close()
    }
  }, 60_000)

  it("refuses a member speaking for another node: n3's certificate and the peer secret cannot heartbeat or replicate as n2", async () => {
    const n1 = nodes[0]?.address as string
    const n2 = nodes[1] as (typeof nodes)[number]
    const peer = new PeerClient(n1, tlsAs('node-n3'))
    try {
      // A heartbeat as n2 from elsewhere would move n2's address in the meta state.
      const spoofed = HeartbeatRequest.fromPartial({ nodeId: 'n2', address: '127.0.0.1:1' })
      const r = await call(peer, peer.heartbeat, spoofed, PEER)
      expect(r).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
      expect(r.ok || r.details).toMatch(/speaks for node "n2", but the caller's certificate names "n3"/)
    } finally {
      peer.close()
    }
    // The shared certificate (CN "mq node") names no node at all.
    const shared = new PeerClient(n1, tlsAs('node'))
    try {
      const r = await call(
        shared,
        shared.heartbeat,
        HeartbeatRequest.fromPartial({ nodeId: 'n1', address: n1 }),
        PEER,
      )
      expect(r).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
    } finally {
      shared.close()
    }
    // A Raft batch as n2 (a vote request of a far term would depose every leader), or one
    // claiming n3 for the batch but n2 for a message in it.
    const vote = { groupId: 0, type: MessageType.Vote, to: 'n1', term: 1_000_000, logTerm: 0, index: 0 }
    for (const batch of [
      { fromNode: 'n2', messages: [{ ...vote, from: 'n2' }] },
      { fromNode: 'n3', messages: [{ ...vote, from: 'n2' }] },
    ]) {
      const ended = await raftStream(n1, 'node-n3', RaftBatch.fromPartial(batch))
      expect(ended.code).toBe(status.PERMISSION_DENIED)
      expect(ended.details).toMatch(/speaks for node "n2"/)
    }
    // Nothing moved: n2's address is as it was, and every node is still ready.
    const cluster = await onMetaLeader((m) => call(m, m.clusterStatus, ClusterStatusRequest.fromPartial({})))
    expect(cluster.ok && cluster.response.nodes.find((n) => n.nodeId === 'n2')?.address).toBe(n2.address)
    for (const n of nodes) expect((await httpUntilOk(`http://${n.http}/readyz`, 10_000)).status).toBe(200)
  }, 60_000)
})
