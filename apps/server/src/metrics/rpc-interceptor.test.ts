import { credentials, Metadata, Server, ServerCredentials, status } from '@grpc/grpc-js'
import { HealthClient, type HealthServer, HealthService } from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { silentLogger } from '../log'
import { NodeMetrics } from './node-metrics'
import { rpcInterceptor } from './rpc-interceptor'

/** Calls of `method` timed into mq_rpc_duration_seconds, by status name. */
async function timedCalls(metrics: NodeMetrics, method: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {}
  for (const v of (await metrics.rpcSeconds.get()).values) {
    if (v.metricName === 'mq_rpc_duration_seconds_count' && v.labels.method === method)
      counts[String(v.labels.code)] = v.value
  }
  return counts
}

describe('rpcInterceptor', () => {
  const metrics = new NodeMetrics('n1')
  const server = new Server({ interceptors: [rpcInterceptor(metrics, silentLogger(), 'n1')] })
  let client: HealthClient

  beforeAll(async () => {
    // A server that never answers: each call ends by its caller's deadline or cancel.
    const handlers: HealthServer = { check: () => {}, watch: () => {} }
    server.addService(HealthService, handlers)
    const port = await new Promise<number>((res, rej) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
    )
    client = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure())
  })
  afterAll(() => {
    client.close()
    server.forceShutdown()
  })

  it('times the calls that end past their deadline or cancelled, not only those answered', async () => {
    const code = await new Promise<number | undefined>((resolve) =>
      client.check({ service: '' }, new Metadata(), { deadline: Date.now() + 200 }, (error) =>
        resolve(error?.code),
      ),
    )
    expect(code).toBe(status.DEADLINE_EXCEEDED)
    const stream = client.watch({ service: '' })
    stream.on('error', () => {})
    await new Promise((r) => setTimeout(r, 100))
    stream.cancel()
    let counts: Record<string, number> = {}
    for (let i = 0; i < 50 && Object.keys(counts).length < 2; i++) {
      await new Promise((r) => setTimeout(r, 20))
      counts = {
        ...(await timedCalls(metrics, 'grpc.health.v1.Health/Check')),
        ...(await timedCalls(metrics, 'grpc.health.v1.Health/Watch')),
      }
    }
    // DEADLINE_EXCEEDED when the server's deadline passed first, CANCELLED when the client's
    // (it cancels the call at its own deadline, which the server's follows by the trip's time).
    const check = await timedCalls(metrics, 'grpc.health.v1.Health/Check')
    expect(Object.entries(check)).toHaveLength(1)
    expect([{ DEADLINE_EXCEEDED: 1 }, { CANCELLED: 1 }]).toContainEqual(check)
    expect(await timedCalls(metrics, 'grpc.health.v1.Health/Watch')).toEqual({ CANCELLED: 1 })
  })
})
