import { createServer as createHttpServer } from 'node:http'
import { createServer } from 'node:net'
import { describe, expect, it, vi } from 'vitest'
import { FakeBroker } from '../test/fake-broker'
import { MqClient } from './client'
import { ConnectionPool } from './connections'
import { ConnectionRefusedError, QueueNotFoundError, UnavailableError } from './index'
import { DEFAULT_ROUTER_OPTIONS, Router } from './router'

/** An address on loopback where nothing listens (a port bound, then closed). */
async function refusingAddress(): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `127.0.0.1:${port}`
}

describe('Router', () => {
  it('caches at most routesMax routes, forgetting the least recently used; a deleted queue’s goes', async () => {
    const broker = new FakeBroker()
    await broker.start()
    const pool = new ConnectionPool()
    const router = new Router(pool, {
      ...DEFAULT_ROUTER_OPTIONS,
      servers: [broker.leaderAddress],
      routesMax: 3,
    })
    try {
      for (let i = 0; i < 100; i++) broker.addQueue(`q${i}`, 1)
      const fetches = () => broker.routeRequests.length
      // A client of few queues fetches each route once, however often it uses them.
      for (let round = 0; round < 5; round++) for (const q of ['q0', 'q1', 'q2']) await router.route(q)
      expect(fetches()).toBe(3)
      // One that touches many names keeps only the last routesMax.
      for (let i = 0; i < 100; i++) await router.route(`q${i}`)
      expect(['q96', 'q97', 'q98', 'q99', 'q0'].map((q) => router.cachedRoute(q) !== undefined)).toEqual([
        false,
        true,
        true,
        true,
        false,
      ])
      // Least recently used, not first cached: q97, used again, outlives q98.
      await router.route('q97')
      await router.route('q5')
      expect(['q97', 'q98', 'q99', 'q5'].map((q) => router.cachedRoute(q) !== undefined)).toEqual([
        true,
        false,
        true,
        true,
      ])
      // A queue deleted: its refresh finds no route, and the cached one goes with it.
      const before = fetches()
      await router.meta((m) => m.deleteQueue, { name: 'q5' })
      await expect(router.route('q5', true)).rejects.toBeInstanceOf(QueueNotFoundError)
      expect(router.cachedRoute('q5')).toBeUndefined()
      expect(fetches() - before).toBe(1)
      expect(() => new Router(pool, { ...DEFAULT_ROUTER_OPTIONS, servers: ['x'], routesMax: 0 })).toThrow(
        /routesMax/,
      )
    } finally {
      router.close()
      pool.close()
      broker.stop()
    }
  })

  it('keeps one deadline for an operation, the route refresh in one of its attempts included', async () => {
    const broker = new FakeBroker()
    await broker.start()
    // Short backoffs: the send does not give up early, a backoff short of its deadline.
    const backoff = { initialMs: 10, maxMs: 50, multiplier: 2 }
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 1_000, backoff })
    try {
      broker.addQueue('q', 1)
      const producer = client.producer('q')
      await producer.send({ body: 'warm' }) // the route is cached
      // The queue is full for 600 ms (retriable: the send backs off); then the send's route is
      // stale, and the meta group has no leader: the refresh fails, attempt after attempt.
      broker.fullQueues.add('q')
      setTimeout(() => {
        broker.fullQueues.delete('q')
        broker.epoch++
        broker.failRoutesUntilMs = Date.now() + 10_000
      }, 600)
      const started = Date.now()
      const sent = producer.send({ body: 'x' })
      await expect(sent).rejects.toBeInstanceOf(UnavailableError)
      // Given up by the send's deadline: the refresh stops there too (it had a deadline of its
      // own, 1,000 ms from when it began, and the send gave up at ~1,600 ms).
      expect(Date.now() - started).toBeLessThan(1_300)
    } finally {
      broker.failRoutesUntilMs = 0
      await client.close()
      broker.stop()
    }
  })

  it("cuts an operation's last attempt to its deadline (one failing fast, then a silent leader)", async () => {
    const broker = new FakeBroker()
    await broker.start()
    // Short backoffs: the send retries until close to its deadline; attempts of 5 s (the default).
    const backoff = { initialMs: 10, maxMs: 50, multiplier: 2 }
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 1_000, backoff })
    try {
      broker.addQueue('q', 1)
      const producer = client.producer('q')
      await producer.send({ body: 'warm' }) // the route is cached
      // The queue is full (answered at once, retriable) for 900 ms; then its leader falls silent.
      broker.fullQueues.add('q')
      setTimeout(() => {
        broker.fullQueues.delete('q')
        broker.heldPartitions.add(0)
      }, 900)
      const started = Date.now()
      await expect(producer.send({ body: 'x' })).rejects.toBeInstanceOf(UnavailableError)
      // Its last attempt went at ~900 ms and was given the whole 5 s: it ended at ~5.9 s.
      expect(Date.now() - started).toBeLessThan(1_500)
    } finally {
      broker.releaseHeld()
      await client.close()
      broker.stop()
    }
  })

  it("cuts a Meta call's last attempt to its deadline (connect: no meta leader, then a silent one)", async () => {
    const broker = new FakeBroker()
    await broker.start()
    const backoff = { initialMs: 10, maxMs: 50, multiplier: 2 }
    try {
      broker.failRoutesUntilMs = Date.now() + 900
      setTimeout(() => {
        broker.silentRoutes = true
      }, 900)
      const started = Date.now()
      const failure = await MqClient.connect({
        servers: [broker.leaderAddress],
        deadlineMs: 1_000,
        backoff,
      }).catch((e: unknown) => e)
      expect(failure).toBeInstanceOf(UnavailableError)
      expect(Date.now() - started).toBeLessThan(1_500)
    } finally {
      broker.stop()
    }
  })

  it('gives up at once after its last attempt, without a backoff no attempt follows', async () => {
    const address = await refusingAddress()
    const random = vi.spyOn(Math, 'random').mockReturnValue(0.99)
    const pool = new ConnectionPool()
    const router = new Router(pool, {
      ...DEFAULT_ROUTER_OPTIONS,
      servers: [address],
      deadlineMs: 30_000,
      attemptsMax: 2,
      refusedGiveUpMs: 0,
      backoff: { initialMs: 3_000, maxMs: 3_000, multiplier: 1 },
    })
    try {
      const started = Date.now()
      const failure = await router.route('q').catch((e: unknown) => e)
      expect((failure as Error).message).toMatch(/^gave up after 2 attempts/)
      // One backoff (2.97 s: the draw is 0.99 of 3 s) between the two attempts, none after the
      // second (until 2026-12-07 it waited a second one before giving up).
      expect(Date.now() - started).toBeLessThan(5_000)
    } finally {
      random.mockRestore()
      router.close()
      pool.close()
    }
  })

  it('gives up once every attempt was refused a connection for refusedGiveUpMs', async () => {
    const address = await refusingAddress()
    const backoff = { initialMs: 25, maxMs: 1_000, multiplier: 2 }
    const started = Date.now()
    const failure = await MqClient.connect({
      servers: [address],
      deadlineMs: 10_000,
      refusedGiveUpMs: 600,
      backoff,
    }).catch((e: unknown) => e)
    const ms = Date.now() - started
    expect(failure).toBeInstanceOf(ConnectionRefusedError)
    expect((failure as ConnectionRefusedError).code).toBe('UNAVAILABLE')
    expect((failure as ConnectionRefusedError).connectionRefused).toBe(true)
    expect((failure as Error).message).toMatch(
      /connection refused on every attempt for \d+ ms .*ECONNREFUSED/,
    )
    expect(ms).toBeGreaterThanOrEqual(600)
    expect(ms).toBeLessThan(3_000)
    // Without it (the default), the same retries until a backoff would pass the deadline.
    const plain = await MqClient.connect({ servers: [address], deadlineMs: 900, backoff }).catch(
      (e: unknown) => e,
    )
    expect(plain).toBeInstanceOf(UnavailableError)
    expect(plain).not.toBeInstanceOf(ConnectionRefusedError)
    expect((plain as Error).message).toMatch(/^gave up after \d+ attempts/)
  })

  it('gives up after refusedGiveUpMs when every attempt met a server that does not speak HTTP/2', async () => {
    const http1 = createHttpServer((_req, res) => res.end('ok'))
    await new Promise<void>((resolve) => http1.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = http1.address() as { port: number }
      const started = Date.now()
      const failure = await MqClient.connect({
        servers: [`127.0.0.1:${port}`],
        deadlineMs: 10_000,
        refusedGiveUpMs: 600,
        backoff: { initialMs: 25, maxMs: 1_000, multiplier: 2 },
      }).catch((e: unknown) => e)
      expect(failure).toBeInstanceOf(ConnectionRefusedError)
      expect((failure as Error).message).toMatch(
        /^answered by a server that does not speak gRPC on every attempt for \d+ ms \(\d+ attempts; no gRPC server there\?\): .*Protocol error/,
      )
      expect(Date.now() - started).toBeLessThan(3_000)
    } finally {
      http1.closeAllConnections()
      await new Promise<void>((resolve) => http1.close(() => resolve()))
    }
  })

  it('keeps retrying past refusedGiveUpMs once an attempt met anything but a refusal', async () => {
    const broker = new FakeBroker()
    await broker.start()
    // Short backoffs: the send retries until close to its deadline.
    const backoff = { initialMs: 10, maxMs: 50, multiplier: 2 }
    const client = await MqClient.connect({
      servers: [broker.leaderAddress],
      deadlineMs: 1_000,
      refusedGiveUpMs: 200,
      backoff,
    })
    try {
      broker.addQueue('q', 1)
      // The meta group has no leader (answers, retriable): not refused, so the deadline holds.
      broker.failRoutesUntilMs = Date.now() + 10_000
      const started = Date.now()
      const failure = await client
        .producer('q')
        .send({ body: 'x' })
        .catch((e: unknown) => e)
      expect(failure).toBeInstanceOf(UnavailableError)
      expect(failure).not.toBeInstanceOf(ConnectionRefusedError)
      expect(Date.now() - started).toBeGreaterThanOrEqual(800)
    } finally {
      broker.failRoutesUntilMs = 0
      await client.close()
      broker.stop()
    }
  })
})
