import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { credentials } from '@grpc/grpc-js'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort, LocalCluster } from '../src/cluster'
import { runBuilt } from '../src/run-built'
import { securedNode } from '../src/secured-cluster'

const ADMIN = 'admin-secret-0123456789'
const APP = 'orders-secret-0123456789'

// The SDK and the CLI against a real node with TLS and tokens.
describe('a secured cluster through the SDK and the CLI', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mq-e2e-security-'))
  const certs = join(dir, 'certs')
  let ca: Buffer
  let cluster: LocalCluster
  let http = ''

  beforeAll(async () => {
    const secured = await securedNode(
      dir,
      [
        { name: 'ops', token: ADMIN, roles: ['admin'] },
        { name: 'orders-app', token: APP, roles: ['producer:orders*', 'consumer:orders*'] },
      ],
      { tls: true, peerToken: 'cluster-secret-0123456789' },
    )
    ca = secured.ca as Buffer
    http = `127.0.0.1:${await freePort()}`
    cluster = await LocalCluster.start({
      nodes: 1,
      serverArgs: [...secured.serverArgs, '--http-listen', http],
      healthCredentials: credentials.createSsl(ca),
    })
    const admin = await MqClient.connect({ servers: cluster.servers, tls: { ca }, token: ADMIN })
    try {
      await admin.admin.createQueue('orders', { partitions: 1 })
      await admin.admin.createQueue('billing', { partitions: 1 })
    } finally {
      await admin.close()
    }
  }, 90_000)

  afterAll(async () => {
    await cluster?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('refuses a client without a token, or with a wrong one, at connect', async () => {
    await expect(MqClient.connect({ servers: cluster.servers, tls: { ca } })).rejects.toMatchObject({
      code: 'UNAUTHENTICATED',
      retriable: false,
    })
    await expect(
      MqClient.connect({ servers: cluster.servers, tls: { ca }, token: 'wrong-token-0123456789' }),
    ).rejects.toMatchObject({ code: 'UNAUTHENTICATED' })
  })

  it('cannot reach a TLS cluster in plaintext', async () => {
    await expect(
      MqClient.connect({ servers: cluster.servers, token: ADMIN, deadlineMs: 1_500, attemptMs: 500 }),
    ).rejects.toMatchObject({ code: 'UNAVAILABLE' })
  })

  it('produces and consumes within its roles, and is refused a queue outside them', async () => {
    const client = await MqClient.connect({ servers: cluster.servers, tls: { ca }, token: APP })
    try {
      await client.producer('orders').send({ body: 'o1' })
      await expect(client.producer('billing').send({ body: 'b1' })).rejects.toMatchObject({
        code: 'PERMISSION_DENIED',
      })
      await expect(client.admin.deleteQueue('billing')).rejects.toMatchObject({ code: 'PERMISSION_DENIED' })
      const consumer = client.consumer('orders', { waitMs: 2_000 })
      for await (const m of consumer) {
        expect(Buffer.from(m.body).toString()).toBe('o1')
        await m.ack()
        break
      }
      await consumer.close()
    } finally {
      await client.close()
    }
  }, 30_000)

  it("serves the console API over the TLS cluster with the caller's token and roles", async () => {
    const get = (path: string, token?: string) =>
      fetch(`http://${http}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {})
    expect((await get('/api/cluster')).status).toBe(401)
    const status = (await (await get('/api/cluster', APP)).json()) as { nodes: { alive: boolean }[] }
    expect(status.nodes).toMatchObject([{ alive: true }])
    expect((await get('/api/queues/orders', APP)).status).toBe(200)
    // The queues view lists the queues the token sees.
    const names = async (token: string) =>
      ((await (await get('/api/queues', token)).json()) as { name: string }[]).map((q) => q.name)
    expect(await names(APP)).toEqual(['orders'])
    expect(await names(ADMIN)).toEqual(['billing', 'orders'])
    // A queue outside the token's roles: the gRPC server's check, passed through.
    const refused = await get('/api/queues/billing', APP)
    expect([refused.status, ((await refused.json()) as { error: { code: string } }).error.code]).toEqual([
      403,
      'PERMISSION_DENIED',
    ])
    const purge = (token: string) =>
      fetch(`http://${http}/api/queues/billing/purge`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      })
    expect((await purge(APP)).status).toBe(403)
    expect(await (await purge(ADMIN)).json()).toEqual({
      ok: true,
      message: 'purged 0 ready (and waiting) messages of billing',
    })
  }, 30_000)

  it('mq takes --token/MQ_TOKEN and --tls-ca, and exits 5 when refused', async () => {
    const servers = cluster.servers.join(',')
    const caPath = join(certs, 'ca.crt')
    const denied = await runBuilt('cli', [
      '--servers',
      servers,
      '--tls-ca',
      caPath,
      '--token',
      APP,
      'produce',
      'billing',
      'x',
    ])
    expect(denied.code).toBe(5)
    // (Node warns once that TLS to an IP address sends no SNI: the line before ours.) Refused
    // at the route lookup: a token sees only its queues' routes.
    expect(denied.err).toMatch(
      /^mq: .*token "orders-app" may not read queue "billing" \(mq\.v1\.Meta\/GetRoutes\)/m,
    )
    const listed = await runBuilt('cli', ['--servers', servers, 'queue', 'list'], {
      env: { MQ_TOKEN: ADMIN, MQ_TLS_CA: caPath },
    })
    expect(listed.code, listed.err).toBe(0)
    expect(listed.out).toMatch(/billing/)
    // The orders app's token lists only its queues, and may not describe another's.
    const env = { MQ_TOKEN: APP, MQ_TLS_CA: caPath }
    const own = await runBuilt('cli', ['--servers', servers, 'queue', 'list'], { env })
    expect(own.code, own.err).toBe(0)
    expect(own.out).toMatch(/orders/)
    expect(own.out).not.toMatch(/billing/)
    const other = await runBuilt('cli', ['--servers', servers, 'queue', 'describe', 'billing'], { env })
    expect(other.code).toBe(5)
    expect(other.err).toMatch(/may not read queue "billing"/)
  }, 30_000)

  it('mq token create makes a token the SDK can use at once, and mq token delete revokes it', async () => {
    const servers = cluster.servers.join(',')
    const env = { MQ_TOKEN: ADMIN, MQ_TLS_CA: join(certs, 'ca.crt') }
    const created = await runBuilt(
      'cli',
      ['--servers', servers, 'token', 'create', 'worker', '-r', 'consumer:orders*'],
      {
        env,
      },
    )
    expect(created.code, created.err).toBe(0)
    const secret = created.out.trim()
    expect(secret).toMatch(/^mq_[A-Za-z0-9_-]{32}$/)
    const listed = await runBuilt('cli', ['--servers', servers, 'token', 'list', '--json'], { env })
    expect(JSON.parse(listed.out.trim())).toMatchObject({ name: 'worker', roles: ['consumer:orders*'] })
    const worker = await MqClient.connect({ servers: cluster.servers, tls: { ca }, token: secret })
    try {
      await expect(worker.producer('orders').send({ body: 'w' })).rejects.toMatchObject({
        code: 'PERMISSION_DENIED',
      })
    } finally {
      await worker.close()
    }
    const deleted = await runBuilt('cli', ['--servers', servers, 'token', 'delete', 'worker'], { env })
    expect(deleted.code, deleted.err).toBe(0)
    await expect(
      MqClient.connect({ servers: cluster.servers, tls: { ca }, token: secret }),
    ).rejects.toMatchObject({
      code: 'UNAUTHENTICATED',
    })
  }, 30_000)
})
