import { afterEach, describe, expect, it } from 'vitest'
import { AccessControl } from '../auth/access'
import { parseTokenFile } from '../auth/token-file'
import { silentLogger } from '../log'
import { NodeMetrics, QUEUE_OVERFLOW } from '../metrics/node-metrics'
import { parseSample } from '../metrics/scope-exposition'
import type { NodeView } from '../node-view'
import { type HttpServer, startHttpServer } from './http-server'
import { metricsReader } from './metrics-scope'

const tokens = parseTokenFile(
  {
    tokens: [
      { name: 'ops', token: 'admin-secret-0123456789', roles: ['admin'] },
      { name: 'app', token: 'app-secret-0123456789', roles: ['producer:orders.*'] },
      { name: 'dash', token: 'dash-secret-0123456789', roles: ['viewer:billing'] },
      { name: 'flow', token: 'flow-secret-0123456789', roles: ['viewer:*flow'] },
      { name: 'old', token: 'old-secret-0123456789', roles: ['admin'], expiresAt: '2020-01-01' },
    ],
  },
  'test',
)

const view: NodeView = {
  nodeId: 'n1',
  serving: () => true,
  failed: () => false,
  groups: () => [],
  ledPartitions: () => [],
  metaLeaderId: () => 'n1',
}

const servers: HttpServer[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()))
})

/** A node's HTTP port whose metrics counted operations on orders.eu, billing and the overflow. */
async function start(access: AccessControl, open = false): Promise<string> {
  const metrics = new NodeMetrics('n1')
  for (const queue of ['orders.eu', 'billing', QUEUE_OVERFLOW]) metrics.enqueued.inc({ queue }, 3)
  const server = await startHttpServer({
    listen: '127.0.0.1:0',
    metrics,
    view,
    log: silentLogger(),
    metricsReader: metricsReader(access, open),
  })
  servers.push(server)
  return `http://127.0.0.1:${server.port}/metrics`
}

const scrape = (url: string, token?: string) =>
  fetch(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } })

/** The queue labels of the enqueued counter's samples in an exposition. */
const queuesIn = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('mq_queue_enqueued_total{'))
    .map((l) => parseSample(l)?.labels.queue)

describe('who reads /metrics', () => {
  it('asks a token on a node that authenticates clients, naming how to send one', async () => {
    const url = await start(new AccessControl({ peerToken: 'peer', tokens }))
    const none = await scrape(url)
    expect(none.status).toBe(401)
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="mq"')
    expect(await none.text()).toMatch(/requires a token for \/metrics: send "Authorization: Bearer <token>"/)
    const wrong = await scrape(url, 'nobody-knows-this-one')
    expect(wrong.status).toBe(401)
    expect(await wrong.text()).toMatch(/the token is not recognised/)
    const expired = await scrape(url, 'old-secret-0123456789')
    expect(expired.status).toBe(401)
    expect(await expired.text()).toMatch(/the token old expired at 2020-01-01/)
    const garbled = await fetch(url, { headers: { authorization: 'Bearer caf\u00e9' } })
    expect(garbled.status).toBe(401)
    expect(await garbled.text()).toMatch(/characters a token never has/)
  })

  it('shows an admin token every series, and any other token its own queues and the unlabelled ones', async () => {
    const url = await start(new AccessControl({ peerToken: 'peer', tokens }))
    const admin = await (await scrape(url, 'admin-secret-0123456789')).text()
    expect(queuesIn(admin)).toEqual(['orders.eu', 'billing', QUEUE_OVERFLOW])
    const app = await scrape(url, 'app-secret-0123456789')
    expect(app.status).toBe(200)
    const appText = await app.text()
    expect(queuesIn(appText)).toEqual(['orders.eu'])
    expect(appText).toMatch(/^mq_node_ready\{node="n1"\} 1$/m)
    expect(appText).toMatch(/^# TYPE mq_queue_enqueued_total counter$/m)
    expect(queuesIn(await (await scrape(url, 'dash-secret-0123456789')).text())).toEqual(['billing'])
    // The overflow sums other tenants' queues: no pattern shows it, whatever it matches.
    expect(queuesIn(await (await scrape(url, 'flow-secret-0123456789')).text())).toEqual([])
  })

  it('lets anyone read everything with --metrics-open, or on a node that checks no tokens', async () => {
    for (const url of [
      await start(new AccessControl({ peerToken: 'peer', tokens }), true),
      await start(new AccessControl({ peerToken: '', tokens: undefined })),
    ]) {
      const r = await scrape(url)
      expect(r.status).toBe(200)
      expect(queuesIn(await r.text())).toEqual(['orders.eu', 'billing', QUEUE_OVERFLOW])
    }
  })
})
