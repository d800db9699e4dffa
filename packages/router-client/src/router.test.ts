import { describe, expect, it } from 'vitest'
import { FakeBroker } from '../test/fake-broker'
import { MqClient } from './client'
import { UnavailableError } from './index'

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
})
