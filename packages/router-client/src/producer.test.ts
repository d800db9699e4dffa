import { LimitExceededError, UnavailableError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { FakeBroker } from '../test/fake-broker'
import { MqClient } from './client'
import { fnv1a32 } from './partitioner'
import { Producer } from './producer'
import { DEFAULT_ROUTER_OPTIONS, PartitionNotFoundError, Router } from './router'

describe('Producer', () => {
  it('sends again on the fresh route what its old one routed to a partition a queue created again with fewer lacks; a keyed send fails at once', async () => {
    const broker = new FakeBroker()
    await broker.start()
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 2_000 })
    try {
      broker.addQueue('q', 4)
      const producer = client.producer('q', { keyless: 'round-robin' })
      let key = 'k0'
      for (let i = 1; fnv1a32(key) % 4 !== 3; i++) key = `k${i}`
      await producer.send({ body: 'warm', key }) // the route (4 partitions) is cached
      // Deleted and created again with 2 partitions (a new route epoch).
      broker.addQueue('q', 2)
      broker.epoch++
      const started = Date.now()
      // All routed by the cached route: round-robin over its 4 partitions, two of them gone,
      // and the key's partition (3 of 4), gone too.
      const keyless = Promise.all(['a', 'b', 'c', 'd'].map((body) => producer.send({ body })))
      const keyed = producer.send({ body: 'keyed', key })
      keyed.catch(() => {}) // (looked at below)
      expect((await keyless).every((r) => r.partition < 2)).toBe(true)
      expect([...broker.ready('q', 0), ...broker.ready('q', 1)]).toHaveLength(4)
      // The keyed send is not retried until the deadline, nor moved to another partition.
      await expect(keyed).rejects.toBeInstanceOf(PartitionNotFoundError)
      await expect(keyed).rejects.toThrow('queue q has no partition 3: it has 2 partition(s) now')
      expect(Date.now() - started).toBeLessThan(1_000)
      // The next send of the key goes by the current count.
      expect((await producer.send({ body: 'again', key })).partition).toBe(fnv1a32(key) % 2)
    } finally {
      await client.close()
      broker.stop()
    }
  })

  it('rejects a send at once when its buffer and its waiting list are full; those it took go through', async () => {
    const broker = new FakeBroker()
    await broker.start()
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
    try {
      broker.addQueue('q', 1)
      const producer = client.producer('q', { bufferMax: 2, waitingMax: 3, batchMax: 100 })
      await producer.send({ body: 'warm' }) // the route is cached
      broker.heldPartitions.add(0) // nothing is acknowledged meanwhile
      // A caller that does not await: 2 buffered, 3 waiting, and the other 5 refused.
      const sends = Array.from({ length: 10 }, (_, i) => producer.send({ body: `m${i}` }))
      const outcomes = sends.map((send) =>
        send.then(
          () => 'sent',
          (error: unknown) => error,
        ),
      )
      const refused = await Promise.all(outcomes.slice(5))
      for (const error of refused) {
        expect(error).toBeInstanceOf(LimitExceededError)
        expect((error as LimitExceededError).retriable).toBe(true)
      }
      expect((refused[0] as Error).message).toMatch(
        /^producer for q: its buffer \(2 of bufferMax 2 messages, .*\(3 of waitingMax 3 sends, .* are full; .*await send\(\)/,
      )
      broker.releaseHeld()
      expect(await Promise.all(outcomes.slice(0, 5))).toEqual(['sent', 'sent', 'sent', 'sent', 'sent'])
      expect(broker.ready('q', 0).map((m) => Buffer.from(m.body).toString())).toEqual([
        'warm',
        'm0',
        'm1',
        'm2',
        'm3',
        'm4',
      ])
      // With room again, sends are taken.
      await producer.send({ body: 'after' })
    } finally {
      broker.releaseHeld()
      await client.close()
      broker.stop()
    }
  })

  it('bounds the bytes waiting (a big send may wait alone); waitingMax 0 never waits', async () => {
    const broker = new FakeBroker()
    await broker.start()
    const client = await MqClient.connect({ servers: [broker.leaderAddress], deadlineMs: 5_000 })
    try {
      broker.addQueue('q', 1)
      const producer = client.producer('q', { bufferMax: 1, waitingBytesMax: 10 })
      await producer.send({ body: 'warm' })
      broker.heldPartitions.add(0)
      const settle = (body: string) =>
        producer.send({ body }).then(
          () => 'sent',
          (error: unknown) => (error instanceof LimitExceededError ? 'refused' : error),
        )
      const buffered = settle('b')
      // 4 + 4 bytes wait; 3 more would pass 10.
      const waiting = [settle('aaaa'), settle('bbbb'), settle('ccc'), settle('dd')]
      expect(await waiting[2]).toBe('refused')
      broker.releaseHeld()
      expect(await Promise.all([buffered, ...waiting])).toEqual(['sent', 'sent', 'sent', 'refused', 'sent'])
      broker.heldPartitions.add(0)
      const held = settle('b')
      // Alone on the list, a send bigger than waitingBytesMax waits.
      const big = settle('x'.repeat(50))
      expect(await settle('y')).toBe('refused')
      broker.releaseHeld()
      expect(await Promise.all([held, big])).toEqual(['sent', 'sent'])

      const failFast = client.producer('q', { bufferMax: 1, waitingMax: 0 })
      broker.heldPartitions.add(0)
      const first = failFast.send({ body: '1' })
      await expect(failFast.send({ body: '2' })).rejects.toBeInstanceOf(LimitExceededError)
      broker.releaseHeld()
      await first
      expect(() => client.producer('q', { waitingMax: -1 })).toThrow(/waitingMax/)
      expect(() => client.producer('q', { waitingBytesMax: 0 })).toThrow(/waitingBytesMax/)
    } finally {
      broker.releaseHeld()
      await client.close()
      broker.stop()
    }
  })

  it('sends in call order when route lookups end out of order (a fetch that failed, retried behind a later send)', async () => {
    // The fault run of seed 25004: sends 2509-2511 waited on a route fetch an earlier operation
    // started; it failed, they fetched again, and send 2512, called meanwhile, joined that fetch
    // directly, ended first and took the lower sequence number.
    const router = new Router({} as never, { ...DEFAULT_ROUTER_OPTIONS, servers: ['meta:1'] })
    const fetches: { resolve: (v: unknown) => void; reject: (e: unknown) => void }[] = []
    const stub = router as unknown as { meta: unknown; partition: unknown }
    stub.meta = () => new Promise((resolve, reject) => fetches.push({ resolve, reject }))
    const stored: string[] = []
    stub.partition = async (_q: string, _p: number, op: (c: unknown, t: unknown) => Promise<unknown>) =>
      op(
        {
          queue: {
            produce: (
              req: { sequence: number; messages: { body: Uint8Array }[] },
              _md: unknown,
              _o: unknown,
              cb: (e: null, r: unknown) => void,
            ) => {
              for (const m of req.messages) stored.push(`${new TextDecoder().decode(m.body)}@${req.sequence}`)
              cb(null, {
                ids: req.messages.map((_, i) => stored.length + i),
                duplicate: false,
                pipelining: true,
              })
              return { cancel: () => {} }
            },
          },
        },
        { queue: 'q', partition: 0, routeEpoch: 1 },
      )
    const route = { queue: 'q', routeEpoch: 1, partitions: [{ partition: 0, replicas: [] }] }
    const tick = () => new Promise((r) => setTimeout(r, 5))
    const producer = new Producer(router, 'q', { batchMax: 1 })
    // A fetch under way that an earlier operation (an earlier deadline) started.
    router.route('q', true, Date.now() + 1_000).catch(() => {})
    await tick()
    const sends = ['2509', '2510', '2511'].map((b) => producer.send({ body: b, key: 'k' }))
    await tick()
    fetches.shift()?.reject(new UnavailableError('no meta leader yet')) // they fetch again
    await tick()
    sends.push(producer.send({ body: '2512', key: 'k' })) // joins the new fetch directly
    await tick()
    fetches.shift()?.resolve({ routes: [route] })
    await Promise.all(sends)
    expect(stored.map((s) => s.split('@')[0])).toEqual(['2509', '2510', '2511', '2512'])
    const sequences = stored.map((s) => Number(s.split('@')[1]))
    expect([...sequences].sort((a, b) => a - b)).toEqual(sequences)
  })
})

describe('Producer rerouting', () => {
  it('sends at once, with lingerMs Infinity, a message that went to a partition now gone: sent once, no delivery timeout ends it, and it never settled', async () => {
    // A stub router of a queue whose cached route has 2 partitions; once `gone`, partition 1
    // answers that the queue (created again) has only partition 0. While `hold`, partition 1's
    // batches wait for `held` to be let go.
    const route = { queue: 'q', routeEpoch: 1, partitions: [{ partition: 0 }, { partition: 1 }], config: {} }
    const fresh = { ...route, routeEpoch: 2, partitions: [{ partition: 0 }] }
    let gone = false
    let hold = false
    const held: (() => void)[] = []
    let nextId = 1
    const router = {
      options: { deadlineMs: 1_000, attemptMs: 1_000, backoff: { initialMs: 1, maxMs: 1, multiplier: 1 } },
      route: async () => route,
      cachedRoute: () => route,
      usedRoute: () => route,
      partition: async (
        _q: string,
        partition: number,
        op: (c: unknown, t: unknown, ms: number) => Promise<unknown>,
      ) => {
        if (gone && partition === 1) throw new PartitionNotFoundError('q', 1, fresh as never)
        let messages = 0
        const produce = (
          req: { messages: unknown[] },
          _m: unknown,
          _o: unknown,
          cb: (e: null, r: unknown) => void,
        ) => {
          messages = req.messages.length
          cb(null, {})
          return { cancel: () => {} }
        }
        await op({ queue: { produce } }, { queue: 'q', partition, routeEpoch: 1 }, 1_000)
        if (hold && partition === 1) await new Promise<void>((resolve) => held.push(resolve))
        return { ids: Array.from({ length: messages }, () => nextId++), duplicate: false, pipelining: true }
      },
    } as unknown as Router
    const producer = new Producer(router, 'q', {
      lingerMs: Number.POSITIVE_INFINITY,
      keyless: 'round-robin',
      batchMax: 2,
      idempotent: false,
      sendTimeoutMs: 200,
    })
    // Round-robin from a random partition: warm up until the last send went to partition 1.
    for (;;) {
      const warm = producer.send({ body: 'warm' })
      await producer.flush()
      if ((await warm).partition === 1) break
    }
    hold = true
    // m1, m3 (a full batch) and m5 to partition 0; m2, m4 (a full batch, held) and m6 to 1.
    const sends = ['m1', 'm2', 'm3', 'm4', 'm5', 'm6'].map((body) =>
      producer.send({ body }).then(
        (r) => r.partition,
        (error: unknown) => error,
      ),
    )
    await new Promise((r) => setTimeout(r, 20))
    expect(held).toHaveLength(1)
    // The queue is created again with one partition; [m2, m4] is answered, and m6 goes alone
    // behind it, to partition 1, which is gone: m6 goes again to partition 0, idle.
    gone = true
    held.shift()?.()
    const settled = await Promise.race([
      Promise.all(sends),
      new Promise((r) => setTimeout(() => r('m6 never settled'), 1_000)),
    ])
    expect(settled).toEqual([0, 1, 0, 1, 0, 0])
    await producer.close()
  })
})
