import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { credentials } from '@grpc/grpc-js'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { runBuilt } from '../src/run-built'
import { waitFor } from '../src/scale-run'
import { securedNode } from '../src/secured-cluster'

const ADMIN = 'admin-secret-0123456789'
const APP = 'orders-secret-0123456789'

// A queue that names a dead-letter queue: what its consumers fail on maxDeliveries times goes
// there (on a secured cluster: the leaders move them with the peer secret, not a user's token —
// the app's token may not even write to the dead-letter queue).
describe('a dead-letter queue', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mq-e2e-dlq-'))
  let cluster: LocalCluster
  let admin: MqClient
  let app: MqClient
  let certs = ''

  beforeAll(async () => {
    const secured = await securedNode(
      dir,
      [
        { name: 'ops', token: ADMIN, roles: ['admin'] },
        { name: 'orders-app', token: APP, roles: ['producer:orders', 'consumer:orders'] },
      ],
      { tls: true, peerToken: 'cluster-secret-0123456789' },
    )
    const ca = secured.ca as Buffer
    certs = secured.certs as string
    cluster = await LocalCluster.start({
      nodes: 3,
      serverArgs: secured.serverArgs,
      healthCredentials: credentials.createSsl(ca),
    })
    admin = await MqClient.connect({
      servers: cluster.servers,
      tls: { ca },
      token: ADMIN,
      deadlineMs: 20_000,
    })
    app = await MqClient.connect({ servers: cluster.servers, tls: { ca }, token: APP, deadlineMs: 20_000 })
  }, 120_000)

  afterAll(async () => {
    for (const c of [admin, app]) await c?.close()
    await cluster?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Leases `count` messages of orders and nacks every delivery until each was delivered twice. */
  const failEach = async (count: number) => {
    const deliveries = new Map<string, number>()
    const consumer = app.consumer('orders', { prefetch: 16, waitMs: 200 })
    const timer = setTimeout(() => void consumer.close(), 30_000)
    try {
      for await (const d of consumer) {
        const body = new TextDecoder().decode(d.body)
        deliveries.set(body, (deliveries.get(body) ?? 0) + 1)
        await d.nack(0)
        if (deliveries.size === count && [...deliveries.values()].every((n) => n >= 2)) break
      }
    } finally {
      clearTimeout(timer)
      await consumer.close()
    }
    return deliveries
  }
  const deadInOrders = async () => (await admin.admin.deadLetters('orders')).length

  it('receives what failed maxDeliveries times, with where it died; waits for a target that does not exist yet', async () => {
    expect(
      await waitFor(async () => (await admin.admin.clusterStatus()).formatLevel >= 10, 30_000, 200),
    ).toBe(true)
    await admin.admin.createQueue('dead-orders', { partitions: 1 })
    await admin.admin.createQueue('orders', {
      partitions: 2,
      maxDeliveries: 2,
      deadLetterQueue: 'dead-orders',
    })
    // The app may not touch the dead-letter queue itself (not even see its route).
    await expect(app.producer('dead-orders').send({ body: 'x' })).rejects.toThrow(
      /token "orders-app" may not read queue "dead-orders"/,
    )

    const producer = app.producer('orders', { keyless: 'round-robin' })
    const sent = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        producer.send({ body: `order${i}`, weight: i + 1, headers: { trace: `t${i}` } }),
      ),
    )
    expect(new Set(sent.map((s) => s.partition))).toEqual(new Set([0, 1]))
    const deliveries = await failEach(6)
    expect([...deliveries.values()].every((n) => n === 2)).toBe(true)
    const diedAt = Date.now()

    // They arrive in dead-orders (moved within a forwarder round or two), nothing stays behind.
    const got = new Map<
      string,
      { headers: Record<string, string>; weight: number; key: string | undefined }
    >()
    const consumer = admin.consumer('dead-orders', { prefetch: 16, waitMs: 200 })
    const timer = setTimeout(() => void consumer.close(), 20_000)
    for await (const d of consumer) {
      got.set(new TextDecoder().decode(d.body), { headers: d.headers, weight: d.weight, key: d.key })
      await d.ack()
      if (got.size === 6) break
    }
    clearTimeout(timer)
    await consumer.close()
    expect([...got.keys()].sort()).toEqual(Array.from({ length: 6 }, (_, i) => `order${i}`))
    console.log(
      `dead-letter queue: 6 dead letters moved and consumed ${Date.now() - diedAt} ms after they died`,
    )
    for (const [body, m] of got) {
      const i = Number(body.slice('order'.length))
      expect(m.weight).toBe(i + 1)
      expect(m.key || undefined).toBeUndefined() // sent keyless, copied keyless
      expect(m.headers).toMatchObject({
        trace: `t${i}`,
        'mq-dead-letter-deliveries': '2',
        'mq-dead-letter-source': expect.stringMatching(/^orders\/[01]\/\d+$/),
      })
    }
    expect(await waitFor(async () => (await deadInOrders()) === 0, 10_000, 200)).toBe(true)

    // A dead-letter queue that does not exist yet: the dead letters wait in orders' own list.
    await admin.admin.updateQueue('orders', { deadLetterQueue: 'later-dead' })
    await Promise.all(['p', 'q'].map((b) => producer.send({ body: b })))
    await failEach(2)
    expect(await waitFor(async () => (await deadInOrders()) === 2, 10_000, 200)).toBe(true)
    await new Promise((r) => setTimeout(r, 2_500)) // two forwarder rounds: they stay
    expect(await deadInOrders()).toBe(2)
    await admin.admin.createQueue('later-dead', { partitions: 1 })
    expect(await waitFor(async () => (await deadInOrders()) === 0, 15_000, 200)).toBe(true)
    const later = await admin.admin.queueStats('later-dead')
    expect(later.reduce((n, p) => n + p.messages, 0)).toBe(2)

    // Replayed into orders once "fixed" (mq queue move), they are consumed there.
    const moved = await runBuilt(
      'cli',
      [
        '--servers',
        cluster.servers.join(','),
        'queue',
        'move',
        'later-dead',
        '--to',
        'orders',
        '--wait',
        '1s',
      ],
      { env: { MQ_TOKEN: ADMIN, MQ_TLS_CA: join(certs, 'ca.crt') } },
    )
    expect(moved.out, moved.err).toBe('moved 2 messages from later-dead to orders\n')
    const replayed = new Set<string>()
    const again = app.consumer('orders', { prefetch: 16, waitMs: 200 })
    const replayTimer = setTimeout(() => void again.close(), 20_000)
    for await (const d of again) {
      replayed.add(new TextDecoder().decode(d.body))
      expect(d.headers['mq-dead-letter-source']).toMatch(/^orders\/[01]\/\d+$/)
      await d.ack()
      if (replayed.size === 2) break
    }
    clearTimeout(replayTimer)
    expect([...replayed].sort()).toEqual(['p', 'q'])

    // A queue cannot be its own dead-letter queue.
    await expect(admin.admin.updateQueue('orders', { deadLetterQueue: 'orders' })).rejects.toThrow(
      /cannot be its own dead-letter queue/,
    )
    await producer.close()
  }, 120_000)
})
