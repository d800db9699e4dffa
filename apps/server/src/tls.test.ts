import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Metadata, Server, status } from '@grpc/grpc-js'
import {
  HealthCheckRequest,
  HealthCheckResponse_ServingStatus,
  HealthClient,
  HealthService,
} from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { makeDevCerts } from './dev-certs'
import { NodeCredentials } from './tls'

const dir = mkdtempSync(join(tmpdir(), 'mq-tls-unit-'))
let certs: ReturnType<typeof makeDevCerts>
const server = new Server()
let address = ''
/** n2's server again, bound to 127.0.0.2: an address its certificate does not carry. */
const unnamed = new Server()
let unnamedAddress = ''

/** TLS settings of node `id` with its own dev certificate. */
const settingsOf = (id: string, tlsPeerIds: boolean) => ({
  tlsCert: certs.nodes[id]?.cert ?? '',
  tlsKey: certs.nodes[id]?.key ?? '',
  tlsCa: certs.caCert,
  tlsClientAuth: false,
  tlsPeerIds,
})

beforeAll(async () => {
  certs = makeDevCerts({ dir, hosts: [], days: 2, force: false, nodeIds: ['n1', 'n2'] })
  // n2's server.
  server.addService(HealthService, {
    check: (_: unknown, cb: (e: null, r: object) => void) =>
      cb(null, { status: HealthCheckResponse_ServingStatus.SERVING }),
    watch: () => {},
  })
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', new NodeCredentials(settingsOf('n2', false)).server(), (e, p) =>
      e ? rej(e) : res(p),
    ),
  )
  address = `127.0.0.1:${port}`
  unnamed.addService(HealthService, {
    check: (_: unknown, cb: (e: null, r: object) => void) =>
      cb(null, { status: HealthCheckResponse_ServingStatus.SERVING }),
    watch: () => {},
  })
  const unnamedPort = await new Promise<number>((res, rej) =>
    unnamed.bindAsync('127.0.0.2:0', new NodeCredentials(settingsOf('n2', false)).server(), (e, p) =>
      e ? rej(e) : res(p),
    ),
  )
  unnamedAddress = `127.0.0.2:${unnamedPort}`
})

afterAll(() => {
  server.forceShutdown()
  unnamed.forceShutdown()
  rmSync(dir, { recursive: true, force: true })
})

/** A health check of n2's server from n1 with `credentials`: OK or the failure's code. */
async function check(c: ReturnType<NodeCredentials['peer']>, at = address): Promise<number> {
  const client = new HealthClient(at, c)
  try {
    return await new Promise<number>((resolve) =>
      client.check(
        HealthCheckRequest.fromPartial({}),
        new Metadata(),
        { deadline: Date.now() + 5_000 },
        (e) => resolve(e ? e.code : status.OK),
      ),
    )
  } finally {
    client.close()
  }
}

describe('NodeCredentials.peerFor', () => {
  it('with --tls-peer-ids reaches a peer only when its certificate names the node it is reached as', async () => {
    const n1 = new NodeCredentials(settingsOf('n1', true))
    expect(await check(n1.peerFor('n2'))).toBe(status.OK)
    expect(await check(n1.peerFor('n3'))).toBe(status.UNAVAILABLE)
    expect(n1.peerFor('n2')).toBe(n1.peerFor('n2'))
  })

  it('with --tls-peer-ids still checks the host name: a certificate naming the node but not the address is refused', async () => {
    const n1 = new NodeCredentials(settingsOf('n1', true))
    // n2's certificate names localhost, 127.0.0.1, ::1 and n2, not 127.0.0.2: refused as by peer().
    expect(await check(n1.peer(), unnamedAddress)).toBe(status.UNAVAILABLE)
    expect(await check(n1.peerFor('n2'), unnamedAddress)).toBe(status.UNAVAILABLE)
  })

  it('forgets the credentials of the node asked for least recently past 1,000 nodes (nodes replaced under new ids)', () => {
    const n1 = new NodeCredentials(settingsOf('n1', true))
    const gone = n1.peerFor('gone')
    const kept = n1.peerFor('n2')
    // Nodes come and go under new ids: n2 is reached all along, `gone` never again. Before,
    // every node ever reached was kept for the life of the process, one more per new id.
    for (let i = 0; i < 2_000; i++) {
      n1.peerFor(`replaced-${i}`)
      if (i % 100 === 0) expect(n1.peerFor('n2')).toBe(kept)
    }
    expect(n1.peerFor('n2')).toBe(kept)
    expect(n1.peerFor('gone')).not.toBe(gone)
  })

  it('without it reaches any server of the CA, as peer() does', async () => {
    const n1 = new NodeCredentials(settingsOf('n1', false))
    expect(n1.peerFor('n3')).toBe(n1.peer())
    expect(await check(n1.peerFor('n3'))).toBe(status.OK)
  })
})
