import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { Server, ServerCredentials } from '@grpc/grpc-js'
import { MetaService } from '@mq/protocol'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { MqClient } from '../src/client'
import type { Consumer } from '../src/consumer'
import type { Delivery } from '../src/delivery'
import {
  type AttemptReport,
  ClientClosedError,
  ErrorCode,
  InvalidArgumentError,
  LimitExceededError,
  QueueNotFoundError,
  SendOutcomeUnknownError,
  UnavailableError,
} from '../src/index'
import type { OutgoingMessage } from '../src/producer'
import { FakeBroker } from './fake-broker'

// The SDK against an in-process stand-in of a cluster (real gRPC over loopback). The
// end-to-end suite against real mq-server processes lives with the server.
describe('MqClient', () => {
  const broker = new FakeBroker()
  let client: MqClient
  let queueNo = 0
  let queue = ''

  beforeAll(async () => {
    await broker.start()
    client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
  })
  afterAll(async () => {
    await client?.close()
    broker.stop()
  })
  afterEach(() => {
    broker.routedLeader = 'leader'
    broker.calls.length = 0
  })
  const freshQueue = (partitions = 1, visibilityMs = 30_000): string => {
    queue = `q${++queueNo}`
    broker.addQueue(queue, partitions, visibilityMs)
    return queue
  }

  it('batches concurrent sends and resolves each with its own id', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { lingerMs: 20, batchMax: 64 })
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => producer.send({ body: `m${i}` })))
    expect(new Set(results.map((r) => r.id)).size).toBe(100)
    const produceCalls = broker.calls.filter((c) => c.startsWith('produce:'))
    expect(produceCalls).toEqual(['produce:64', 'produce:36'])
    expect(broker.ready(q, 0).map((m) => new TextDecoder().decode(m.body))).toEqual(
      Array.from({ length: 100 }, (_, i) => `m${i}`),
    )
  })

  /** Two sends with the route's leader at `routed`: both stored, and how many route fetches. */
  const twoSends = async (routed: FakeBroker['routedLeader']): Promise<number> => {
    const q = freshQueue(1)
    broker.routedLeader = routed
    const producer = client.producer(q)
    await producer.send({ body: 'a' })
    await producer.send({ body: 'b' })
    expect(broker.ready(q, 0)).toHaveLength(2)
    return broker.calls.filter((c) => c === 'getRoutes').length
  }

  it('follows a NOT_LEADER redirect in one hop', async () => {
    // One route fetch; the hint then sticks in the cache, so the second send goes straight.
    expect(await twoSends('follower')).toBe(1)
  })

  /** A client reporting its attempts into `reports`. */
  const traced = (reports: AttemptReport[]) =>
    MqClient.connect({ servers: [broker.leaderAddress], onAttempt: (r) => reports.push(r) })

  it('starts the next operation at the replica that served the last one, not at a dead first replica', async () => {
    const q = freshQueue(1)
    broker.routedLeader = 'dead'
    const reports: AttemptReport[] = []
    const c = await traced(reports)
    try {
      const producer = c.producer(q)
      await producer.send({ body: 'a' })
      await producer.send({ body: 'b' })
      await producer.send({ body: 'c' })
    } finally {
      await c.close()
    }
    expect(broker.ready(q, 0)).toHaveLength(3)
    expect(reports.filter((r) => r.kind === 'partition' && r.address === broker.deadAddress)).toHaveLength(1)
  })

  it('asks another replica when one knows no leader (just restarted), instead of asking it again', async () => {
    const q = freshQueue(1)
    broker.routedLeader = 'lost'
    const reports: AttemptReport[] = []
    const c = await traced(reports)
    const started = Date.now()
    try {
      await c.producer(q).send({ body: 'a' })
    } finally {
      await c.close()
    }
    expect(Date.now() - started).toBeLessThan(1_000)
    const data = reports.filter((r) => r.kind === 'partition')
    expect(data.map((r) => r.address)).toEqual([broker.lostAddress, broker.leaderAddress])
  })

  it('reports every attempt to onAttempt: a redirect, then the one served', async () => {
    const q = freshQueue(1)
    broker.routedLeader = 'follower'
    const reports: AttemptReport[] = []
    const traced = await MqClient.connect({
      servers: [broker.leaderAddress],
      onAttempt: (r) => reports.push(r),
    })
    try {
      await traced.producer(q).send({ body: 'a' })
    } finally {
      await traced.close()
    }
    const data = reports.filter((r) => r.kind === 'partition')
    expect(data.map((r) => [r.address, r.error?.split(':')[0], r.servedBy])).toEqual([
      [broker.followerAddress, 'NOT_LEADER', undefined],
      [broker.leaderAddress, undefined, broker.leaderAddress],
    ])
    expect(data.every((r) => r.queue === q && r.partition === 0 && r.ms >= 0)).toBe(true)
    // The connect call and the route fetch are Meta attempts.
    expect(reports.filter((r) => r.kind === 'meta' && r.error === undefined).length).toBeGreaterThanOrEqual(2)
  })

  it('refreshes its route on STALE_ROUTE and retries', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await producer.send({ body: 'a' })
    broker.epoch++
    await producer.send({ body: 'b' })
    expect(broker.ready(q, 0)).toHaveLength(2)
    expect(broker.calls.filter((c) => c === 'getRoutes')).toHaveLength(2)
  })

  it('asks the other replicas when the leader it knows holds no replica any more, before refreshing its route', async () => {
    // No second route fetch: the meta group need not be up for the partition to be found.
    expect(await twoSends('former')).toBe(1)
  })

  it('fetches its route again once every address it names failed (the group moved, or came back elsewhere)', async () => {
    const q = freshQueue(1)
    const live = broker.leaderAddress
    // The route names only addresses where nothing answers; GetRoutes then names the live leader.
    broker.routedLeader = 'dead'
    broker.leaderAddress = broker.deadAddress
    try {
      const sent = client.producer(q).send({ body: 'a' })
      await new Promise((r) => setTimeout(r, 100))
      broker.routedLeader = 'leader'
      broker.leaderAddress = live
      await sent
    } finally {
      broker.leaderAddress = live
    }
    expect(broker.ready(q, 0)).toHaveLength(1)
    expect(broker.calls.filter((c) => c === 'getRoutes').length).toBeGreaterThanOrEqual(2)
  })

  it('retries a batch whose reply was lost without enqueuing it twice (idempotence)', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { idempotent: true })
    broker.dropProduceReplies = 1
    const r = await producer.send({ body: 'once' })
    expect(r.duplicate).toBe(true)
    expect(broker.ready(q, 0).map((m) => m.id)).toEqual([r.id])
  })

  it('keeps several idempotent batches in flight and enqueues them in order when a later one overtakes', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { batchMax: 1, inFlightMax: 3 })
    await producer.send({ body: 'm0' }) // the partition's answer: it keeps pipelined batches in order
    broker.heldSequences.add(2)
    const sends = ['m1', 'm2', 'm3'].map((body) => producer.send({ body }))
    // 3 and 4 reach the broker while 2 is held: refused (retriable), retried after a backoff.
    await waitFor(() => broker.calls.includes('gap:3') && broker.calls.includes('gap:4'))
    expect(broker.calls.filter((c) => c.startsWith('produce:')).length).toBeGreaterThanOrEqual(4)
    broker.releaseHeld()
    const results = await Promise.all(sends)
    expect(results.map((r) => r.duplicate)).toEqual([false, false, false])
    expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(['m0', 'm1', 'm2', 'm3'])
    expect(results.map((r) => r.id)).toEqual(
      broker
        .ready(q, 0)
        .slice(1)
        .map((m) => m.id),
    )
  })

  it('keeps one idempotent batch in flight towards a partition that does not keep pipelined batches in order', async () => {
    const q = freshQueue(1)
    broker.pipelining = false // an older broker, or a cluster still being upgraded
    try {
      const producer = client.producer(q, { batchMax: 1, inFlightMax: 4 })
      await producer.send({ body: 'm0' })
      broker.sequenceLog.length = 0
      broker.heldSequences.add(2)
      const sends = ['m1', 'm2', 'm3'].map((body) => producer.send({ body }))
      await waitFor(() => broker.calls.includes('held:2'))
      // 3 and 4 wait in the producer: nothing else reaches the broker while 2 is held.
      for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve))
      expect(broker.sequenceLog.filter((c) => c.seq > 2)).toEqual([])
      broker.releaseHeld()
      await Promise.all(sends)
      expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(['m0', 'm1', 'm2', 'm3'])
      expect(broker.calls.filter((c) => c.startsWith('gap:'))).toEqual([])
    } finally {
      broker.pipelining = true
    }
  })

  it('sends a batch beside others in flight only when it is full', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { batchMax: 4, inFlightMax: 3 })
    await producer.send({ body: '0' }) // the partition's answer: it keeps pipelined batches in order
    broker.heldSequences.add(2)
    const first = producer.send({ body: 'a' })
    await waitFor(() => broker.calls.includes('held:2'))
    const partial = [producer.send({ body: 'b' }), producer.send({ body: 'c' })]
    // A partial batch's dispatch runs in the next turn (setImmediate): let two turns pass.
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve))
    expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual(['produce:1', 'produce:1']) // 2 wait: not a full batch
    const more = [producer.send({ body: 'd' }), producer.send({ body: 'e' })]
    await waitFor(() => broker.calls.includes('produce:4'))
    broker.releaseHeld()
    await Promise.all([first, ...partial, ...more])
    expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(['0', 'a', 'b', 'c', 'd', 'e'])
    // The 4 went as one batch (refused once as a gap while 1 was held, then retried), never b, c alone.
    expect(broker.calls).not.toContain('produce:2')
  })

  it('keeps the sequences in flight within the batches a broker remembers while a lost reply is retried', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { batchMax: 1, inFlightMax: 4 })
    await producer.send({ body: 'm0' }) // the partition's answer: it keeps pipelined batches in order
    broker.sequenceLog.length = 0
    broker.loseReplies.set(2, 3) // batch 2 is stored, but its first three replies are lost
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) => producer.send({ body: `m${i + 1}` })),
    )
    expect(results.map((r) => r.duplicate)).toEqual([true, ...Array(11).fill(false)])
    expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(Array.from({ length: 13 }, (_, i) => `m${i}`))
    // Batches 3-6 were answered while 2 was retried, but 7 went only once 2 was answered:
    // 2..6 span the 5 batches a broker remembers, and 2's retry must find its batch there.
    const log = broker.sequenceLog
    const twoAnswered = log.findIndex((c) => c.seq === 2 && c.answered)
    expect(log.findIndex((c) => c.seq === 6)).toBeLessThan(twoAnswered)
    expect(log.findIndex((c) => c.seq === 7)).toBeGreaterThan(twoAnswered)
  })

  it('says a sent batch whose replies were all lost may have been stored (SendOutcomeUnknownError)', async () => {
    const q = freshQueue(1)
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 500 })
    try {
      const producer = c.producer(q, { batchMax: 1 })
      broker.loseReplies.set(1, 1_000) // stored, every reply lost
      const error = await producer.send({ body: 'x' }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(SendOutcomeUnknownError)
      expect(error).toMatchObject({ outcomeUnknown: true, retriable: true, code: ErrorCode.Unavailable })
      expect((error as Error).message).toMatch(/an attempt went unanswered, so it may have been stored/)
      expect(broker.ready(q, 0)).toHaveLength(1)
      // A batch the broker refused stored nothing, and says no more than the refusal.
      broker.loseReplies.clear()
      broker.refusedBodies.add('y')
      const refused = await producer.send({ body: 'y' }).catch((e: unknown) => e)
      expect(refused).toBeInstanceOf(InvalidArgumentError)
      expect(refused).not.toBeInstanceOf(SendOutcomeUnknownError)
    } finally {
      broker.refusedBodies.delete('y')
      broker.loseReplies.clear()
      await c.close()
    }
  })

  it('lets later idempotent batches through once an earlier one has failed for good', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { batchMax: 1, inFlightMax: 2 })
    await producer.send({ body: 'first' }) // the partition's answer: it keeps pipelined batches in order
    broker.heldSequences.add(2)
    broker.failSequences.add(2)
    const first = producer.send({ body: 'bad' })
    const second = producer.send({ body: 'good' })
    await waitFor(() => broker.calls.includes('gap:3'))
    broker.releaseHeld()
    await expect(first).rejects.toThrow(/a bad batch/)
    expect((await second).duplicate).toBe(false)
    expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(['first', 'good'])
    broker.failSequences.clear()
  })

  it('refuses more idempotent batches in flight than a broker remembers', () => {
    expect(() => client.producer('any', { inFlightMax: 6 })).toThrow(/at most 5/)
    expect(() => client.producer('any', { inFlightMax: 6, idempotent: false })).not.toThrow()
  })

  it('sends one key to one partition and spreads keyless messages round-robin when asked', async () => {
    const q = freshQueue(4)
    const producer = client.producer(q, { keyless: 'round-robin' })
    const keyed = await Promise.all(
      Array.from({ length: 8 }, () => producer.send({ body: 'x', key: 'user-42' })),
    )
    expect(new Set(keyed.map((r) => r.partition)).size).toBe(1)
    const spread = await Promise.all(Array.from({ length: 8 }, () => producer.send({ body: 'x' })))
    expect(new Set(spread.map((r) => r.partition)).size).toBe(4)
  })

  it('routes by a partition key as by a key, without storing it', async () => {
    const q = freshQueue(4)
    const producer = client.producer(q, { keyless: 'round-robin' })
    const sent = await Promise.all(
      ['a', 'b', 'c', 'd', 'e', 'f'].map((body) => producer.send({ body, partitionKey: 'src-3' })),
    )
    const partitions = new Set(sent.map((r) => r.partition))
    expect(partitions.size).toBe(1)
    const [p] = partitions
    // The same partition a key of that value picks; the messages themselves are keyless.
    expect((await producer.send({ body: 'k', key: 'src-3' })).partition).toBe(p)
    expect(broker.ready(q, p as number).map((m) => m.key)).toEqual(['', '', '', '', '', '', 'src-3'])
    // The key wins over a partition key.
    const both = await producer.send({ body: 'x', key: 'user-42', partitionKey: 'src-3' })
    expect(both.partition).not.toBe(p) // (the two values hash to different partitions of 4)
    expect(both.partition).toBe((await producer.send({ body: 'y', key: 'user-42' })).partition)
    await expect(producer.send({ body: 'z', partitionKey: 7 as unknown as string })).rejects.toThrow(
      /partitionKey must be a string/,
    )
  })

  it('routes by a dedup key as by a partition key, so that a repeat reaches the partition that remembers it', async () => {
    const q = freshQueue(4)
    // Two producers, each as a keyless sender would spread: every send of one dedup key still
    // lands on one partition (the server's dedup window is per partition).
    const a = client.producer(q, { keyless: 'round-robin' })
    const b = client.producer(q)
    const sent = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).send({ body: `try ${i}`, dedupKey: 'order-7' })),
    )
    const partitions = new Set(sent.map((r) => r.partition))
    expect(partitions.size).toBe(1)
    expect((await a.send({ body: 'p', partitionKey: 'order-7' })).partition).toBe([...partitions][0])
    // Distinct dedup keys spread over the partitions; a key or a partition key wins.
    const spread = await Promise.all(
      Array.from({ length: 16 }, (_, i) => a.send({ body: 'x', dedupKey: `order-${i}` })),
    )
    expect(new Set(spread.map((r) => r.partition)).size).toBeGreaterThan(1)
    const keyed = (await a.send({ body: 'k', key: 'user-42' })).partition
    // (order-1 alone would go to partition 1, user-42 to 3.)
    expect((await a.send({ body: 'kd', key: 'user-42', dedupKey: 'order-1' })).partition).toBe(keyed)
    expect((await a.send({ body: 'd', dedupKey: 'order-1' })).partition).not.toBe(keyed)
  })

  it('sends keyless messages a batch at a time to one partition (sticky), with even shares over time', async () => {
    const q = freshQueue(4)
    const producer = client.producer(q, { batchMax: 50 })
    // 200 sends at once: one full batch per partition, not 4 requests of 50 split 4 ways each.
    const burst = await Promise.all(Array.from({ length: 200 }, () => producer.send({ body: 'x' })))
    expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual(Array(4).fill('produce:50'))
    const counts = [0, 1, 2, 3].map((p) => burst.filter((r) => r.partition === p).length)
    expect(counts).toEqual([50, 50, 50, 50])
    // One at a time: 50 in a row to a partition, then the next.
    const serial: number[] = []
    for (let i = 0; i < 100; i++) serial.push((await producer.send({ body: 'y' })).partition)
    expect(new Set(serial.slice(0, 50)).size).toBe(1)
    expect(new Set(serial.slice(50)).size).toBe(1)
    expect(serial[50]).not.toBe(serial[0])
  })

  it('leaves a partition whose batch stalls for the others (sticky), and sends there again once it is back', async () => {
    const q = freshQueue(2)
    const producer = client.producer(q, { stallMs: 100 })
    const first = await producer.send({ body: 'a' })
    const stuck = first.partition
    broker.heldPartitions.add(stuck)
    // The held batch stays out; once it has been out for stallMs, keyless sends go elsewhere.
    const held = producer.send({ body: 'held' })
    await new Promise((r) => setTimeout(r, 150))
    const others = await Promise.all(Array.from({ length: 20 }, () => producer.send({ body: 'b' })))
    expect(others.every((r) => r.partition !== stuck)).toBe(true)
    broker.releaseHeld()
    expect((await held).partition).toBe(stuck)
  })

  it('makes send wait when its buffer is full (back-pressure)', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { bufferMax: 2, lingerMs: 30, batchMax: 100 })
    await Promise.all([
      producer.send({ body: '1' }),
      producer.send({ body: '2' }),
      producer.send({ body: '3' }),
    ])
    expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual(['produce:2', 'produce:1'])
  })

  it('makes send wait when its buffered bytes would pass bufferBytesMax; a bigger message goes alone', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { bufferBytesMax: 10, lingerMs: 30, batchMax: 100 })
    await Promise.all([
      producer.send({ body: 'aaaa' }),
      producer.send({ body: 'bbbb' }),
      producer.send({ body: 'cccc' }),
    ])
    await producer.send({ body: 'x'.repeat(50) })
    expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual([
      'produce:2',
      'produce:1',
      'produce:1',
    ])
    expect(() => client.producer(q, { bufferBytesMax: 0 })).toThrow(/bufferBytesMax/)
    // First come, first served: a small send does not pass a bigger one waiting for room.
    await Promise.all(['dddddd', 'eeeeeeee', 'f'].map((body) => producer.send({ body, key: 'k' })))
    expect(
      broker
        .ready(q, 0)
        .map((m) => text(m.body))
        .slice(-3),
    ).toEqual(['dddddd', 'eeeeeeee', 'f'])
  })

  it('fails only the bad message of a batch the partition refused whole; the others are stored, in order', async () => {
    const q = freshQueue(1)
    broker.refusedBodies.add('too big')
    try {
      for (const idempotent of [true, false]) {
        broker.calls.length = 0
        const producer = client.producer(q, { idempotent })
        const sends = ['a', 'too big', 'b'].map((body) => producer.send({ body }))
        const [a, bad, b] = await Promise.allSettled(sends)
        expect(a?.status).toBe('fulfilled')
        expect(b?.status).toBe('fulfilled')
        expect(bad).toMatchObject({ status: 'rejected', reason: { code: 'INVALID_ARGUMENT' } })
        expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual(['produce:3', 'produce:2'])
        await producer.close()
      }
      expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(['a', 'b', 'a', 'b'])
    } finally {
      broker.refusedBodies.clear()
    }
  })

  it('fails the whole refused batch when later batches are in flight (they could be stored first)', async () => {
    const q = freshQueue(1)
    broker.refusedBodies.add('too big')
    try {
      const producer = client.producer(q, { batchMax: 2 })
      await producer.send({ body: 'first' }) // the partition's answer: it keeps pipelined batches in order
      const bodies = ['a1', 'too big', 'b1', 'b2', 'c1', 'c2']
      const results = await Promise.allSettled(bodies.map((body) => producer.send({ body })))
      expect(results.map((r) => r.status)).toEqual([
        'rejected',
        'rejected',
        'fulfilled',
        'fulfilled',
        'fulfilled',
        'fulfilled',
      ])
      // Stored in the order sent: a1 was not sent again behind b1..c2.
      expect(broker.ready(q, 0).map((m) => text(m.body))).toEqual(['first', 'b1', 'b2', 'c1', 'c2'])
      await producer.close()
    } finally {
      broker.refusedBodies.clear()
    }
  })

  it('closes under steady sends: close() refuses new ones and resolves once the accepted ones are done', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q, { bufferMax: 4 })
    const outcomes: string[] = []
    let stop = false
    // Senders that keep sending until told to stop (bounded), as request handlers of a server
    // shutting down would.
    const senders = Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 1_000 && !stop; i++) {
        try {
          await producer.send({ body: 'm' })
          outcomes.push('sent')
        } catch (error) {
          outcomes.push((error as Error).message)
          return
        }
      }
    })
    await waitFor(() => outcomes.length >= 20)
    await producer.close()
    const sentAtClose = broker.ready(q, 0).length
    stop = true
    await Promise.all(senders)
    expect(outcomes.filter((o) => o === 'sent').length).toBe(sentAtClose)
    expect(outcomes.filter((o) => o !== 'sent')).toEqual(Array(8).fill(`producer for ${q} is closed`))
    const late = producer.send({ body: 'late' })
    await expect(late).rejects.toBeInstanceOf(ClientClosedError)
    await expect(late).rejects.toMatchObject({ retriable: false, message: `producer for ${q} is closed` })
  })

  it("keeps batches within a partition's whole room (its share of queueLengthMax), which a larger one could never fit", async () => {
    queue = `q${++queueNo}`
    broker.addQueue(queue, 2, 30_000, 6) // 3 messages per partition at most
    const producer = client.producer(queue, { lingerMs: 20, batchMax: 64, keyless: 'round-robin' })
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => producer.send({ body: `m${i}` })))
    expect(results).toHaveLength(12)
    const sizes = broker.calls.filter((c) => c.startsWith('produce:')).map((c) => Number(c.slice(8)))
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(12)
    expect(Math.max(...sizes)).toBe(3)
    await producer.close()
  })

  it('rejects bad messages before sending anything', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await expect(producer.send({ body: 'x', weight: 0 })).rejects.toThrow(
      /weight must be an integer from 1 to 1000/,
    )
    await expect(producer.send({ body: 'x', delayMs: -1 })).rejects.toThrow(/delayMs/)
    // Not strings where strings go: a clear InvalidArgumentError, and no timer left running.
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length
    const before = timers()
    for (const [bad, why] of [
      [{ key: 5 }, /key must be a string, got number/],
      [{ dedupKey: {} }, /dedupKey must be a string, got object/],
      [{ headers: { trace: 7 } }, /header "trace" must be a string, got number/],
      [{ headers: 'x' }, /headers must be an object of strings, got string/],
    ] as const) {
      const error = await producer.send({ body: 'x', ...(bad as object) }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as Error).message).toMatch(why)
    }
    for (const [bad, why] of [
      [null, /a message must be an object .*got null/],
      ['x', /a message must be an object .*got string/],
      [[{ body: 'x' }], /a message must be an object .*got an array/],
    ] as const) {
      const error = await producer.send(bad as unknown as OutgoingMessage).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as Error).message).toMatch(why)
    }
    expect(timers()).toBe(before)
    expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual([])
  })

  it('refuses headers given as a Map rather than sending the message without them', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    const headers = new Map([['trace', 'abc']]) as unknown as Record<string, string>
    const error = await producer.send({ body: 'x', headers }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect((error as Error).message).toMatch(/headers must be an object of strings, got a Map/)
    expect(broker.ready(q, 0)).toHaveLength(0)
    await producer.close()
  })

  it('says a queue or node that never existed is not there, also when the first seed is down', async () => {
    const other = await MqClient.connect({
      servers: [broker.deadAddress, broker.leaderAddress],
      deadlineMs: 3_000,
    })
    try {
      // (A failed call forgets the meta leader: the next starts at the dead seed.)
      await expect(other.admin.describeQueue('nosuch')).rejects.toThrow(/does not exist/)
      await expect(other.admin.deleteQueue('nosuch')).rejects.toThrow(/does not exist/)
      await expect(other.admin.removeNode('n99')).rejects.toThrow(/not registered/)
    } finally {
      await other.close()
    }
  })

  it('fails with QueueNotFoundError for an unknown queue', async () => {
    await expect(client.producer('nope').send({ body: 'x' })).rejects.toBeInstanceOf(QueueNotFoundError)
    const consumer = client.consumer('nope')
    await expect(async () => {
      for await (const _ of consumer) break
    }).rejects.toBeInstanceOf(QueueNotFoundError)
  })

  it('tells a name no queue can have as invalid, not as a queue that does not exist', async () => {
    const error = await client
      .producer('bad name')
      .send({ body: 'x' })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect((error as Error).message).toMatch(/may hold only letters, digits/)
  })

  it('consumes and acks everything', async () => {
    const q = freshQueue(2)
    const producer = client.producer(q)
    await Promise.all(Array.from({ length: 20 }, (_, i) => producer.send({ body: `m${i}` })))
    const seen: string[] = []
    for await (const message of client.consumer(q, { prefetch: 8, waitMs: 50 })) {
      seen.push(message.text())
      await message.ack()
      if (seen.length === 20) break
    }
    expect(seen.sort()).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`).sort())
    expect(broker.leasedCount).toBe(0)
    expect(broker.ready(q, 0).length + broker.ready(q, 1).length).toBe(0)
  })

  it('keeps nothing of the messages other handlers took while one handler runs long (consume)', async () => {
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    // A consumer stand-in that hands out 100,000 messages at once, so only consume()'s own
    // bookkeeping is measured.
    const messages = 100_000
    const stand = {
      async *[Symbol.asyncIterator]() {
        for (let i = 0; i < messages; i++) yield { settled: true } as unknown as Delivery
      },
      stop: async () => {},
      close: async () => {},
    }
    const made = vi.spyOn(MqClient.prototype, 'consumer').mockReturnValue(stand as unknown as Consumer)
    try {
      let release!: () => void
      const long = new Promise<void>((resolve) => {
        release = resolve
      })
      let handled = 0
      let heapMb = 0
      const measure = () => {
        gc()
        return process.memoryUsage().heapUsed / 2 ** 20
      }
      const subscription = await client.consume(
        'any',
        async () => {
          // The first message's handler runs until the others are done (a large job).
          if (++handled === 1) await long
          else if (handled === 1_000) heapMb = measure()
          else if (handled === messages) {
            heapMb = measure() - heapMb
            release()
          }
        },
        { concurrency: 2 },
      )
      await subscription.done
      // Before, the loop raced the running handlers for a free slot: every race left a
      // reaction on the long one, ~300 bytes a message (~30 MB for these).
      expect(heapMb).toBeLessThan(8)
    } finally {
      made.mockRestore()
    }
  })

  it('leases from partitions added to the queue while it consumes (told by STALE_ROUTE)', async () => {
    const q = freshQueue(1)
    // The producer has a client of its own: the consumer's router learns of the new
    // partitions only from the broker's STALE_ROUTE.
    const other = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
    try {
      const producer = other.producer(q, { keyless: 'round-robin' })
      const seen: string[] = []
      const partitions = new Set<number>()
      const consumer = client.consumer(q, { prefetch: 8, waitMs: 50 })
      const consuming = (async () => {
        for await (const message of consumer) {
          seen.push(message.text())
          partitions.add(message.partition)
          await message.ack()
          if (seen.length === 8) break
        }
      })()
      await producer.send({ body: 'before' })
      await vi.waitFor(() => expect(seen).toEqual(['before']))
      broker.addQueue(q, 3)
      broker.epoch++
      // Chosen from the producer's old route (1 partition); its STALE_ROUTE refreshes it.
      expect((await producer.send({ body: 'bump' })).partition).toBe(0)
      const sent = await Promise.all(
        Array.from({ length: 6 }, (_, i) => producer.send({ body: `after${i}` })),
      )
      expect(new Set(sent.map((r) => r.partition))).toEqual(new Set([0, 1, 2]))
      await consuming
      expect(seen.sort()).toEqual([
        'after0',
        'after1',
        'after2',
        'after3',
        'after4',
        'after5',
        'before',
        'bump',
      ])
      expect(partitions).toEqual(new Set([0, 1, 2]))
      expect(broker.leasedCount).toBe(0)
    } finally {
      await other.close()
    }
  })

  it('leases in refills, not one message per settled one, and never holds more than prefetch', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await Promise.all(Array.from({ length: 200 }, (_, i) => producer.send({ body: `m${i}` })))
    broker.leaseRequests.length = 0
    let handled = 0
    let mostLeased = 0
    for await (const message of client.consumer(q, { prefetch: 32, waitMs: 50 })) {
      // One at a time, a turn of the event loop each: every ack frees one message of room.
      await new Promise((r) => setImmediate(r))
      mostLeased = Math.max(mostLeased, broker.leasedCount)
      await message.ack()
      if (++handled === 200) break
    }
    expect(mostLeased).toBeLessThanOrEqual(32)
    // The first lease (an idle partition) already asks for half the prefetch, not one message.
    expect(broker.leaseRequests[0]?.max).toBe(16)
    // Refills of at least half the prefetch while messages are buffered: 200 / 16 leases and a
    // few more when the buffer ran dry; one lease per ack would be ~200.
    expect(broker.leaseRequests.length).toBeLessThan(40)
  })

  it.each([
    ['carries each busy partition’s acks with its next lease', false],
    ['sends the acks in Ack calls to a broker of a version before ack_lease_ids', true],
  ])('%s, within prefetch', async (_, older) => {
    const q = freshQueue(4)
    const producer = client.producer(q)
    await Promise.all(Array.from({ length: 2_000 }, (_, i) => producer.send({ body: `m${i}`, key: `k${i}` })))
    broker.leaseAcksUnknown = older
    broker.carriedAcks.length = 0
    broker.ackCalls = 0
    const acks: Promise<void>[] = []
    let mostLeased = 0
    try {
      let handled = 0
      // Acked as handed out, as the consume benchmark does: every partition stays busy.
      for await (const message of client.consumer(q, { prefetch: 64, waitMs: 50 })) {
        mostLeased = Math.max(mostLeased, broker.leasedCount)
        acks.push(message.ack())
        if (++handled === 2_000) break
      }
      await Promise.all(acks)
    } finally {
      broker.leaseAcksUnknown = false
    }
    // What the broker holds leased: at most prefetch held, and as many acks not sent yet (past
    // them the consumer leases no more).
    expect(mostLeased).toBeLessThanOrEqual(2 * 64)
    expect(broker.leasedCount, 'every ack applied').toBe(0)
    if (older) {
      expect(broker.carriedAcks).toEqual([])
      expect(broker.ackCalls).toBeGreaterThan(0)
    } else {
      // Nearly all ride with a lease (before the room of a partition's acks was kept for its
      // next lease, another busy partition took it first, and 4 % did in the benchmark).
      expect(broker.carriedAcks.length).toBeGreaterThan(1_500)
      expect(broker.ackCalls).toBeLessThan(50)
    }
  })

  it('forgets producers and consumers once they are closed (an application may make many)', async () => {
    const q = freshQueue(1)
    const before = client.openHandles
    for (let i = 0; i < 50; i++) {
      const p = client.producer(q)
      await p.send({ body: `m${i}` })
      await p.close()
    }
    const c = client.consumer(q, { prefetch: 1, waitMs: 50 })
    expect(client.openHandles).toBe(before + 1)
    for await (const m of c) {
      await m.ack()
      break // leaving the loop closes the consumer
    }
    expect(client.openHandles).toBe(before)
  })

  it('gives unprocessed prefetched messages back on close', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await Promise.all(Array.from({ length: 10 }, (_, i) => producer.send({ body: `m${i}` })))
    const consumer = client.consumer(q, { prefetch: 10, waitMs: 50 })
    for await (const message of consumer) {
      await message.ack()
      break
    }
    await consumer.close()
    expect(broker.leasedCount).toBe(0)
    expect(broker.ready(q, 0)).toHaveLength(9)
  })

  it('closes a consumer at once while it long-polls an empty queue: the poll is cancelled', async () => {
    const q = freshQueue(2)
    broker.leaseWaitCapMs = 10_000
    const before = broker.cancelledLeases
    try {
      const consumer = client.consumer(q, { prefetch: 4, waitMs: 10_000 })
      const reading = (async () => {
        for await (const message of consumer) await message.ack()
      })()
      while (broker.leaseRequests.filter((r) => r.waitMs === 10_000).length < 2)
        await new Promise((r) => setTimeout(r, 5))
      const started = Date.now()
      await consumer.close()
      await reading
      expect(Date.now() - started).toBeLessThan(1_000)
      // The broker heard of both partitions' cancels (it stops waiting, and leases nothing).
      const heard = Date.now() + 2_000
      while (broker.cancelledLeases < before + 2 && Date.now() < heard)
        await new Promise((r) => setTimeout(r, 5))
      expect(broker.cancelledLeases).toBeGreaterThanOrEqual(before + 2)
    } finally {
      broker.leaseWaitCapMs = 200
    }
  })

  it('acks on return, nacks on throw, and redelivers the nacked message', async () => {
    const q = freshQueue(1)
    await client.producer(q).send({ body: 'flaky' })
    const deliveries: number[] = []
    const done = new Promise<void>((resolve) => {
      void client
        .consume(
          q,
          async (m: Delivery) => {
            deliveries.push(m.deliveryCount)
            if (m.deliveryCount === 1) throw new Error('first try fails')
            resolve()
          },
          { concurrency: 2, waitMs: 50 },
        )
        .then((sub) => done.then(() => sub.close()))
    })
    await done
    expect(deliveries).toEqual([1, 2])
  })

  it('extends a lease while the handler runs', async () => {
    const q = freshQueue(1, 200)
    await client.producer(q).send({ body: 'slow' })
    const consumer = client.consumer(q, { waitMs: 50 })
    for await (const m of consumer) {
      await new Promise((r) => setTimeout(r, 450))
      await m.ack()
      break
    }
    expect(broker.calls.filter((c) => c === 'extend').length).toBeGreaterThanOrEqual(2)
  })

  /** A consume loop on a fresh queue (visibility 600 ms) whose one handler runs 1,500 ms, then returns. */
  const slowHandler = async (c: MqClient, errors: unknown[]) => {
    // A lease of 600 ms, extended every 300 ms, under a handler of 1,500 ms. (With 200 ms a
    // loaded machine's timers let the lease run out between two extensions.)
    const q = freshQueue(1, 600)
    await c.producer(q).send({ body: 'slow' })
    let started = false
    let finished = false
    const sub = await c.consume(
      q,
      async () => {
        started = true
        await new Promise((r) => setTimeout(r, 1_500))
        finished = true
      },
      { waitMs: 50, onError: (e) => errors.push(e) },
    )
    await waitFor(() => started)
    return { q, sub, finished: () => finished }
  }

  it('close() of a consume loop lets its running handlers finish, their leases extended, and acks them', async () => {
    broker.expireLeases = true
    try {
      const errors: unknown[] = []
      const { q, sub, finished } = await slowHandler(client, errors)
      await sub.close()
      expect(finished()).toBe(true)
      // Extended past its 600 ms, then acked: not ready again, not leased.
      expect(errors).toEqual([])
      expect(broker.calls.filter((c) => c === 'extend').length).toBeGreaterThanOrEqual(2)
      expect(broker.ready(q, 0)).toEqual([])
      expect(broker.leasedCount).toBe(0)
    } finally {
      broker.expireLeases = false
    }
  })

  it('client.close() closes its consume loops first: running handlers finish and ack', async () => {
    broker.expireLeases = true
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
    try {
      const errors: unknown[] = []
      const { q, finished } = await slowHandler(c, errors)
      await c.close()
      expect(finished()).toBe(true)
      expect(errors).toEqual([])
      expect(broker.ready(q, 0)).toEqual([])
      expect(broker.leasedCount).toBe(0)
    } finally {
      broker.expireLeases = false
    }
  })

  it('a consume handler may close its own subscription, or the client: it returns (the others are waited for)', async () => {
    const q = freshQueue(1)
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
    await c.producer(q).send({ body: 'stop' })
    let closed = false
    const sub = await c.consume(q, async () => {
      await c.close()
      closed = true
    })
    await waitFor(() => closed)
    await sub.done
  })

  it('waits at most closeTimeoutMs for running handlers, then closes anyway', async () => {
    const q = freshQueue(1)
    await client.producer(q).send({ body: 'stuck' })
    let started = false
    let release: () => void = () => {}
    const sub = await client.consume(
      q,
      async () => {
        started = true
        await new Promise<void>((resolve) => {
          release = resolve
        })
      },
      { waitMs: 50, closeTimeoutMs: 200 },
    )
    await waitFor(() => started)
    const t0 = Date.now()
    await sub.close()
    expect(Date.now() - t0).toBeLessThan(2_000)
    release()
    await sub.done
    await expect(client.consume(q, async () => {}, { closeTimeoutMs: -1 })).rejects.toThrow(/closeTimeoutMs/)
  })

  it('reports the error that ends a consume loop to onError; an unawaited done is no unhandled rejection', async () => {
    const errors: unknown[] = []
    const sub = await client.consume('no-such-queue', async () => {}, { onError: (e) => errors.push(e) })
    await waitFor(() => errors.length > 0)
    expect(errors[0]).toBeInstanceOf(QueueNotFoundError)
    await expect(sub.done).rejects.toBeInstanceOf(QueueNotFoundError)
    await sub.close()
    // An onError that throws changes nothing of that.
    const throwing = await client.consume('no-such-queue', async () => {}, {
      onError: () => {
        throw new Error('a bad observer')
      },
    })
    await expect(throwing.done).rejects.toBeInstanceOf(QueueNotFoundError)
    await throwing.close()
  })

  it('drops the rejection of an async onError or onAttempt (a logger whose call failed): no unhandled rejection', async () => {
    const unhandled: unknown[] = []
    const onUnhandled = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', onUnhandled)
    const observed: AttemptReport[] = []
    const traced = await MqClient.connect({
      servers: [broker.leaderAddress],
      onAttempt: async (r) => {
        observed.push(r)
        throw new Error('a tracer that failed')
      },
    })
    try {
      const errors: unknown[] = []
      const sub = await traced.consume('no-such-queue', async () => {}, {
        onError: async (e) => {
          errors.push(e)
          throw new Error('a logger that failed')
        },
      })
      await expect(sub.done).rejects.toBeInstanceOf(QueueNotFoundError)
      await sub.close()
      await new Promise((r) => setImmediate(r))
      expect(errors[0]).toBeInstanceOf(QueueNotFoundError)
      expect(observed.length).toBeGreaterThan(0)
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
      await traced.close()
    }
  })

  it('runs as many handlers at once as its concurrency, even with a smaller prefetch', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await Promise.all(['a', 'b', 'c', 'd'].map((body) => producer.send({ body })))
    let running = 0
    let most = 0
    let done = 0
    const sub = await client.consume(
      q,
      async () => {
        running++
        most = Math.max(most, running)
        await new Promise((r) => setTimeout(r, 200))
        running--
        done++
      },
      { concurrency: 4, prefetch: 1, waitMs: 50 },
    )
    await waitFor(() => done === 4)
    await sub.close()
    expect(most).toBe(4)
  })

  it('a consumer started while the meta group is unavailable waits for it, then consumes', async () => {
    const q = freshQueue(1)
    await client.producer(q).send({ body: 'later' })
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 300, attemptMs: 100 })
    broker.failRoutesUntilMs = Date.now() + 1_000
    try {
      const errors: unknown[] = []
      const consumer = c.consumer(q, { waitMs: 50, onError: (e) => errors.push(e) })
      for await (const m of consumer) {
        expect(m.text()).toBe('later')
        await m.ack()
        break
      }
      // The router gave up (its 300 ms deadline) at least once: told, ridden out.
      expect(errors.length).toBeGreaterThan(0)
      expect(errors.every((e) => e instanceof UnavailableError)).toBe(true)
    } finally {
      broker.failRoutesUntilMs = 0
      await c.close()
    }
  })

  it('keeps extending a lease whose extension failed for a passing reason while the lease still runs', async () => {
    broker.expireLeases = true
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 150, attemptMs: 100 })
    try {
      const q = freshQueue(1, 3_000)
      await c.producer(q).send({ body: 'long' })
      const errors: unknown[] = []
      const consumer = c.consumer(q, { waitMs: 50, onError: (e) => errors.push(e) })
      for await (const m of consumer) {
        // The first extension (at 1,500 ms) fails (a failover of 1,900 ms); its retry, half the
        // time left later (~2,250 ms), extends the lease due at 3,000 ms, and the ack at 3,600 ms
        // finds it. (With a lease of 1,000 ms the retry had ~125 ms to land in, which a loaded
        // machine's timers missed: CI failed once so.)
        broker.failExtendsUntilMs = Date.now() + 1_900
        await new Promise((r) => setTimeout(r, 3_600))
        await m.ack()
        break
      }
      expect(errors.length).toBeGreaterThan(0)
      expect(errors.every((e) => e instanceof UnavailableError)).toBe(true)
      expect(broker.ready(q, 0)).toEqual([])
    } finally {
      broker.expireLeases = false
      broker.failExtendsUntilMs = 0
      await c.close()
    }
  })

  it('lets go of a message whose extension fails and keeps extending the others of its lease', async () => {
    const q = freshQueue(1, 200)
    const producer = client.producer(q)
    await Promise.all([producer.send({ body: 'a' }), producer.send({ body: 'b' })])
    const errors: unknown[] = []
    // prefetch 4: the first lease asks for 2, so both come in one response, under one timer.
    const consumer = client.consumer(q, { waitMs: 50, prefetch: 4, onError: (e) => errors.push(e) })
    const it = consumer[Symbol.asyncIterator]()
    const a = (await it.next()).value as Delivery
    const b = (await it.next()).value as Delivery
    broker.forgetLease(a.leaseId)
    // Two rounds of extension (at half the 200 ms visibility each); the fake counts b's only.
    await waitFor(() => broker.calls.filter((c) => c === 'extend').length >= 2)
    expect(errors.map((e) => (e as Error).name)).toEqual(['LeaseLostError'])
    expect(broker.calls.filter((c) => c === 'extend').length).toBeGreaterThanOrEqual(2) // b's, twice
    await b.ack()
    await expect(a.ack()).rejects.toThrow(/is unknown/)
    await consumer.close()
  })

  it('takes an ack or nack whose answer was lost and whose retry finds no lease as done', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await Promise.all(['a', 'b', 'c'].map((body) => producer.send({ body })))
    const consumer = client.consumer(q, { waitMs: 50, prefetch: 3 })
    const it = consumer[Symbol.asyncIterator]()
    const [a, b, c] = [
      (await it.next()).value as Delivery,
      (await it.next()).value as Delivery,
      (await it.next()).value as Delivery,
    ]
    // The first attempt applies and its answer is lost; the retry finds the lease gone
    // (UNKNOWN). Before, the ack failed with LeaseLostError though the message was deleted.
    broker.dropSettleReplies = 1
    await a.ack()
    broker.dropSettleReplies = 1
    await b.nack()
    // A first answer stands: a lease that is gone before the ack was sent is lost.
    broker.forgetLease(c.leaseId)
    await expect(c.ack()).rejects.toThrow(/is unknown to the broker: the message is gone/)
    await consumer.close()
  })

  it('stops counting a lapsed lease against prefetch (no auto-extension)', async () => {
    const q = freshQueue(1, 150)
    const producer = client.producer(q)
    await Promise.all([producer.send({ body: 'first' }), producer.send({ body: 'second' })])
    const seen: string[] = []
    for await (const m of client.consumer(q, { prefetch: 1, waitMs: 50, autoExtend: false })) {
      seen.push(m.text())
      // The first is left unsettled: only its lapse makes room for the second.
      if (seen.length === 2) {
        await m.ack()
        break
      }
    }
    expect(seen).toEqual(['first', 'second'])
  })

  it('never hands out a buffered delivery whose lease lapsed before its turn', async () => {
    const q = freshQueue(1, 150)
    const producer = client.producer(q)
    await Promise.all([producer.send({ body: 'a', key: 'K' }), producer.send({ body: 'b', key: 'K' })])
    const seen: string[] = []
    const releases = broker.nackReleases.filter(Boolean).length
    for await (const m of client.consumer(q, { prefetch: 2, waitMs: 50, autoExtend: false })) {
      seen.push(m.text())
      if (seen.length === 1) {
        // A slow handler: b's lease (from the same response) lapses while it waits its turn.
        await new Promise((r) => setTimeout(r, 250))
        await m.ack()
        await producer.send({ body: 'c', key: 'K' })
        continue
      }
      break
    }
    // b was not handed out on its lapsed lease: it was given back as the lease ended (a release:
    // no delivery counted), and came again on a fresh lease, in its key's order.
    expect(broker.nackReleases.filter(Boolean).length).toBeGreaterThan(releases)
    expect(seen).toEqual(['a', 'b'])
  })

  it('gives back buffered deliveries before their leases lapse without autoExtend (none counted as delivered)', async () => {
    const q = freshQueue(1, 300)
    const producer = client.producer(q)
    await Promise.all(Array.from({ length: 10 }, (_, i) => producer.send({ body: `m${i}` })))
    const releases = broker.nackReleases.filter(Boolean).length
    const consumer = client.consumer(q, { prefetch: 3, autoExtend: false, waitMs: 50 })
    const iterator = consumer[Symbol.asyncIterator]()
    const first = (await iterator.next()).value as Delivery
    await new Promise((r) => setTimeout(r, 1_000)) // a slow handler: the other two lapse, again and again
    // Given back each time, where they were let lapse on the broker (each lapse a delivery
    // counted towards max deliveries: a slow handler dead-lettered messages it never saw).
    expect(broker.nackReleases.filter(Boolean).length - releases).toBeGreaterThanOrEqual(2)
    await first.ack().catch(() => {})
    await consumer.close()
  })

  it('removes a node, also when the answer of the call that removed it was lost', async () => {
    await client.admin.removeNode('n3')
    expect(broker.nodes.has('n3')).toBe(false)
    // Asked once, an unknown node is refused.
    await expect(client.admin.removeNode('n3')).rejects.toThrow('node n3 is not registered')
    // The first copy removes n4 and its answer is lost; the retry finds n4 gone: done.
    broker.dropRemoveReplies = 1
    await client.admin.removeNode('n4')
    expect(broker.nodes.has('n4')).toBe(false)
  })

  it('refuses an unknown queue or node through a meta follower too (a redirect is no copy that could have done it)', async () => {
    const viaFollower = await MqClient.connect({ servers: [broker.metaFollowerAddress], deadlineMs: 5_000 })
    try {
      await expect(viaFollower.admin.deleteQueue('no-such-queue')).rejects.toThrow(
        'queue no-such-queue does not exist',
      )
      await expect(viaFollower.admin.removeNode('n9')).rejects.toThrow('node n9 is not registered')
      // A lost answer still counts as done on the retry.
      broker.dropRemoveReplies = 1
      const q = freshQueue(1)
      await viaFollower.admin.deleteQueue(q)
      await expect(viaFollower.admin.deleteQueue(q)).rejects.toThrow(`queue ${q} does not exist`)
    } finally {
      await viaFollower.close()
    }
  })

  it('deletes a queue, also when the answer of the call that deleted it was lost', async () => {
    const q = freshQueue(1)
    broker.dropRemoveReplies = 1
    await client.admin.deleteQueue(q)
    // Asked once, a queue that does not exist is refused.
    await expect(client.admin.deleteQueue(q)).rejects.toThrow(`queue ${q} does not exist`)
  })

  it('creates a queue with only the settings given (an unset dedup window is the broker default)', async () => {
    await client.admin.createQueue('d1')
    await client.admin.createQueue('d2', { dedupWindowMs: 0, partitions: 2 })
    const [d1, d2] = broker.createRequests.slice(-2)
    expect(d1?.config?.dedupWindowMs).toBeUndefined()
    expect(d2?.config).toMatchObject({ dedupWindowMs: 0, partitions: 2 })
  })

  it('creates a queue with a setting given as undefined as if it were left out', async () => {
    // `{ partitions: options.partitions }` with none given: it failed before any call, as an
    // InternalError "Request message serialization failure: invalid uint32: undefined".
    const route = await client.admin.createQueue('u1', { partitions: undefined, paused: undefined })
    expect(route.queue).toBe('u1')
    expect(broker.createRequests.at(-1)?.config).toMatchObject({ partitions: 0, paused: false })
  })

  it('refuses a setting the wire cannot carry with InvalidArgumentError naming it, before any call', async () => {
    const q = freshQueue(1)
    const creates = broker.createRequests.length
    for (const [call, why] of [
      [() => client.admin.createQueue('b1', { partitions: 2.5 }), /queue setting partitions .* got 2.5/],
      [() => client.admin.createQueue('b2', { maxDeliveries: 2 ** 32 }), /queue setting maxDeliveries/],
      [
        () => client.admin.createQueue('b3', { paused: 'yes' as unknown as boolean }),
        /queue setting paused must be a boolean, got yes/,
      ],
      [
        () => client.admin.updateQueue(q, { visibilityTimeoutMs: -1 }),
        /queue setting visibilityTimeoutMs .* got -1/,
      ],
    ] as const) {
      const error = await call().catch((e: unknown) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as Error).message).toMatch(why)
    }
    expect(broker.createRequests.length).toBe(creates)
  })

  it('pauses and resumes a queue, and says so when the meta leader cannot pause one', async () => {
    const q = freshQueue(1)
    expect((await client.admin.updateQueue(q, { paused: true })).config?.paused).toBe(true)
    expect((await client.admin.updateQueue(q, { paused: false })).config?.paused).toBe(false)
    // A meta leader of an earlier version answers as if done, without the field: refused here.
    broker.pauseUnknown = true
    await expect(client.admin.updateQueue(q, { paused: true })).rejects.toThrow(
      `queue ${q} was not paused: the meta leader runs a version without paused queues (format level 12); upgrade every node first`,
    )
    // Other settings, and resuming a queue that is not paused, are unaffected.
    await client.admin.updateQueue(q, { maxDeliveries: 3 })
    await client.admin.updateQueue(q, { paused: false })
    broker.pauseUnknown = false
  })

  it('creates a queue with ordered keys, and says so when the meta leader created it without', async () => {
    const route = await client.admin.createQueue('o1', { orderedKeys: true, partitions: 2 })
    expect(route.config?.orderedKeys).toBe(true)
    expect(broker.createRequests.at(-1)?.config).toMatchObject({ orderedKeys: true, partitions: 2 })
    broker.orderingUnknown = true
    await expect(client.admin.createQueue('o2', { orderedKeys: true })).rejects.toThrow(
      'queue o2 was created without ordered keys: the meta leader runs a version without them (format level 14); delete the queue and upgrade every node first',
    )
    // A queue that does not ask for them is unaffected.
    await client.admin.createQueue('o3')
    broker.orderingUnknown = false
  })

  it("sets a queue's delivery rate, and says so when the meta leader dropped it", async () => {
    const q = freshQueue(1)
    expect((await client.admin.updateQueue(q, { deliveryRate: 50 })).config?.deliveryRate).toBe(50)
    expect((await client.admin.updateQueue(q, { deliveryRate: 0 })).config?.deliveryRate).toBe(0)
    broker.rateUnknown = true
    await expect(client.admin.updateQueue(q, { deliveryRate: 50 })).rejects.toThrow(
      `queue ${q}'s delivery rate is not 50/s: the meta leader runs a version without delivery rates (format level 15); upgrade every node, then set it again (updateQueue)`,
    )
    await client.admin.updateQueue(q, { maxDeliveries: 3 })
    broker.rateUnknown = false
  })

  it('creates a queue with a retry backoff, and says so when the meta leader dropped it', async () => {
    const route = await client.admin.createQueue('b1', {
      retryBackoffMinMs: 1_000,
      retryBackoffMaxMs: 60_000,
    })
    expect(route.config).toMatchObject({ retryBackoffMinMs: 1_000, retryBackoffMaxMs: 60_000 })
    // A minimum alone: the meta leader fills the maximum in, which is not a dropped setting.
    expect(
      (await client.admin.createQueue('b2', { retryBackoffMinMs: 1_000 })).config?.retryBackoffMaxMs,
    ).toBe(600_000)
    broker.backoffUnknown = true
    await expect(client.admin.createQueue('b3', { retryBackoffMinMs: 1_000 })).rejects.toThrow(
      "queue b3's retry backoff is 0 to 0 ms, not what was asked: the meta leader runs a version without retry backoffs (format level 16); upgrade every node, then set it again (updateQueue)",
    )
    await client.admin.createQueue('b4')
    broker.backoffUnknown = false
  })

  it('lists dead letters in pages of 1,000 from the last place, up to the limit per partition', async () => {
    const q = freshQueue(2)
    broker.dead.set(0, 2_500)
    broker.dead.set(1, 3)
    broker.listDeadCalls.length = 0
    const listed = await client.admin.deadLetters(q, 2_200)
    expect(listed.filter((m) => m.partition === 0).map((m) => m.deadPlace)).toEqual(
      Array.from({ length: 2_200 }, (_, i) => i + 1),
    )
    expect(listed.filter((m) => m.partition === 1)).toHaveLength(3)
    expect(broker.listDeadCalls.filter((c) => c.partition === 0)).toEqual([
      { partition: 0, limit: 1_000, afterId: 0 },
      { partition: 0, limit: 1_000, afterId: 1_000 },
      { partition: 0, limit: 200, afterId: 2_000 },
    ])
    // A server without places answers one page.
    broker.placesUnknown = true
    expect(await client.admin.deadLetters(q, 2_200)).toHaveLength(1_003)
    broker.placesUnknown = false
    broker.dead.clear()
  })

  it('refuses a producer batch limit past what one Produce carries, and counts headers and keys in batch bytes', async () => {
    const q = freshQueue(1)
    expect(() => client.producer(q, { batchMax: 1_001 })).toThrow(
      'producer option batchMax must be at most 1000 (the messages one Produce may carry), got 1001',
    )
    // A batch is one Raft entry, which a server takes up to 32 MiB: 40 MiB batches all failed.
    expect(() => client.producer(q, { batchBytesMax: 40 * 1024 * 1024 })).toThrow(
      /^producer option batchBytesMax must be from 1 to 16777216 \(a batch is one Raft entry/,
    )
    const producer = client.producer(q, { batchBytesMax: 100 })
    broker.calls.length = 0
    // Tiny bodies, 60 bytes of header each: two would pass 100 bytes, so each goes alone.
    const headers = { trace: 'x'.repeat(55) }
    await Promise.all([0, 1, 2].map((i) => producer.send({ body: `${i}`, headers })))
    await producer.close()
    expect(broker.calls.filter((c) => c.startsWith('produce:'))).toEqual([
      'produce:1',
      'produce:1',
      'produce:1',
    ])
  })

  it("leases for the visibility it times extensions by: the queue's, sent, not left to the server", async () => {
    const q = freshQueue(1, 4_000)
    const producer = client.producer(q)
    await producer.send({ body: 'v' })
    broker.leaseVisibilities.length = 0
    const consumer = client.consumer(q, { waitMs: 100 })
    for await (const d of consumer) {
      await d.ack()
      break
    }
    await consumer.close()
    expect(broker.leaseVisibilities.length).toBeGreaterThan(0)
    expect(new Set(broker.leaseVisibilities)).toEqual(new Set([4_000]))
  })

  it('releases, not nacks, what close() gives back unhanded; a handler failure nacks', async () => {
    const q = freshQueue(1)
    const producer = client.producer(q)
    await Promise.all(['a', 'b', 'c'].map((body) => producer.send({ body })))
    broker.nackReleases.length = 0
    const consumer = client.consumer(q, { prefetch: 3, waitMs: 100 })
    for await (const d of consumer) {
      await d.nack() // a failure
      break
    }
    await consumer.close() // the two it held unhanded go back as give-backs
    expect(broker.nackReleases[0]).toBe(false)
    expect(broker.nackReleases.slice(1)).toEqual(broker.nackReleases.slice(1).map(() => true))
    expect(broker.nackReleases.length).toBeGreaterThan(1)
  })

  it('purges every partition of a queue through admin', async () => {
    const q = freshQueue(3)
    const producer = client.producer(q)
    await Promise.all(Array.from({ length: 9 }, () => producer.send({ body: 'x' })))
    expect(await client.admin.purgeQueue(q)).toBe(9)
    // A server that stopped at its time bound says more: the SDK calls again.
    await Promise.all(Array.from({ length: 3 }, () => producer.send({ body: 'y' })))
    broker.purgeMoreCalls = 2
    expect(await client.admin.purgeQueue(q)).toBe(2_003)
    expect(broker.purgeMoreCalls).toBe(0)
    expect([0, 1, 2].map((p) => broker.ready(q, p).length)).toEqual([0, 0, 0])
    // A step that fails (a failover) is retried alone: the steps before it still count.
    const one = freshQueue(1)
    await Promise.all(Array.from({ length: 3 }, () => client.producer(one).send({ body: 'z' })))
    broker.purgeMoreCalls = 1
    broker.purgeFailCalls = 1
    expect(await client.admin.purgeQueue(one)).toBe(1_003)
    expect(broker.purgeFailCalls).toBe(0)
  })

  it('redrives a partition in steps through the place it asked first, every step and retry bounded by it', async () => {
    const q = freshQueue(1)
    await client.producer(q).send({ body: 'x' })
    broker.redriveAnswers.push(
      'fail', // the question of the place, retried
      { moved: 0, more: false, throughPlace: 1_500 },
      'fail', // the first step, retried with the place
      { moved: 1_000, more: true, throughPlace: 1_500 },
      { moved: 500, more: false, throughPlace: 1_500 },
    )
    expect(await client.admin.redriveDeadLetters(q, 5_000)).toBe(1_500)
    expect(broker.redriveRequests).toEqual([
      { partition: 0, max: 5_000, throughPlace: 0, placeOnly: true },
      { partition: 0, max: 5_000, throughPlace: 0, placeOnly: true },
      { partition: 0, max: 5_000, throughPlace: 1_500, placeOnly: false },
      { partition: 0, max: 5_000, throughPlace: 1_500, placeOnly: false },
      { partition: 0, max: 4_000, throughPlace: 1_500, placeOnly: false },
    ])
    // Nothing ever died: no place, nothing to do.
    broker.redriveRequests.length = 0
    broker.redriveAnswers.push({ moved: 0, more: false, throughPlace: 0 })
    expect(await client.admin.redriveDeadLetters(q)).toBe(0)
    expect(broker.redriveRequests).toHaveLength(1)
    // A server below format level 24 ignores placeOnly and redrives: counted, and its calls
    // count afresh.
    broker.redriveRequests.length = 0
    broker.redriveAnswers.push(
      { moved: 1_000, more: true, throughPlace: 0 },
      { moved: 3, more: false, throughPlace: 0 },
    )
    expect(await client.admin.redriveDeadLetters(q)).toBe(1_003)
    expect(broker.redriveRequests.map((r) => [r.throughPlace, r.placeOnly])).toEqual([
      [0, true],
      [0, false],
    ])
    // 0 moves nothing and asks nothing (0 on the wire is a whole step); a bad count is refused
    // before anything is sent, with a RangeError naming it (not a serialization failure).
    broker.redriveRequests.length = 0
    expect(await client.admin.redriveDeadLetters(q, 0)).toBe(0)
    for (const bad of [-1, 1.5, Number.NaN])
      await expect(client.admin.redriveDeadLetters(q, bad)).rejects.toThrow(
        /max must be an integer of at least 0/,
      )
    await expect(client.admin.peek(q, -1)).rejects.toThrow(/limit must be an integer from 0 to 1000/)
    // A partition answers at most 1,000 ready messages: more is refused, not cut without a word.
    await expect(client.admin.peek(q, 1_001)).rejects.toThrow(/limit must be an integer from 0 to 1000/)
    expect(await client.admin.peek(q, 0)).toEqual([])
    await expect(client.admin.deadLetters(q, 2.5)).rejects.toThrow(/limit must be an integer/)
    await expect(client.admin.scaleDataGroups(-2)).rejects.toThrow(/groups must be an integer/)
    await expect(client.admin.setMetaVoters(-1)).rejects.toThrow(/voters must be an integer/)
    await expect(client.admin.setReplicationFactor(2.5)).rejects.toThrow(/factor must be an integer/)
    await expect(client.admin.transferLeader(-1, 'n1')).rejects.toThrow(/groupId must be an integer/)
    expect(await client.admin.listQueues('', 0)).toEqual([])
    expect(broker.redriveRequests).toEqual([])
  })

  it('asks the other seeds when the meta leader it knows falls silent, instead of waiting out the attempt', async () => {
    // A meta "leader" that accepts calls and never answers (a paused process keeps its socket).
    const silent = new Server()
    let asked = 0
    const never = () => {
      asked++
    }
    silent.addService(MetaService, Object.fromEntries(Object.keys(MetaService).map((m) => [m, never])))
    const port = await new Promise<number>((resolve, reject) =>
      silent.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    )
    const started = Date.now()
    const c = await MqClient.connect({
      servers: [`127.0.0.1:${port}`, broker.leaderAddress],
      attemptMs: 20_000,
      leaderSilenceMs: 100,
    })
    try {
      expect(asked).toBe(1)
      expect(broker.calls).toContain('getRoutes')
      // Far below the 20 s attempt: the other seed answered once the first stayed silent.
      expect(Date.now() - started).toBeLessThan(5_000)
      // The seed that answered is the meta address from now on.
      broker.calls.length = 0
      await c.admin.listQueues()
      expect(asked).toBe(1)
    } finally {
      await c.close()
      silent.forceShutdown()
    }
  })

  it('lets many operations back off at once without a listener-leak warning', async () => {
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.name)
    process.on('warning', onWarning)
    try {
      const q = freshQueue(1)
      const slow = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 400 })
      try {
        // Every send is redirected to a node that holds no replica, again and again: each
        // operation backs off on the client's one close signal until its deadline.
        broker.routedLeader = 'former'
        const producers = Array.from({ length: 20 }, () => slow.producer(q, { idempotent: false }))
        broker.formerOnly = true
        await Promise.allSettled(producers.map((p) => p.send({ body: 'x' })))
      } finally {
        broker.formerOnly = false
        await slow.close()
      }
      await new Promise((r) => setImmediate(r))
      expect(warnings.filter((w) => w === 'MaxListenersExceededWarning')).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('gives up on a queue that stays full with a LimitExceededError that says so', async () => {
    const q = freshQueue(1)
    // Each attempt may take its time on a busy machine (one that timed out would be the last
    // error, an UnavailableError); the deadline ends the retries. 300 ms failed once under load
    // (2026-12-06): the first answer can come later than that, and then no refusal is the last error.
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 1_500, attemptMs: 5_000 })
    broker.fullQueues.add(q)
    try {
      // Its own delivery timeout (2 × 300 ms by default) must not end it first on a busy machine.
      const sending = c.producer(q, { sendTimeoutMs: 10_000 }).send({ body: 'x' })
      await expect(sending).rejects.toBeInstanceOf(LimitExceededError)
      await expect(sending).rejects.toThrow(
        /^gave up after \d+ attempts in \d+ ms: queue .* holds 10 messages/,
      )
      // The leader the route named answered each time: the route was fetched once, not again
      // after every refusal.
      expect(broker.routeRequests.filter((r) => r.includes(q))).toEqual([[q]])
    } finally {
      broker.fullQueues.clear()
      await c.close()
    }
  })

  it("connects without asking for every queue's routes", async () => {
    broker.routeRequests.length = 0
    const c = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
    await c.close()
    // One GetRoutes naming one queue that cannot exist, not the empty list (every queue). (A
    // late request of an earlier test's client, for its own queue, may arrive meanwhile.)
    expect(broker.routeRequests.filter((r) => r.length === 0 || r.includes(''))).toEqual([['']])
  })

  it('gives up on an unreachable cluster with a retriable UnavailableError', async () => {
    const started = Date.now()
    await expect(
      MqClient.connect({ servers: ['127.0.0.1:1'], deadlineMs: 600, attemptMs: 200 }),
    ).rejects.toBeInstanceOf(UnavailableError)
    expect(Date.now() - started).toBeLessThan(5_000)
  })
})

const decoder = new TextDecoder()
function text(body: Uint8Array): string {
  return decoder.decode(body)
}

/** Polls `cond` (state the broker records as calls arrive) every 5 ms, for at most 5 s. */
async function waitFor(cond: () => boolean): Promise<void> {
  const until = Date.now() + 5_000
  while (!cond()) {
    if (Date.now() > until) throw new Error('the condition did not hold within 5 s')
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
