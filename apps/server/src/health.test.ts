import {
  Client,
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServiceError,
  status,
} from '@grpc/grpc-js'
import { HealthClient, HealthService, HealthCheckResponse_ServingStatus as Serving } from '@mq/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HealthRegistry, remoteAddress } from './health'

/** `registry`'s service on a free loopback port, and a client of it; `close` ends all three. */
async function served(registry: HealthRegistry) {
  const server = new Server()
  server.addService(HealthService, registry.handlers())
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  )
  const client = new HealthClient(`127.0.0.1:${port}`, credentials.createInsecure())
  const close = () => {
    registry.close()
    client.close()
    server.forceShutdown()
  }
  return { port, client, close }
}

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

  it('names an unknown service of any length in a status the caller can read', async () => {
    // Echoed whole, a name of 100 KB made a grpc-message header past the client's bound: the
    // caller's call hung until its deadline, and its connection stopped answering.
    const long = `mq.v1.${'x'.repeat(100_000)}`
    const deadline = new Date(Date.now() + 5_000)
    const error = await new Promise<ServiceError | undefined>((resolve) =>
      client.check({ service: long }, new Metadata(), { deadline }, (e) => resolve(e ?? undefined)),
    )
    expect(error?.code).toBe(status.NOT_FOUND)
    expect(error?.details).toMatch(/^unknown service mq\.v1\.x+… \(100022 chars\)$/)
    expect(error?.details.length).toBeLessThan(1_100)
    expect((await check('')).status).toBeDefined()
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

describe('HealthRegistry bounds on Watch streams', () => {
  it('refuses a watcher past the bound per remote address, naming it, and frees the slot a cancel ends', async () => {
    const registry = new HealthRegistry({ watchersMax: 10, watchersPerAddressMax: 2 })
    const { client, close } = await served(registry)
    try {
      /** Opens a Watch: its first status, or the error that ended it. */
      const watch = () => {
        const stream = client.watch({ service: '' })
        const first = new Promise<Serving | ServiceError>((resolve) => {
          stream.once('data', (r: { status: Serving }) => resolve(r.status))
          stream.once('error', (e: ServiceError) => resolve(e))
        })
        return { stream, first }
      }
      const [a, b] = [watch(), watch()]
      expect([await a.first, await b.first]).toEqual([Serving.NOT_SERVING, Serving.NOT_SERVING])
      const third = (await watch().first) as ServiceError
      expect(third.code).toBe(status.RESOURCE_EXHAUSTED)
      expect(third.details).toMatch(/too many health watchers from 127\.0\.0\.1 \(2 open\)/)
      a.stream.on('error', () => {}) // the CANCELLED status of our own cancel()
      a.stream.cancel()
      // The server learns of the cancel a moment later.
      let next = await watch().first
      for (let i = 0; i < 50 && next !== Serving.NOT_SERVING; i++) {
        await new Promise((r) => setTimeout(r, 20))
        next = await watch().first
      }
      expect(next).toBe(Serving.NOT_SERVING)
    } finally {
      close()
    }
  })
})

describe('HealthRegistry and long service names', () => {
  it('refuses a Watch of a service name longer than any service has, instead of keeping it open', async () => {
    // A Watch stream keeps its request while open, and the health service asks no token: 40
    // Watches of 32-MiB names from one client raised a node's RSS from 0.7 to 2.7 GB, for as long
    // as that client kept them (100 per address, 1,000 in all, each up to 64 MiB).
    const registry = new HealthRegistry()
    const { client, close } = await served(registry)
    try {
      const first = (service: string) => {
        const stream = client.watch({ service })
        stream.on('error', () => {})
        return new Promise<Serving | ServiceError>((resolve) => {
          stream.once('data', (r: { status: Serving }) => {
            stream.cancel()
            resolve(r.status)
          })
          stream.once('error', (e: ServiceError) => resolve(e))
        })
      }
      const refused = (await first(`mq.v1.${'x'.repeat(100_000)}`)) as ServiceError
      expect(refused.code).toBe(status.INVALID_ARGUMENT)
      expect(refused.details).toMatch(/service name of 100006 characters/)
      // A short unknown name is watched as the protocol says (SERVICE_UNKNOWN, kept open).
      expect(await first('mq.v1.Nope')).toBe(Serving.SERVICE_UNKNOWN)
      expect(await first('')).toBe(Serving.NOT_SERVING)
    } finally {
      close()
    }
  })
})

describe('HealthRegistry and malformed requests', () => {
  it('answers bytes that are not a HealthCheckRequest with INVALID_ARGUMENT naming the problem, and goes on serving', async () => {
    const registry = new HealthRegistry()
    registry.set('', true)
    const { port, client, close } = await served(registry)
    const raw = new Client(`127.0.0.1:${port}`, credentials.createInsecure())
    const same = (b: Buffer) => b
    // A length past the end of the message: the generated decoder threw, and grpc-js answered
    // INTERNAL "Error deserializing request", as for a fault of the server.
    const garbage = Buffer.from([0x0a, 0x05, 0x61])
    try {
      const checked = await new Promise<ServiceError | null>((resolve) =>
        raw.makeUnaryRequest('/grpc.health.v1.Health/Check', same, same, garbage, (e) => resolve(e)),
      )
      expect(checked?.code).toBe(status.INVALID_ARGUMENT)
      expect(checked?.details).toMatch(/^HealthCheckRequest: not a valid protobuf encoding/)
      const watched = await new Promise<ServiceError | undefined>((resolve) => {
        const stream = raw.makeServerStreamRequest('/grpc.health.v1.Health/Watch', same, same, garbage)
        stream.on('data', () => resolve(undefined))
        stream.on('error', (e: ServiceError) => resolve(e))
      })
      expect(watched?.code).toBe(status.INVALID_ARGUMENT)
      expect(watched?.details).toMatch(/^HealthCheckRequest: not a valid protobuf encoding/)
      const after = await new Promise<Serving | undefined>((resolve) =>
        client.check({ service: '' }, (e, r) => resolve(e ? undefined : r.status)),
      )
      expect(after).toBe(Serving.SERVING)
    } finally {
      raw.close()
      close()
    }
  })
})

describe('remoteAddress (Watch streams counted per address)', () => {
  it('drops the port and counts an IPv6 peer as its /64, as the connection caps do', () => {
    expect(remoteAddress('127.0.0.1:5000')).toBe('127.0.0.1')
    expect(remoteAddress('[2001:db8:0:1::a]:5000')).toBe('2001:db8:0:1::/64')
    expect(remoteAddress('[2001:db8:0:1:ffff::b]:6000')).toBe('2001:db8:0:1::/64')
    expect(remoteAddress('[::ffff:10.0.0.1]:5000')).toBe('10.0.0.1')
  })
})
