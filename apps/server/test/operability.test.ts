import { mkdtempSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { credentials } from '@grpc/grpc-js'
import {
  AckRequest,
  CreateQueueRequest,
  GetRoutesRequest,
  LeaseRequest,
  MetaClient,
  NackRequest,
  ProduceRequest,
  QueueClient,
  type QueueRoute,
} from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call, callUntilOk, httpGet, httpUntilOk } from './grpc-calls'
import { freePort, type ServerProcess, singleNodeArgs, startServer, waitServing } from './processes'
import { ensurePromtool, parseExposition, promtoolCheck, sampleSum } from './prometheus'

const dir = mkdtempSync(join(tmpdir(), 'mq-operability-'))
let server: ServerProcess
let address = ''
let http = ''
let meta: MetaClient
let queue: QueueClient

// Installing promtool on a fresh machine takes a while: before, and apart from, the server.
beforeAll(() => ensurePromtool(), 600_000)

beforeAll(async () => {
  address = `127.0.0.1:${await freePort()}`
  http = `http://127.0.0.1:${await freePort()}`
  server = startServer(
    singleNodeArgs('n1', address, dir, [
      '--tick-ms',
      '20',
      '--http-listen',
      http.slice('http://'.length),
      '--http-connections-per-address-max',
      '20',
      '--log-level',
      'debug',
    ]),
  )
  await waitServing(address)
  meta = new MetaClient(address, credentials.createInsecure())
  queue = new QueueClient(address, credentials.createInsecure())
}, 60_000)

afterAll(async () => {
  meta?.close()
  queue?.close()
  server?.child.kill('SIGTERM')
  await server?.exited
  rmSync(dir, { recursive: true, force: true })
})

const scrape = async () => {
  const r = await httpGet(`${http}/metrics`)
  expect(r.status).toBe(200)
  return { text: r.body, samples: parseExposition(r.body) }
}

/**
 * Scrapes until the node says it is ready: a new node can be ready (only the meta group) and
 * then not, for the moment its first data group elects after the controller created it.
 */
const scrapeWhenReady = async (timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const s = await scrape()
    if (sampleSum(s.samples, 'mq_node_ready') === 1 || Date.now() > deadline) return s
    await new Promise((r) => setTimeout(r, 100))
  }
}

