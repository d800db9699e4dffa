import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { get as getHttps } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from 'node:tls'
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
import { devCerts } from './dev-certs-run'
import { call, callUntilOk, httpUntilOk } from './grpc-calls'
import {
  clusterNodeArgs,
  type ServerProcess,
  startServer,
  type TestNode,
  testNodes,
  waitServing,
} from './processes'

const dir = mkdtempSync(join(tmpdir(), 'mq-tls-'))
const certs = join(dir, 'certs')
const rogue = join(dir, 'rogue')
/** n1's own copies of the node certificate and key, which the rotation test replaces. */
const n1Tls = join(dir, 'n1-tls')
const pem = (d: string, f: string) => readFileSync(join(d, f))
const nodes: (TestNode & { server?: ServerProcess })[] = []

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

/** A new node certificate and key signed by the dev CA (for 127.0.0.1), written to n1's files; its serial. */
function rotateN1Cert(): string {
  const csr = join(dir, 'rotated.csr')
  const ext = join(dir, 'rotated.ext')
  writeFileSync(ext, 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n')
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  const key = join(dir, 'rotated.key')
  const crt = join(dir, 'rotated.crt')
  execFileSync('openssl', ['req', ...ec, '-keyout', key, '-out', csr, '-subj', '/CN=mq node rotated'], {
    stdio: 'ignore',
  })
  execFileSync(
    'openssl',
    ['x509', '-req', '-in', csr, '-CA', join(certs, 'ca.crt'), '-CAkey', join(certs, 'ca.key')].concat([
      '-set_serial',
      '0x5eed1234',
      '-days',
      '2',
      '-extfile',
      ext,
      '-out',
      crt,
    ]),
    { stdio: 'ignore' },
  )
  copyFileSync(key, join(n1Tls, 'node.key'))
  copyFileSync(crt, join(n1Tls, 'node.crt'))
  return '5EED1234'
}

/** The serial number of the certificate a new TLS connection to `address` is shown (`alpn`: the gRPC port's by default). */
function presentedSerial(address: string, alpn = 'h2'): Promise<string> {
  const [host, port] = address.split(':') as [string, string]
  return new Promise((resolve, reject) => {
    const socket = connect({
      host,
      port: Number(port),
      ca: pem(certs, 'ca.crt'),
      cert: pem(certs, 'client.crt'),
      key: pem(certs, 'client.key'),
      ALPNProtocols: [alpn],
    })
    socket.once('secureConnect', () => {
      resolve(socket.getPeerCertificate().serialNumber.toUpperCase())
      socket.destroy()
    })
    socket.once('error', reject)
  })
}

/** Polls a node's /readyz until it answers 200 (n1's over HTTPS, trusting the cluster CA). */
async function readyz(n: { id: string; http: string }): Promise<number> {
  if (n.id !== 'n1') return (await httpUntilOk(`http://${n.http}/readyz`, 30_000)).status
  const [host, port] = n.http.split(':') as [string, string]
  const once = () =>
    new Promise<number>((resolve) => {
      const req = getHttps(
        {
          host,
          port: Number(port),
          path: '/readyz',
          ca: pem(certs, 'ca.crt'),
          servername: 'localhost',
          agent: false,
        },
        (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        },
      )
      req.on('error', () => resolve(0))
    })
  const deadline = Date.now() + 30_000
  for (;;) {
    const code = await once()
    if (code === 200 || Date.now() > deadline) return code
    await new Promise((r) => setTimeout(r, 100))
  }
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
  mkdirSync(n1Tls)
  copyFileSync(join(certs, 'node.crt'), join(n1Tls, 'node.crt'))
  copyFileSync(join(certs, 'node.key'), join(n1Tls, 'node.key'))
  nodes.push(...(await testNodes(3)))
  for (const n of nodes) {
    n.server = startServer(
      clusterNodeArgs(n, nodes, dir, [
        '--tls-cert',
        join(n.id === 'n1' ? n1Tls : certs, 'node.crt'),
        '--tls-key',
        join(n.id === 'n1' ? n1Tls : certs, 'node.key'),
        '--tls-ca',
        join(certs, 'ca.crt'),
        '--tls-client-auth',
        // n1 serves its HTTP port over TLS too (the node certificate, reloaded with it).
        ...(n.id === 'n1' ? ['--http-tls'] : []),
      ]),
    )
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
    for (const n of nodes) expect(await readyz(n)).toBe(200)
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

  it('presents a rotated certificate after SIGHUP, to clients and peers; a key that does not match is refused', async () => {
    const n1 = nodes[0] as (typeof nodes)[number]
    const good = clientTls(pem(certs, 'ca.crt'), pem(certs, 'client.crt'), pem(certs, 'client.key'))
    const before = await presentedSerial(n1.address)
    const rotated = rotateN1Cert()
    expect(before).not.toBe(rotated)
    // Not before the reload: the files are read at start and on SIGHUP only.
    expect(await presentedSerial(n1.address)).toBe(before)
    expect(await presentedSerial(n1.http, 'http/1.1')).toBe(before)
    n1.server?.child.kill('SIGHUP')
    const reloaded = async (times: number) => {
      const deadline = Date.now() + 10_000
      while ((n1.server?.output().split('the TLS files').length ?? 1) - 1 < times && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 20))
    }
    await reloaded(1)
    expect(await presentedSerial(n1.address)).toBe(rotated)
    // Its HTTPS port (--http-tls) too, whose console its start log names as https (it said
    // http:// until 2026-12-07, an audit).
    expect(await presentedSerial(n1.http, 'http/1.1')).toBe(rotated)
    expect(n1.server?.output()).toContain(`"console":"https://${n1.http}/console/"`)
    expect(await healthCode(n1.address, good)).toBe(status.OK)
    // n2 read its files at start and was not told to reload.
    const n2 = nodes[1] as (typeof nodes)[number]
    expect(await presentedSerial(n2.address)).toBe(before)

    // A key of another certificate: the reload is refused and n1 keeps the rotated one.
    copyFileSync(join(rogue, 'node.key'), join(n1Tls, 'node.key'))
    n1.server?.child.kill('SIGHUP')
    const deadline = Date.now() + 10_000
    while (!n1.server?.output().includes('reload refused, nothing changed') && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20))
    expect(n1.server?.output()).toMatch(/reload refused, nothing changed: --tls-cert .*mismatch/)
    expect(await presentedSerial(n1.address)).toBe(rotated)
    expect(await healthCode(n1.address, good)).toBe(status.OK)
    // Every node is still ready: its groups have leaders and have applied what they committed.
    for (const n of nodes) expect(await readyz(n)).toBe(200)
  }, 60_000)
})
