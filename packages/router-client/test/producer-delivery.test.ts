import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { MqClient } from '../src/client'
import { SendTimeoutError, UnavailableError } from '../src/index'
import type { SendResult } from '../src/producer'
import { FakeBroker } from './fake-broker'

/** 'ended' once `p` settles, 'hung' if it has not within `ms` (a guard, not a timing measure). */
const endsWithin = (p: Promise<unknown>, ms: number): Promise<'ended' | 'hung'> =>
  Promise.race([p.then(() => 'ended' as const), new Promise<'hung'>((r) => setTimeout(() => r('hung'), ms))])

/** `promise`'s state, read after the pending callbacks ran. */
const state = async (promise: Promise<unknown>): Promise<'pending' | 'resolved' | 'rejected'> => {
  let s: 'pending' | 'resolved' | 'rejected' = 'pending'
  promise.then(
    () => {
      s = 'resolved'
    },
    () => {
      s = 'rejected'
    },
  )
  await new Promise((r) => setImmediate(r))
  return s
}

// A send's delivery timeout (sendTimeoutMs) and flush() under load.
describe('producer delivery', () => {
  const broker = new FakeBroker()
  let client: MqClient
  let queueNo = 0
  const freshQueue = (): string => {
    const q = `d${++queueNo}`
    broker.addQueue(q, 1)
    return q
  }
  beforeAll(async () => {
    await broker.start()
    client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 10_000 })
  })
  afterAll(async () => {
    await client.close()
    broker.stop()
  })
  afterEach(() => broker.releaseHeld())
  const bodies = (q: string) => broker.ready(q, 0).map((m) => new TextDecoder().decode(m.body))

  it('times out the sends still unsent after sendTimeoutMs, gives their room back, and leaves the batches in flight to their outcome (idempotent order kept)', async () => {
    const q = freshQueue()
    const producer = client.producer(q, { batchMax: 1, bufferMax: 5, sendTimeoutMs: 300 })
    await producer.send({ body: 'warm' }) // the route, and pipelining learned
    broker.heldPartitions.add(0)
    // 4 one-message batches in flight (inFlightMax), 1 in the lane's queue, 1 waiting for room.
    const sends = Array.from({ length: 6 }, (_, i) => producer.send({ body: `m${i}` }))
    const [inFlight, unsent] = [sends.slice(0, 4), sends.slice(4)]
    for (const send of unsent) {
      await expect(send).rejects.toBeInstanceOf(SendTimeoutError)
      await expect(send).rejects.toBeInstanceOf(UnavailableError)
      await expect(send).rejects.toMatchObject({ retriable: true, timedOut: true })
    }
    // The batches sent are the broker's: still waiting for its answer.
    for (const send of inFlight) expect(await state(send)).toBe('pending')
    // The room of the two that timed out is free: a new send is taken at once.
    const after = producer.send({ body: 'after' })
    broker.releaseHeld()
    const results = (await Promise.all([...inFlight, after])) as SendResult[]
    expect(results.every((r) => !r.duplicate)).toBe(true)
    expect(bodies(q)).toEqual(['warm', 'm0', 'm1', 'm2', 'm3', 'after'])
    await producer.close()
  })

  it('times out by default at twice the client deadline', async () => {
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 150 })
    try {
      const q = freshQueue()
      const producer = c.producer(q, { batchMax: 1, inFlightMax: 1 })
      await producer.send({ body: 'warm' })
      broker.heldPartitions.add(0)
      const started = Date.now()
      // A batch in flight ends at the deadline from its sending (150 ms), and the next goes:
      // the last send waits unsent behind three, the third of which would go at ~300 ms.
      const ahead = ['in flight', 'second', 'third'].map((body) =>
        producer.send({ body }).catch((e: unknown) => e),
      )
      const queued = producer.send({ body: 'queued' })
      await expect(queued).rejects.toBeInstanceOf(SendTimeoutError)
      expect(Date.now() - started).toBeGreaterThanOrEqual(290)
      broker.releaseHeld()
      await Promise.all(ahead)
    } finally {
      await c.close()
    }
  })

  it('flush() waits for the sends made before it, not for those that keep coming', async () => {
    const q = freshQueue()
    const producer = client.producer(q)
    let stop = false
    const senders = Array.from({ length: 4 }, async () => {
      while (!stop) await producer.send({ body: 'busy' })
    })
    const marked = producer.send({ body: 'before flush' })
    let markedDone = false
    void marked.then(() => {
      markedDone = true
    })
    // Before, flush() waited for an empty buffer: for ever under steady sends.
    expect(await endsWithin(producer.flush(), 5_000)).toBe('ended')
    expect(markedDone).toBe(true)
    stop = true
    await Promise.all(senders)
    await producer.close()
  })

  it('flush() waits for a send made before it that is still in flight', async () => {
    const q = freshQueue()
    const producer = client.producer(q)
    await producer.send({ body: 'warm' })
    broker.heldPartitions.add(0)
    const send = producer.send({ body: 'held' })
    const flushed = producer.flush()
    await new Promise((r) => setTimeout(r, 50))
    expect(await state(flushed)).toBe('pending')
    broker.releaseHeld()
    await flushed
    expect(await state(send)).toBe('resolved')
  })
})
