import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { MqClient } from '../src/client'
import { InvalidArgumentError, LimitExceededError } from '../src/index'
import { FakeBroker } from './fake-broker'

const TOO_LONG = 2 ** 31 // past what a Node timer takes (it would fire after ~1 ms)

// Options are checked when the client, producer, consumer or consume loop is made: a RangeError
// naming the option and the value; undefined takes the default; Infinity is "no limit" where
// it means something.
describe('options', () => {
  const broker = new FakeBroker()
  let client: MqClient
  let queueNo = 0
  const freshQueue = (partitions = 1): string => {
    const q = `o${++queueNo}`
    broker.addQueue(q, partitions)
    return q
  }
  beforeAll(async () => {
    await broker.start()
    client = await MqClient.connect({ servers: [broker.leaderAddress] })
  })
  afterAll(async () => {
    await client.close()
    broker.stop()
  })

  it('refuses client options out of range before connecting', async () => {
    const servers = [broker.leaderAddress]
    const bad = [
      [{ deadlineMs: Number.NaN }, /deadlineMs must be an integer from 1 to 2147483647, got NaN/],
      [{ deadlineMs: -1 }, /deadlineMs .* got -1/],
      [{ attemptMs: Number.NaN }, /attemptMs .* got NaN/],
      [{ attemptMs: TOO_LONG }, /attemptMs .* got 2147483648/],
      [{ leaderSilenceMs: -1 }, /leaderSilenceMs/],
      [{ refusedGiveUpMs: 0.5 }, /refusedGiveUpMs/],
      [{ backoff: { initialMs: Number.NaN, maxMs: 1, multiplier: 2 } }, /backoff.initialMs .* got NaN/],
      [{ backoff: { initialMs: 10, maxMs: 5, multiplier: 2 } }, /backoff.maxMs .* got 5/],
      [{ backoff: { initialMs: 10, maxMs: 50, multiplier: 0.5 } }, /backoff.multiplier/],
    ] as const
    const unhandled = vi.fn()
    process.on('unhandledRejection', unhandled)
    try {
      for (const [options, message] of bad) {
        await expect(MqClient.connect({ servers, ...options })).rejects.toThrow(RangeError)
        await expect(MqClient.connect({ servers, ...options })).rejects.toThrow(message)
      }
      await new Promise((r) => setImmediate(r))
      expect(unhandled).not.toHaveBeenCalled()
    } finally {
      process.off('unhandledRejection', unhandled)
    }
    // Undefined is the default.
    const c = await MqClient.connect({ servers, deadlineMs: undefined, attemptMs: undefined })
    await c.close()
  })

  it('refuses servers that are not an array of addresses, naming the option, before any call', async () => {
    // A string has a length: its characters were taken for seed addresses, and connect failed
    // with a transport error about the first of them ("Received HTTP status code 404").
    for (const servers of [broker.leaderAddress, [broker.leaderAddress, ''], [7001], undefined]) {
      const failure = await MqClient.connect({ servers: servers as unknown as string[] }).catch(
        (e: unknown) => e,
      )
      expect(failure).toBeInstanceOf(InvalidArgumentError)
      expect((failure as Error).message).toMatch(
        /^servers: give an array of seed addresses \(host:port\), got /,
      )
    }
  })

  it('refuses consumer and producer options out of range, naming them', async () => {
    const q = freshQueue()
    const consumerBad = [
      [{ visibilityMs: -1 }, /consumer option visibilityMs .* got -1/],
      // The server takes up to 12 h (0: the queue's); it refused longer, failing the consumer.
      [
        { visibilityMs: 13 * 3_600_000 },
        /consumer option visibilityMs must be an integer from 0 to 43200000/,
      ],
      [{ waitMs: Number.NaN }, /consumer option waitMs .* got NaN/],
      [{ waitMs: -5 }, /consumer option waitMs/],
      [{ extendMaxMs: -1 }, /consumer option extendMaxMs/],
      [{ prefetch: 1e9 }, /consumer option prefetch must be an integer from 1 to 100000, got 1000000000/],
      [{ autoExtend: 'yes' as unknown as boolean }, /consumer option autoExtend/],
      [
        { consumerId: 'é'.repeat(129) },
        /consumer option consumerId is 258 UTF-8 bytes long; the limit is 256/,
      ],
    ] as const
    for (const [options, message] of consumerBad) expect(() => client.consumer(q, options)).toThrow(message)
    const producerBad = [
      [{ lingerMs: -1 }, /producer option lingerMs .* got -1/],
      [{ lingerMs: Number.NaN }, /producer option lingerMs .* got NaN/],
      [
        { lingerMs: TOO_LONG },
        /producer option lingerMs must be an integer from 0 to 2147483647 or Infinity/,
      ],
      [{ sendTimeoutMs: 0 }, /producer option sendTimeoutMs/],
      [{ sendTimeoutMs: TOO_LONG }, /producer option sendTimeoutMs/],
      [{ stallMs: Number.NaN }, /producer option stallMs/],
      [{ idempotent: 'no' as unknown as boolean }, /producer option idempotent/],
    ] as const
    for (const [options, message] of producerBad) expect(() => client.producer(q, options)).toThrow(message)
    expect(client.openHandles).toBe(0)
    // The bound itself is taken.
    await client.consumer(q, { consumerId: 'é'.repeat(128) }).close()
  })

  it('takes an undefined option as its default (idempotent, waitMs)', async () => {
    const q = freshQueue()
    const producer = client.producer(q, { idempotent: undefined })
    expect(producer.producerId).not.toBe('')
    await producer.close()
    const consumer = client.consumer(q, { waitMs: undefined, autoExtend: undefined })
    const reading = (async () => {
      for await (const _ of consumer) {
      }
    })()
    const before = broker.leaseRequests.length
    await vi.waitFor(() => expect(broker.leaseRequests.length).toBeGreaterThan(before))
    expect(broker.leaseRequests.at(-1)?.waitMs).toBe(5_000)
    await consumer.close()
    await reading
  })

  it('checks consume options before it makes its consumer: a refused one leaves nothing open', async () => {
    const q = freshQueue()
    const before = client.openHandles
    await expect(client.consume(q, () => {}, { closeTimeoutMs: -1 })).rejects.toThrow(
      /closeTimeoutMs .* got -1/,
    )
    await expect(client.consume(q, () => {}, { closeTimeoutMs: TOO_LONG })).rejects.toThrow(RangeError)
    await expect(client.consume(q, () => {}, { concurrency: 0 })).rejects.toThrow(/concurrency/)
    // As consumer() takes it: a string is refused (not made a number), and named as given.
    for (const prefetch of ['64', 'many'])
      await expect(client.consume(q, () => {}, { prefetch: prefetch as unknown as number })).rejects.toThrow(
        `consumer option prefetch must be an integer from 1 to 100000, got ${prefetch}`,
      )
    expect(client.openHandles).toBe(before)
  })

  it('waits for ever with closeTimeoutMs: Infinity (a too-long timer fired at once)', async () => {
    const q = freshQueue()
    await client.producer(q).send({ body: 'x' })
    let release!: () => void
    let started = false
    const sub = await client.consume(
      q,
      async () => {
        started = true
        await new Promise<void>((r) => {
          release = r
        })
      },
      { closeTimeoutMs: Number.POSITIVE_INFINITY, waitMs: 50 },
    )
    await vi.waitFor(() => expect(started).toBe(true))
    let closed = false
    const closing = sub.close().then(() => {
      closed = true
    })
    await new Promise((r) => setTimeout(r, 100))
    expect(closed).toBe(false)
    release()
    await closing
    expect(broker.ready(q, 0)).toHaveLength(0)
    expect(broker.leasedCount).toBe(0)
  })

  it('lingers for ever with lingerMs: Infinity: a batch goes when full or flushed', async () => {
    const q = freshQueue()
    const producer = client.producer(q, { lingerMs: Number.POSITIVE_INFINITY, batchMax: 3 })
    const sends = [producer.send({ body: 'a' }), producer.send({ body: 'b' })]
    await new Promise((r) => setTimeout(r, 50))
    expect(broker.ready(q, 0)).toHaveLength(0)
    await producer.flush()
    await Promise.all(sends)
    expect(broker.ready(q, 0)).toHaveLength(2)
    // A full batch goes at once.
    await Promise.all(['c', 'd', 'e'].map((body) => producer.send({ body })))
    expect(broker.ready(q, 0)).toHaveLength(5)
  })

  it('with lingerMs: Infinity, sends partial batches while sends wait for room (no batch could fill)', async () => {
    const stored = (q: string, partitions: number) =>
      Array.from({ length: partitions }, (_, p) => broker.ready(q, p).length).reduce((a, b) => a + b, 0)
    // bufferMax below batchMax: no batch can fill before the buffer does.
    const q = freshQueue()
    const small = client.producer(q, { lingerMs: Number.POSITIVE_INFINITY, bufferMax: 10, batchMax: 20 })
    const sends = Promise.allSettled(Array.from({ length: 20 }, (_, i) => small.send({ body: `m${i}` })))
    // Those the buffer held go for the sends waiting for room (they waited for ever: timed out).
    // (Waited for, not slept on: a fixed 200 ms was too short on a loaded machine.)
    await vi.waitFor(() => expect(stored(q, 1)).toBeGreaterThanOrEqual(10), { timeout: 5_000, interval: 10 })
    await small.flush() // the rest: a partial batch, which lingers until flushed
    expect((await sends).filter((r) => r.status === 'rejected')).toEqual([])
    expect(stored(q, 1)).toBe(20)
    // A buffer filled by partial batches, with no send waiting yet: they go at once.
    const filled = Promise.allSettled(Array.from({ length: 10 }, (_, i) => small.send({ body: `n${i}` })))
    await vi.waitFor(() => expect(stored(q, 1)).toBe(30), { timeout: 5_000, interval: 10 })
    expect((await filled).filter((r) => r.status === 'rejected')).toEqual([])
    // A producer whose sends never wait (waitingMax 0): the full buffer's partial batch goes
    // when a send is refused for room, so room comes back.
    const q2 = freshQueue()
    const never = client.producer(q2, {
      lingerMs: Number.POSITIVE_INFINITY,
      bufferMax: 2,
      batchMax: 10,
      waitingMax: 0,
    })
    const two = Promise.allSettled([never.send({ body: 'a' }), never.send({ body: 'b' })])
    await expect(never.send({ body: 'c' })).rejects.toThrow(LimitExceededError)
    expect((await two).filter((r) => r.status === 'rejected')).toEqual([])
    expect(stored(q2, 1)).toBe(2)
    // Keyed sends spread over 4 partitions: the buffer fills with 4 partial batches.
    const spread = freshQueue(4)
    const keyed = client.producer(spread, {
      lingerMs: Number.POSITIVE_INFINITY,
      bufferMax: 100,
      batchMax: 50,
    })
    const all = Promise.allSettled(
      Array.from({ length: 400 }, (_, i) => keyed.send({ body: `k${i}`, key: `k${i}` })),
    )
    await vi.waitFor(() => expect(stored(spread, 4)).toBeGreaterThanOrEqual(300), {
      timeout: 5_000,
      interval: 10,
    })
    await keyed.flush()
    expect((await all).filter((r) => r.status === 'rejected')).toEqual([])
    expect(stored(spread, 4)).toBe(400)
  })
})
