import { Server, ServerCredentials } from '@grpc/grpc-js'
import { HealthCheckResponse_ServingStatus, HealthService } from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { grpcFloor } from './grpc-floor'

describe('grpcFloor', () => {
  const server = new Server()
  let address = ''
  let checks = 0

  beforeAll(async () => {
    server.addService(HealthService, {
      check: (_call: unknown, cb: (e: null, r: { status: HealthCheckResponse_ServingStatus }) => void) => {
        checks++
        cb(null, { status: HealthCheckResponse_ServingStatus.SERVING })
      },
      watch: () => {},
    })
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    )
    address = `127.0.0.1:${port}`
  })
  afterAll(() => {
    server.forceShutdown()
  })

  it('times the asked number of health checks one at a time, after a warm-up', async () => {
    const rtt = await grpcFloor(address, 50)
    expect(rtt.count).toBe(50)
    expect(checks).toBeGreaterThan(50)
    const s = rtt.summary()
    expect(s.p50).toBeGreaterThan(0)
    expect(s.max).toBeGreaterThanOrEqual(s.p50)
  })

  it('fails when the server takes the call and never answers, by its deadline', async () => {
    const silent = new Server()
    silent.addService(HealthService, { check: () => {}, watch: () => {} })
    const port = await new Promise<number>((resolve, reject) =>
      silent.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    )
    try {
      const started = performance.now()
      await expect(grpcFloor(`127.0.0.1:${port}`, 1, 300)).rejects.toThrow(/deadline/i)
      expect(performance.now() - started).toBeLessThan(3_000)
    } finally {
      silent.forceShutdown()
    }
  })

  it('fails when the server is not there', async () => {
    await expect(grpcFloor('127.0.0.1:1', 1)).rejects.toThrow()
  })
})
