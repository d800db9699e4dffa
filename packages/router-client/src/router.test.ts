import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { FakeBroker } from '../test/fake-broker'
import { MqClient } from './client'
import { ConnectionRefusedError, UnavailableError } from './index'

/** An address on loopback where nothing listens (a port bound, then closed). */
async function refusingAddress(): Promise<string> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return `127.0.0.1:${port}`
}

describe('Router', () => {
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
