import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { credentials, Metadata, status } from '@grpc/grpc-js'
import {
  ClusterStatusRequest,
  CreateQueueRequest,
  DeleteQueueRequest,
  DescribeQueueRequest,
  FencePartitionsRequest,
  GetRoutesRequest,
  HeartbeatRequest,
  LeaseRequest,
  ListQueuesRequest,
  MetaClient,
  PeerClient,
  ProduceRequest,
  QueueClient,
  StatsRequest,
} from '@mq/protocol'
import { MessageType, message } from '@mq/raft-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { tokenDigest } from '../src/auth/token-file'
import { messageToWire } from '../src/peer-codec'
import { PEER_TOKEN_KEY } from '../src/peer-transport'
import { call, callUntilOk, httpGet, httpUntilOk } from './grpc-calls'
import { freePort, type ServerProcess, singleNodeArgs, startServer, waitServing } from './processes'
import { parseExposition, sampleSum } from './prometheus'

const dir = mkdtempSync(join(tmpdir(), 'mq-security-'))
const PEER_SECRET = 'cluster-secret-0123456789'
const ADMIN = { authorization: 'Bearer admin-secret-0123456789' }
const ORDERS_APP = { authorization: 'Bearer orders-secret-0123456789' }
const READER = { authorization: 'Bearer reader-secret-0123456789' }
const VIEWER = { authorization: 'Bearer viewer-secret-0123456789' }
let server: ServerProcess
let address = ''
let http = ''
let meta: MetaClient
let queue: QueueClient
let peer: PeerClient

const authFile = join(dir, 'tokens.json')
const FILE_TOKENS = [
  { name: 'ops', token: 'admin-secret-0123456789', roles: ['admin'] },
  {
    name: 'orders-app',
    sha256: tokenDigest('orders-secret-0123456789'),
    roles: ['producer:orders.*', 'consumer:orders.*'],
  },
  { name: 'reader', token: 'reader-secret-0123456789', roles: ['consumer:orders.eu'] },
  { name: 'dashboard', token: 'viewer-secret-0123456789', roles: ['viewer:orders.*'] },
]

beforeAll(async () => {
  writeFileSync(authFile, JSON.stringify({ tokens: FILE_TOKENS }))
  address = `127.0.0.1:${await freePort()}`
  http = `127.0.0.1:${await freePort()}`
  server = startServer(
    singleNodeArgs('n1', address, dir, [
      '--tick-ms',
      '20',
      '--http-listen',
      http,
      '--auth-file',
      authFile,
      '--peer-token',
      PEER_SECRET,
    ]),
  )
  await waitServing(address)
  meta = new MetaClient(address, credentials.createInsecure())
  queue = new QueueClient(address, credentials.createInsecure())
  peer = new PeerClient(address, credentials.createInsecure())
  expect((await httpUntilOk(`http://${http}/readyz`)).status).toBe(200)
  for (const name of ['orders.eu', 'billing']) {
    const created = await callUntilOk(() =>
      call(
        meta,
        meta.createQueue,
        CreateQueueRequest.fromPartial({ name, config: { partitions: 1 } }),
        ADMIN,
      ),
    )
    expect(created.ok).toBe(true)
    // The partition is served once its data group has a leader here.
    const served = await callUntilOk(async () =>
      call(queue, queue.stats, StatsRequest.fromPartial({ target: await targetOf(name) }), ADMIN),
    )
    expect(served.ok).toBe(true)
  }
}, 60_000)

afterAll(async () => {
  for (const c of [meta, queue, peer]) c?.close()
  server?.child.kill('SIGTERM')
  await server?.exited
  rmSync(dir, { recursive: true, force: true })
})

async function targetOf(name: string) {
  const r = await callUntilOk(() =>
    call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({ queues: [name] }), ADMIN),
  )
  if (!r.ok) throw new Error(r.details)
  return { queue: name, partition: 0, routeEpoch: r.response.routeEpoch }
}