// One real mq-server process with its HTTP port: probes, metrics that move, logs.
describe('mq-server operability', () => {
  it('keeps as many HTTP connections from one address as --http-connections-per-address-max says', async () => {
    const port = Number(http.slice(http.lastIndexOf(':') + 1))
    const sockets: Socket[] = []
    const open = () =>
      new Promise<Socket>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port }, () => resolve(s))
        s.once('error', reject)
        sockets.push(s)
      })
    const closedWithin = (s: Socket, ms: number) =>
      new Promise<boolean>((resolve) => {
        if (s.destroyed) return resolve(true)
        const timer = setTimeout(() => resolve(false), ms)
        s.once('close', () => {
          clearTimeout(timer)
          resolve(true)
        })
      })
    try {
      // 20, not the default 16: every one stays open, the 21st is closed as accepted.
      const held = await Promise.all(Array.from({ length: 20 }, open))
      expect(await Promise.all(held.map((s) => closedWithin(s, 300)))).not.toContain(true)
      expect(await closedWithin(await open(), 2_000)).toBe(true)
    } finally {
      for (const s of sockets) s.destroy()
    }
  })

  it('answers /healthz at once and /readyz once it knows the meta leader and its groups have leaders', async () => {
    expect(await httpGet(`${http}/healthz`)).toEqual({ status: 200, body: 'ok\n' })
    expect((await httpUntilOk(`${http}/readyz`)).status).toBe(200)
    expect((await httpGet(`${http}/nope`)).status).toBe(404)
  }, 30_000)

  it('exports metrics that promtool accepts and that move with produce, lease, ack and nack', async () => {
    const before = await scrapeWhenReady()
    expect(sampleSum(before.samples, 'mq_raft_role', { group: '0', role: 'leader' })).toBe(1)
    expect(sampleSum(before.samples, 'mq_node_ready')).toBe(1)
    expect(before.text).toMatch(/^mq_peer_queued_bytes\{node="n1"\} 0$/m) // one node: no peer
    // The host-wide bound on the groups' log tails (--log-memory-mb) has had nothing to do.
    expect(before.text).toMatch(/^mq_raft_host_log_bound_compactions_total\{node="n1"\} 0$/m)

    const created = await callUntilOk(() =>
      call(
        meta,
        meta.createQueue,
        CreateQueueRequest.fromPartial({ name: 'jobs', config: { partitions: 1 } }),
      ),
    )
    expect(created.ok).toBe(true)
    const routes = await callUntilOk(() =>
      call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({ queues: ['jobs'] })),
    )
    const route = (routes.ok ? routes.response.routes[0] : undefined) as QueueRoute
    const target = { queue: 'jobs', partition: 0, routeEpoch: route.routeEpoch }
    const messages = [1, 1, 1, 5, 5].map((weight, i) => ({ body: Buffer.from(`m${i}`), weight }))
    const produced = await callUntilOk(() =>
      call(queue, queue.produce, ProduceRequest.fromPartial({ target, messages })),
    )
    expect(produced.ok).toBe(true)

    const mid = await scrape()
    expect(sampleSum(mid.samples, 'mq_queue_enqueued_total', { queue: 'jobs' })).toBe(5)
    expect(sampleSum(mid.samples, 'mq_queue_messages', { queue: 'jobs', weight: '1', state: 'ready' })).toBe(
      3,
    )
    expect(sampleSum(mid.samples, 'mq_queue_messages', { queue: 'jobs', weight: '5', state: 'ready' })).toBe(
      2,
    )
    expect(
      sampleSum(mid.samples, 'mq_queue_oldest_age_seconds', { queue: 'jobs', weight: '1' }),
    ).toBeGreaterThanOrEqual(0)
    expect(sampleSum(mid.samples, 'mq_queue_target_share', { queue: 'jobs', weight: '5' })).toBeCloseTo(5 / 6)
    expect(
      sampleSum(mid.samples, 'mq_rpc_duration_seconds_count', { method: 'mq.v1.Queue/Produce', code: 'OK' }),
    ).toBeGreaterThanOrEqual(1)
    expect(sampleSum(mid.samples, 'mq_storage_fsync_seconds_count')).toBeGreaterThan(
      sampleSum(before.samples, 'mq_storage_fsync_seconds_count'),
    )
    expect(sampleSum(mid.samples, 'mq_raft_append_seconds_count', { group: '1' })).toBeGreaterThanOrEqual(2)
    expect(sampleSum(mid.samples, 'mq_raft_commit_index', { group: '1' })).toBeGreaterThan(
      sampleSum(before.samples, 'mq_raft_commit_index', { group: '1' }),
    )
    // The produces' entries are in the in-memory log tail (no compaction this early).
    expect(sampleSum(mid.samples, 'mq_raft_log_tail_entries', { group: '1' })).toBeGreaterThan(
      sampleSum(before.samples, 'mq_raft_log_tail_entries', { group: '1' }),
    )
    expect(sampleSum(mid.samples, 'mq_raft_log_tail_bytes', { group: '1' })).toBeGreaterThan(
      sampleSum(before.samples, 'mq_raft_log_tail_bytes', { group: '1' }),
    )

    const leased = await call(
      queue,
      queue.lease,
      LeaseRequest.fromPartial({ target, consumerId: 'c', max: 3 }),
    )
    if (!leased.ok) throw new Error(leased.details)
    expect(leased.response.messages).toHaveLength(3)
    const [a, b] = leased.response.messages.map((m) => m.leaseId)
    expect(
      (await call(queue, queue.ack, AckRequest.fromPartial({ target, leaseIds: [a as string] }))).ok,
    ).toBe(true)
    expect(
      (await call(queue, queue.nack, NackRequest.fromPartial({ target, leaseIds: [b as string] }))).ok,
    ).toBe(true)

    const after = await scrape()
    expect(sampleSum(after.samples, 'mq_queue_leased_total', { queue: 'jobs' })).toBe(3)
    expect(sampleSum(after.samples, 'mq_queue_acked_total', { queue: 'jobs' })).toBe(1)
    expect(sampleSum(after.samples, 'mq_queue_nacked_total', { queue: 'jobs' })).toBe(1)
    expect(sampleSum(after.samples, 'mq_queue_messages', { queue: 'jobs', state: 'leased' })).toBe(1)
    expect(sampleSum(after.samples, 'mq_queue_messages', { queue: 'jobs', state: 'ready' })).toBe(3)
    // The partition's replicated counts.
    const events = ['enqueued', 'delivered', 'acked', 'nacked', 'expired', 'dead_lettered', 'discarded']
    expect(
      events.map((event) =>
        sampleSum(after.samples, 'mq_partition_messages_total', { queue: 'jobs', event }),
      ),
    ).toEqual([5, 3, 1, 1, 0, 0, 0])

    const check = promtoolCheck(after.text)
    expect(check.output).toBe('')
    expect(check.status).toBe(0)
  }, 60_000)

  it("exports an ordered queue's messages waiting for their key's turn", async () => {
    const created = await callUntilOk(() =>
      call(
        meta,
        meta.createQueue,
        CreateQueueRequest.fromPartial({ name: 'orders', config: { partitions: 1, orderedKeys: true } }),
      ),
    )
    expect(created.ok).toBe(true)
    const epoch = created.ok ? created.response.routeEpoch : 0
    const target = { queue: 'orders', partition: 0, routeEpoch: epoch }
    const messages = ['a', 'b', 'c'].map((body) => ({ body: Buffer.from(body), key: 'k' }))
    const produced = await callUntilOk(() =>
      call(queue, queue.produce, ProduceRequest.fromPartial({ target, messages })),
    )
    expect(produced.ok).toBe(true)
    const s = await scrape()
    expect(sampleSum(s.samples, 'mq_queue_waiting_messages', { queue: 'orders' })).toBe(2)
    expect(sampleSum(s.samples, 'mq_queue_messages', { queue: 'orders', state: 'ready' })).toBe(1)
    expect(promtoolCheck(s.text).status).toBe(0)
  }, 60_000)

  it('logs JSON lines with level, node and request ids', () => {
    const lines = server
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(lines.find((l) => /node n1 listening/.test(String(l.msg)))).toMatchObject({
      level: 'info',
      node: 'n1',
    })
    expect(lines.find((l) => l.method === 'mq.v1.Queue/Produce')).toMatchObject({
      level: 'debug',
      node: 'n1',
      requestId: expect.stringMatching(/^n1-/),
    })
  })
})
