import { credentials, Server, ServerCredentials, type ServiceError } from '@grpc/grpc-js'
import { HealthClient, HealthService, HealthCheckResponse_ServingStatus as Serving } from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HealthRegistry } from './health'

describe('HealthRegistry over gRPC', () => {
  const registry = new HealthRegistry()
  const server = new Server()
  let client: HealthClient

  beforeAll(async () => {
    server.addService(HealthService, registry.handlers())
    const port = await new Promise<number>((res, rej) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
    )
    client = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure())
  })
  afterAll(() => {
    registry.close()
    client.close()
    server.forceShutdown()
  })

  const check = (service: string) =>
    new Promise<{ status?: Serving; error?: ServiceError }>((resolve) =>
      client.check({ service }, (error, r) => resolve(error ? { error } : { status: r.status })),
    )

  it('answers Check and follows status changes', async () => {
    expect((await check('')).status).toBe(Serving.NOT_SERVING)
    registry.set('', true)
    expect((await check('')).status).toBe(Serving.SERVING)
    expect((await check('mq.v1.Nope')).error?.code).toBe(5)
  })

  it('streams changes to a watcher', async () => {
    registry.set('mq.v1.Queue', false)
    const seen: Serving[] = []
    const stream = client.watch({ service: 'mq.v1.Queue' })
    stream.on('error', () => {}) // the CANCELLED status that our own cancel() causes
    await new Promise<void>((resolve) => {
      stream.on('data', (r: { status: Serving }) => {
        seen.push(r.status)
        if (seen.length === 1) registry.set('mq.v1.Queue', true)
        if (seen.length === 2) resolve()
      })
    })
    stream.cancel()
    expect(seen).toEqual([Serving.NOT_SERVING, Serving.SERVING])
  })
})