const produce = async (name: string, headers: Record<string, string>) =>
  call(
    queue,
    queue.produce,
    ProduceRequest.fromPartial({ target: await targetOf(name), messages: [{ body: Buffer.from('x') }] }),
    headers,
  )

const depth = async (name: string) => {
  const r = await call(queue, queue.stats, StatsRequest.fromPartial({ target: await targetOf(name) }), ADMIN)
  if (!r.ok) throw new Error(r.details)
  return r.response.messages
}

/** Polls `check` every 20 ms for up to 10 s. */
async function waitUntil(check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (await check()) return true
    await new Promise((r) => setTimeout(r, 20))
  }
  return false
}

const term = async (group: string) =>
  sampleSum(parseExposition((await httpGet(`http://${http}/metrics`, ADMIN)).body), 'mq_raft_term', { group })

// One real mq-server process with --auth-file and --peer-token.
describe('mq-server authentication and authorization', () => {
  it('refuses a call without a token, or with a wrong one, as UNAUTHENTICATED, and nothing changes', async () => {
    const noToken = await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({}))
    expect(noToken).toMatchObject({
      ok: false,
      code: status.UNAUTHENTICATED,
      details: expect.stringMatching(/requires a token/),
    })
    const wrong = await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({}), {
      authorization: 'Bearer not-a-known-token-at-all',
    })
    expect(wrong).toMatchObject({
      ok: false,
      code: status.UNAUTHENTICATED,
      details: expect.stringMatching(/not recognised/),
    })
    expect(await produce('orders.eu', {})).toMatchObject({ ok: false, code: status.UNAUTHENTICATED })
    expect(await produce('orders.eu', { authorization: 'Basic b3BzOm9wcw==' })).toMatchObject({
      ok: false,
      code: status.UNAUTHENTICATED,
    })
    expect(await depth('orders.eu')).toBe(0)
  }, 30_000)

  it('refuses a forbidden queue or an admin call as PERMISSION_DENIED, and nothing changes', async () => {
    const forbidden = await produce('billing', ORDERS_APP)
    expect(forbidden).toMatchObject({
      ok: false,
      code: status.PERMISSION_DENIED,
      details: expect.stringMatching(/token "orders-app" may not produce queue "billing"/),
    })
    expect(await depth('billing')).toBe(0)
    expect(await produce('orders.eu', READER)).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
    const create = await call(
      meta,
      meta.createQueue,
      CreateQueueRequest.fromPartial({ name: 'orders.us' }),
      ORDERS_APP,
    )
    expect(create).toMatchObject({
      ok: false,
      code: status.PERMISSION_DENIED,
      details: expect.stringMatching(/needs admin/),
    })
    const del = await call(
      meta,
      meta.deleteQueue,
      DeleteQueueRequest.fromPartial({ name: 'billing' }),
      ORDERS_APP,
    )
    expect(del).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
    // Each administrative call left an audit line: who, what, the outcome (the child's output
    // reaches this process a moment after the answer).
    const audited = [
      /audit: mq\.v1\.Meta\/CreateQueue by token:ops: OK/,
      /audit: mq\.v1\.Meta\/CreateQueue by token:orders-app: PERMISSION_DENIED/,
      /audit: mq\.v1\.Meta\/DeleteQueue by token:orders-app: PERMISSION_DENIED/,
    ]
    expect(await waitUntil(async () => audited.every((l) => l.test(server.output())))).toBe(true)
    const line = server
      .output()
      .split('\n')
      .find((l) => l.includes('by token:orders-app') && l.includes('CreateQueue'))
    expect(line).toContain('orders.us')
    const routes = await call(
      meta,
      meta.getRoutes,
      GetRoutesRequest.fromPartial({ queues: ['orders.us', 'billing'] }),
      ADMIN,
    )
    expect(routes.ok && routes.response.routes.map((r) => r.queue)).toEqual(['billing'])
  }, 30_000)

  it('lets each role do what it allows', async () => {
    expect((await produce('orders.eu', ORDERS_APP)).ok).toBe(true)
    const lease = await call(
      queue,
      queue.lease,
      LeaseRequest.fromPartial({ target: await targetOf('orders.eu'), consumerId: 'c', max: 1 }),
      READER,
    )
    expect(lease.ok && lease.response.messages).toHaveLength(1)
    expect((await produce('billing', ADMIN)).ok).toBe(true)
    expect(await depth('billing')).toBe(1)
  }, 30_000)

  it('shows a token only its queues: listings skip the others, describing one is PERMISSION_DENIED', async () => {
    const listed = async (headers: Record<string, string>) => {
      const r = await call(meta, meta.listQueues, ListQueuesRequest.fromPartial({ limit: 1 }), headers)
      if (!r.ok) throw new Error(r.details)
      return [r.response.queues.map((q) => q.queue), r.response.nextPageToken]
    }
    // One per page: the admin's first page ends at billing; the orders app's never names it.
    expect(await listed(ADMIN)).toEqual([['billing'], 'billing'])
    expect(await listed(ORDERS_APP)).toEqual([['orders.eu'], ''])
    expect(await listed(READER)).toEqual([['orders.eu'], ''])
    const unnamed = await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({}), ORDERS_APP)
    expect(unnamed.ok && unnamed.response.routes.map((r) => r.queue)).toEqual(['orders.eu'])
    const named = await call(
      meta,
      meta.getRoutes,
      GetRoutesRequest.fromPartial({ queues: ['billing'] }),
      READER,
    )
    expect(named).toMatchObject({
      ok: false,
      code: status.PERMISSION_DENIED,
      details: expect.stringMatching(/token "reader" may not read queue "billing"/),
    })
    const describe = async (name: string, headers: Record<string, string>) =>
      call(meta, meta.describeQueue, DescribeQueueRequest.fromPartial({ name }), headers)
    expect(await describe('billing', ORDERS_APP)).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
    expect(await describe('billing', ADMIN)).toMatchObject({ ok: true, response: { queue: 'billing' } })
    expect(await describe('orders.eu', READER)).toMatchObject({ ok: true, response: { queue: 'orders.eu' } })
    // A viewer sees the same, reads the depths, and neither sends nor takes.
    expect(await listed(VIEWER)).toEqual([['orders.eu'], ''])
    expect(await describe('orders.eu', VIEWER)).toMatchObject({ ok: true })
    const stats = await call(
      queue,
      queue.stats,
      StatsRequest.fromPartial({ target: await targetOf('orders.eu') }),
      VIEWER,
    )
    expect(stats.ok).toBe(true)
    expect(await produce('orders.eu', VIEWER)).toMatchObject({
      ok: false,
      code: status.PERMISSION_DENIED,
      details: expect.stringMatching(/token "dashboard" may not produce queue "orders.eu"/),
    })
    const lease = await call(
      queue,
      queue.lease,
      LeaseRequest.fromPartial({ target: await targetOf('orders.eu'), consumerId: 'v', max: 1 }),
      VIEWER,
    )
    expect(lease).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
  }, 30_000)

  it("asks a token for /metrics, and shows a token that is not admin only its queues' series", async () => {
    const none = await httpGet(`http://${http}/metrics`)
    expect(none.status).toBe(401)
    expect(none.body).toMatch(/requires a token for \/metrics/)
    const queuesOf = async (headers: Record<string, string>) => {
      const r = await httpGet(`http://${http}/metrics`, headers)
      expect(r.status).toBe(200)
      const samples = parseExposition(r.body).filter((s) => s.name === 'mq_queue_messages')
      return [...new Set(samples.map((s) => s.labels.queue))].sort()
    }
    expect(await queuesOf(ADMIN)).toEqual(['billing', 'orders.eu'])
    expect(await queuesOf(VIEWER)).toEqual(['orders.eu'])
  })

  it('takes tokens made through the meta group, on every node, until they are deleted', async () => {
    // A second node without a meta replica: it learns the tokens from heartbeat answers.
    const joinerAddress = `127.0.0.1:${await freePort()}`
    const joiner = startServer([
      'start',
      '--node-id',
      'n2',
      '--listen',
      joinerAddress,
      '--data-dir',
      join(dir, 'n2'),
      '--join',
      address,
      '--tick-ms',
      '20',
      '--auth-file',
      join(dir, 'tokens.json'),
      '--peer-token',
      PEER_SECRET,
    ])
    const joinerMeta = new MetaClient(joinerAddress, credentials.createInsecure())
    try {
      await waitServing(joinerAddress)
      const forbidden = await call(
        meta,
        meta.createToken,
        { name: 'late', roles: ['admin'], ttlMs: 0 },
        ORDERS_APP,
      )
      expect(forbidden).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
      // A name of the token file's: two callers named alike in the audit log, with other roles.
      const taken = await call(meta, meta.createToken, { name: 'reader', roles: ['admin'], ttlMs: 0 }, ADMIN)
      expect(taken).toMatchObject({
        ok: false,
        code: status.INVALID_ARGUMENT,
        details: "token name reader is taken by a token of this node's --auth-file: pick another name",
      })
      const bad = await call(meta, meta.createToken, { name: 'late', roles: ['root'], ttlMs: 0 }, ADMIN)
      expect(bad).toMatchObject({
        ok: false,
        code: status.INVALID_ARGUMENT,
        details: expect.stringMatching(/"root"/),
      })
      const tooLong = await call(
        meta,
        meta.createToken,
        { name: 'brief', roles: ['admin'], ttlMs: 11 * 365 * 86_400_000 },
        ADMIN,
      )
      expect(tooLong).toMatchObject({ ok: false, code: status.INVALID_ARGUMENT, details: /10 years/ })
      // A token with a lifetime (made first, so the joiner's table has it with 'late').
      const brief = await call(
        meta,
        meta.createToken,
        { name: 'brief', roles: ['admin'], ttlMs: 6_000 },
        ADMIN,
      )
      if (!brief.ok) throw new Error(brief.details)
      expect(brief.response.expiresAtMs).toBeGreaterThan(Date.now() + 3_000)
      const briefAuth = { authorization: `Bearer ${brief.response.token}` }
      const created = await call(
        meta,
        meta.createToken,
        { name: 'late', roles: ['consumer:orders.*'], ttlMs: 0 },
        ADMIN,
      )
      if (!created.ok) throw new Error(created.details)
      expect(created.response.expiresAtMs).toBe(0)
      const late = { authorization: `Bearer ${created.response.token}` }
      const listed = await call(meta, meta.listTokens, {}, ADMIN)
      expect(listed.ok && listed.response.tokens.map((t) => [t.name, t.roles, t.expiresAtMs])).toEqual([
        ['brief', ['admin'], brief.response.expiresAtMs],
        ['late', ['consumer:orders.*'], 0],
      ])
      expect((await call(meta, meta.listTokens, {}, briefAuth)).ok).toBe(true)
      // The meta replica knows it at once: a client call with it passes, a producer call is refused.
      expect((await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({}), late)).ok).toBe(true)
      expect(await produce('orders.eu', late)).toMatchObject({ ok: false, code: status.PERMISSION_DENIED })
      // The joiner knows it within a heartbeat: the call passes authentication (and, as the
      // joiner holds no meta replica, is sent on to the meta leader: UNAVAILABLE/NOT_LEADER).
      const onJoiner = () => call(joinerMeta, joinerMeta.getRoutes, GetRoutesRequest.fromPartial({}), late)
      const until = async (wanted: (code: number) => boolean) => {
        const deadline = Date.now() + 15_000
        for (;;) {
          const r = await onJoiner()
          const code = r.ok ? status.OK : r.code
          if (wanted(code) || Date.now() > deadline) return code
          await new Promise((res) => setTimeout(res, 100))
        }
      }
      expect(await until((c) => c !== status.UNAUTHENTICATED)).toBe(status.UNAVAILABLE)
      const onJoinerBrief = () =>
        call(joinerMeta, joinerMeta.getRoutes, GetRoutesRequest.fromPartial({}), briefAuth)
      expect(await onJoinerBrief()).toMatchObject({ ok: false, code: status.UNAVAILABLE })
      // Once it expires, both nodes refuse it, saying so (not as an unknown token).
      await new Promise((res) => setTimeout(res, Math.max(0, brief.response.expiresAtMs - Date.now() + 50)))
      const expired = { ok: false, code: status.UNAUTHENTICATED, details: /token brief expired at/ }
      expect(await call(meta, meta.listTokens, {}, briefAuth)).toMatchObject(expired)
      expect(await onJoinerBrief()).toMatchObject(expired)
      // It stays listed until deleted.
      const after = await call(meta, meta.listTokens, {}, ADMIN)
      expect(after.ok && after.response.tokens.map((t) => t.name)).toEqual(['brief', 'late'])
      expect((await call(meta, meta.deleteToken, { name: 'brief' }, ADMIN)).ok).toBe(true)
      expect((await call(meta, meta.deleteToken, { name: 'late' }, ADMIN)).ok).toBe(true)
      expect(await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({}), late)).toMatchObject({
        ok: false,
        code: status.UNAUTHENTICATED,
      })
      expect(await until((c) => c === status.UNAUTHENTICATED)).toBe(status.UNAUTHENTICATED)
    } finally {
      joinerMeta.close()
      joiner.child.kill('SIGTERM')
      await joiner.exited
    }
  }, 60_000)

  it('reads the token file again on SIGHUP: a new token works, a removed one is refused; a bad file changes nothing', async () => {
    const BILLING = { authorization: 'Bearer billing-secret-0123456789' }
    const logged =
      (text: string, times = 1) =>
      async () =>
        server.output().split(text).length - 1 >= times
    expect(await produce('billing', BILLING)).toMatchObject({ ok: false, code: status.UNAUTHENTICATED })
    // The reader goes, a billing producer comes.
    writeFileSync(
      authFile,
      JSON.stringify({
        tokens: [
          ...FILE_TOKENS.filter((t) => t.name !== 'reader'),
          { name: 'billing', token: 'billing-secret-0123456789', roles: ['producer:billing'] },
        ],
      }),
    )
    server.child.kill('SIGHUP')
    expect(await waitUntil(logged(`reloaded ${FILE_TOKENS.length} file tokens`))).toBe(true)
    expect((await produce('billing', BILLING)).ok).toBe(true)
    const target = await targetOf('orders.eu')
    const lease = await call(queue, queue.lease, LeaseRequest.fromPartial({ target, max: 1 }), READER)
    expect(lease).toMatchObject({ ok: false, code: status.UNAUTHENTICATED })
    // A broken file: the reload is refused, with the reason; the tokens stay as they were.
    writeFileSync(authFile, '{ "tokens": [ { "name": "x" ')
    server.child.kill('SIGHUP')
    expect(await waitUntil(logged('reload refused, nothing changed: auth file'))).toBe(true)
    expect((await produce('billing', BILLING)).ok).toBe(true)
    expect((await produce('orders.eu', ORDERS_APP)).ok).toBe(true)
    writeFileSync(authFile, JSON.stringify({ tokens: FILE_TOKENS }))
    server.child.kill('SIGHUP')
    expect(await waitUntil(logged(`reloaded ${FILE_TOKENS.length} file tokens`, 2))).toBe(true)
    expect(await produce('billing', BILLING)).toMatchObject({ ok: false, code: status.UNAUTHENTICATED })
  })

  it('refuses forged peer traffic: a heartbeat or Raft message without the cluster secret changes nothing', async () => {
    const heartbeat = HeartbeatRequest.fromPartial({ nodeId: 'rogue', address: '127.0.0.1:1' })
    const attempts: Record<string, string>[] = [{}, ADMIN, { [PEER_TOKEN_KEY]: 'guessed-secret' }]
    for (const headers of attempts) {
      expect(await call(peer, peer.heartbeat, heartbeat, headers)).toMatchObject({
        ok: false,
        code: status.UNAUTHENTICATED,
      })
    }
    const cluster = await call(meta, meta.clusterStatus, ClusterStatusRequest.fromPartial({}), ADMIN)
    if (!cluster.ok) throw new Error(cluster.details)
    expect(cluster.response.nodes.map((n) => n.nodeId)).toContain('n1')
    expect(cluster.response.nodes.map((n) => n.nodeId)).not.toContain('rogue')

    // A heartbeat of a leader of a much later term would make n1 follow it (Raft §5.1).
    const forged = messageToWire(
      0,
      message({ type: MessageType.Heartbeat, from: 'rogue', to: 'n1', term: 1_000 }),
    )
    const sendForged = (secret: string | undefined) =>
      new Promise<number>((resolve) => {
        const md = new Metadata()
        if (secret !== undefined) md.set(PEER_TOKEN_KEY, secret)
        const stream = peer.raft(md, (error) => resolve(error?.code ?? status.OK))
        stream.write({ fromNode: 'rogue', messages: [forged] })
        stream.end()
      })
    const before = await term('0')
    expect(before).toBeLessThan(1_000)
    expect(await sendForged(undefined)).toBe(status.UNAUTHENTICATED)
    expect(await sendForged('guessed-secret')).toBe(status.UNAUTHENTICATED)
    expect(await term('0')).toBe(before)
    // The same message with the secret is taken: the check above is what kept it out.
    expect(await sendForged(PEER_SECRET)).toBe(status.OK)
    expect(await term('0')).toBeGreaterThanOrEqual(1_000)
  }, 30_000)

  it("refuses a forged FencePartitions (it would take a queue's partitions away), and checks a real one", async () => {
    const routes = await callUntilOk(() =>
      call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({ queues: ['billing'] }), ADMIN),
    )
    if (!routes.ok) throw new Error(routes.details)
    const route = routes.response.routes[0]
    const groupId = route?.partitions[0]?.groupId ?? 0
    const fence = (storedAs: string, headers: Record<string, string>, group = groupId) =>
      call(
        peer,
        peer.fencePartitions,
        FencePartitionsRequest.fromPartial({ groupId: group, storedAs, partitions: [0] }),
        headers,
      )
    const billing = `billing#${route?.queueId}`
    const forged: Record<string, string>[] = [{}, ADMIN, { [PEER_TOKEN_KEY]: 'guessed-secret' }]
    for (const headers of forged)
      expect(await fence(billing, headers)).toMatchObject({ ok: false, code: status.UNAUTHENTICATED })
    expect((await produce('billing', ADMIN)).ok).toBe(true)
    const secret = { [PEER_TOKEN_KEY]: PEER_SECRET }
    expect(await fence('billing', secret)).toMatchObject({ ok: false, code: status.INVALID_ARGUMENT })
    expect(await fence(billing, secret, 999)).toMatchObject({ ok: false, code: status.UNAVAILABLE })
    expect((await produce('billing', ADMIN)).ok).toBe(true)
    // With the secret it fences: the partition refuses that incarnation from then on.
    expect((await fence(billing, secret)).ok).toBe(true)
    expect(await produce('billing', ADMIN)).toMatchObject({ ok: false, code: status.FAILED_PRECONDITION })
  }, 30_000)
})
