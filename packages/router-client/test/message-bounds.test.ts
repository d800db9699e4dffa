import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MqClient } from '../src/client'
import { InvalidArgumentError } from '../src/index'
import { FakeBroker } from './fake-broker'

/** `n` distinct header names, each with a one-byte value. */
const headers = (n: number): Record<string, string> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`h${i}`, 'v']))

// A message the partition refuses whatever the queue's settings (a key or dedup key over 256 UTF-8
// bytes, more headers than HEADERS_PER_MESSAGE_MAX − 2) refuses its whole batch there. Sent, it
// joined a batch of valid messages: with later batches of the partition in flight (an idempotent
// producer pipelines up to 4), every send of that batch failed with its INVALID_ARGUMENT, which
// named another message (against a real server: 9 valid sends of 100 failed so, batchMax 10).
describe('producer: messages no partition takes', () => {
  const broker = new FakeBroker()
  let client: MqClient

  beforeAll(async () => {
    await broker.start()
    client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
  })
  afterAll(async () => {
    await client?.close()
    broker.stop()
  })

  it('are refused before sending, and the sends batched around them are stored', async () => {
    broker.addQueue('bounds', 1)
    const producer = client.producer('bounds', { batchMax: 10 })
    // Answered: the partition keeps pipelined batches in order, so later batches go in flight.
    await producer.send({ body: 'first' })
    const bad = [
      { key: 'k'.repeat(257) },
      { key: 'é'.repeat(129) }, // 258 UTF-8 bytes in 129 characters
      { dedupKey: 'd'.repeat(257) },
      { headers: headers(999) },
    ]
    const sends: Promise<unknown>[] = []
    const badAt = new Set<number>()
    for (let i = 0; i < 60; i++) {
      const wrong = i % 15 === 7 ? bad[(i - 7) / 15] : undefined
      if (wrong) badAt.add(i)
      sends.push(producer.send({ body: `m${i}`, ...wrong }))
    }
    const results = await Promise.allSettled(sends)
    for (const [i, r] of results.entries()) {
      if (!badAt.has(i)) {
        expect(r.status, `send ${i}`).toBe('fulfilled')
        continue
      }
      expect(r.status, `send ${i}`).toBe('rejected')
      const error = (r as PromiseRejectedResult).reason as Error
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(error.message).toMatch(/key|dedupKey|headers/)
    }
    const stored = broker.ready('bounds', 0).map((m) => new TextDecoder().decode(m.body))
    expect(stored).toEqual([
      'first',
      ...Array.from({ length: 60 }, (_, i) => `m${i}`).filter((_, i) => !badAt.has(i)),
    ])
    // At the limits: taken.
    await producer.send({
      body: 'edge',
      key: 'k'.repeat(256),
      dedupKey: 'é'.repeat(128),
      headers: headers(998),
    })
    await producer.close()
  })
})
