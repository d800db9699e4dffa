import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ChannelCredentials, credentials, status } from '@grpc/grpc-js'
import {
  CreateQueueRequest,
  GetRoutesRequest,
  HealthCheckRequest,
  HealthClient,
  MetaClient,
  ProduceRequest,
  QueueClient,
} from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createProgram } from '../src/program'
import { call, callUntilOk, httpUntilOk } from './grpc-calls'
import { freePort, type ServerProcess, startServer, waitServing } from './processes'

const dir = mkdtempSync(join(tmpdir(), 'mq-tls-'))
const certs = join(dir, 'certs')
const rogue = join(dir, 'rogue')
const pem = (d: string, f: string) => readFileSync(join(d, f))
const nodes: { id: string; address: string; http: string; server?: ServerProcess }[] = []

/** Runs `mq-server dev-certs` in process; returns its exit code (undefined = 0) and what it printed. */
async function devCerts(args: string[]) {
  const io = { lines: [] as string[], errors: [] as string[], code: undefined as number | undefined }
  await createProgram({
    out: (l) => io.lines.push(l),
    err: (l) => io.errors.push(l),
    exit: (c) => {
      io.code = c
    },
  }).parseAsync(['dev-certs', ...args], { from: 'user' })
  return io
}

/** A client certificate signed by the dev CA that expired yesterday. */
function expiredClientCert(): { cert: Buffer; key: Buffer } {
  const key = join(dir, 'expired.key')
  const csr = join(dir, 'expired.csr')
  const crt = join(dir, 'expired.crt')
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  execFileSync('openssl', ['req', ...ec, '-keyout', key, '-out', csr, '-subj', '/CN=expired'], {
    stdio: 'ignore',
  })
  execFileSync(
    'openssl',
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      join(certs, 'ca.crt'),
      '-CAkey',
      join(certs, 'ca.key'),
      '-days',
      '-1',
      '-out',
      crt,
    ],
    { stdio: 'ignore' },
  )
  return { cert: readFileSync(crt), key: readFileSync(key) }
}

const clientTls = (ca: Buffer, cert?: Buffer, key?: Buffer): ChannelCredentials =>
  credentials.createSsl(ca, key ?? null, cert ?? null)

/** One health check over `channel`: the outcome's status code (OK when it answered). */
async function healthCode(address: string, channel: ChannelCredentials): Promise<number> {
  const client = new HealthClient(address, channel)
  try {
    const r = await call(client, client.check, HealthCheckRequest.fromPartial({ service: '' }))
    return r.ok ? status.OK : r.code
  } finally {
    client.close()
  }
}

beforeAll(async () => {
  expect((await devCerts([certs])).code).toBeUndefined()
  expect((await devCerts([rogue])).code).toBeUndefined()
  for (let i = 1; i <= 3; i++) {
    nodes.push({
      id: `n${i}`,
      address: `127.0.0.1:${await freePort()}`,
      http: `127.0.0.1:${await freePort()}`,
    })
  }
  const initialMeta = nodes.map((n) => `${n.id}=${n.address}`).join(',')
  for (const n of nodes) {
    n.server = startServer([
      'start',
      '--node-id',
      n.id,
      '--listen',
      n.address,
      '--data-dir',
      join(dir, n.id),
      '--initial-meta',
      initialMeta,
      '--tick-ms',
      '20',
      '--http-listen',
      n.http,
      '--tls-cert',
      join(certs, 'node.crt'),
      '--tls-key',
      join(certs, 'node.key'),
      '--tls-ca',
      join(certs, 'ca.crt'),
      '--tls-client-auth',
    ])
  }
  const good = clientTls(pem(certs, 'ca.crt'), pem(certs, 'client.crt'), pem(certs, 'client.key'))
  await Promise.all(nodes.map((n) => waitServing(n.address, 30_000, good)))
}, 90_000)

afterAll(async () => {
  for (const n of nodes) n.server?.child.kill('SIGTERM')
  await Promise.all(nodes.map((n) => n.server?.exited))
  rmSync(dir, { recursive: true, force: true })
})

// Three real mq-server processes with mutual TLS (certificates from `mq-server dev-certs`).
describe('mq-server TLS', () => {
  it('dev-certs refuses to overwrite certificates without --force', async () => {
    const again = await devCerts([certs])
    expect(again.code).toBe(1)
    expect(again.errors.join('\n')).toMatch(/already holds ca.crt.*pass --force/)
  })

  it('runs a cluster over mutual TLS: peers replicate, and a client with a certificate of the CA is served', async () => {
    for (const n of nodes) expect((await httpUntilOk(`http://${n.http}/readyz`, 30_000)).status).toBe(200)
    const good = clientTls(pem(certs, 'ca.crt'), pem(certs, 'client.crt'), pem(certs, 'client.key'))
    const metas = nodes.map((n) => new MetaClient(n.address, good))
    const queues = new Map(nodes.map((n) => [n.address, new QueueClient(n.address, good)]))
    let turn = 0
    try {
      // Writes go to the meta leader: ask each node in turn until one takes it.
      const created = await callUntilOk(() => {
        const meta = metas[turn++ % metas.length] as MetaClient
        return call(
          meta,
          meta.createQueue,
          CreateQueueRequest.fromPartial({ name: 'secure', config: { partitions: 1 } }),
        )
      }, 30_000)
      expect(created.ok).toBe(true)
      // Produce goes to the partition's leader: a majority acknowledges over the peers' TLS streams.
      const produced = await callUntilOk(async () => {
        const meta = metas[0] as MetaClient
        const routes = await call(meta, meta.getRoutes, GetRoutesRequest.fromPartial({ queues: ['secure'] }))
        const route = routes.ok ? routes.response.routes[0] : undefined
        const q = queues.get(route?.partitions[0]?.leaderAddress ?? '')
        if (!route || !q) return { ok: false as const, code: status.UNAVAILABLE, details: 'no leader yet' }
        const target = { queue: 'secure', partition: 0, routeEpoch: route.routeEpoch }
        return call(
          q,
          q.produce,
          ProduceRequest.fromPartial({ target, messages: [{ body: Buffer.from('s') }] }),
        )
      }, 30_000)
      expect(produced.ok).toBe(true)
    } finally {
      for (const c of [...metas, ...queues.values()]) c.close()
    }
  }, 60_000)

  it('refuses plaintext, a wrong CA, a missing, foreign or expired client certificate', async () => {
    const address = nodes[0]?.address as string
    const ca = pem(certs, 'ca.crt')
    const refused = [status.UNAVAILABLE, status.DEADLINE_EXCEEDED]
    // The positive control: the same check with the right certificate answers.
    expect(await healthCode(address, clientTls(ca, pem(certs, 'client.crt'), pem(certs, 'client.key')))).toBe(
      status.OK,
    )
    expect(refused).toContain(await healthCode(address, credentials.createInsecure()))
    expect(refused).toContain(
      await healthCode(
        address,
        clientTls(pem(rogue, 'ca.crt'), pem(certs, 'client.crt'), pem(certs, 'client.key')),
      ),
    )
    expect(refused).toContain(await healthCode(address, clientTls(ca)))
    expect(refused).toContain(
      await healthCode(address, clientTls(ca, pem(rogue, 'client.crt'), pem(rogue, 'client.key'))),
    )
    const expired = expiredClientCert()
    expect(refused).toContain(await healthCode(address, clientTls(ca, expired.cert, expired.key)))
  }, 60_000)
})
