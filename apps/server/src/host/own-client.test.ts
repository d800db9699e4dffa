import { credentials } from '@grpc/grpc-js'
import { storedQueueName } from '@mq/data-service'
import {
  FORMAT_LEVEL_DEAD_LETTER_QUEUE,
  InvalidArgumentError,
  type ProduceRequest,
  type ProduceResponse,
  toGrpcStatus,
} from '@mq/protocol'
import { type ClientOptions, Producer } from '@mq/router-client'
import { describe, expect, it } from 'vitest'
import { DeadLetterForwarder, type ForwardedMessage } from './dead-letter-forwarder'
import { leaseAndNack, memoryGroup } from './memory-group'
import { OwnClient } from './own-client'

const text = (s: string) => new TextEncoder().encode(s)

/**
 * The cluster behind the node's own client, as its SDK producer sees it: one partition whose
 * Produce calls are answered together at the end of an event-loop turn, the latest first (a
 * later request can be complete before an earlier one), and stored as they are answered. A
 * batch with a body in `refused` is refused whole, naming that message (ErrorDetail
 * message_index), as a partition does.
 */
function fakeCluster(refused: ReadonlySet<string> = new Set()) {
  const stored: string[] = []
  const answers: (() => void)[] = []
  let inFlight = 0
  let inFlightMax = 0
  const queue = {
    produce(
      request: ProduceRequest,
      _metadata: unknown,
      _options: unknown,
      callback: (error: unknown, response?: ProduceResponse) => void,
    ) {
      inFlight++
      inFlightMax = Math.max(inFlightMax, inFlight)
      answers.push(() => {
        inFlight--
        const bodies = request.messages.map((m) => new TextDecoder().decode(m.body).slice(0, 8))
        const bad = bodies.findIndex((b) => refused.has(b))
        if (bad >= 0) {
          callback(toGrpcStatus(new InvalidArgumentError(`message ${bad} is too big`, { messageIndex: bad })))
          return
        }
        stored.push(...bodies)
        callback(null, {
          ids: bodies.map((_, i) => stored.length - bodies.length + i + 1),
          duplicate: false,
          pipelining: false,
        })
      })
      if (answers.length === 1)
        setImmediate(() => {
          for (const answer of answers.splice(0).reverse()) answer()
        })
    },
  }
  const router = {
    options: { attemptMs: 1_000, deadlineMs: 15_000 },
    route: async () => ({ partitions: [{}] }),
    cachedRoute: () => undefined,
    usedRoute: () => ({ partitions: [{}] }),
    partition: <T>(
      _queue: string,
      _partition: number,
      operation: (connection: unknown, target: unknown) => Promise<T>,
    ) => operation({ queue }, { queue: 'jobs-dead', partition: 0, routeEpoch: 1 }),
  }
  const connect = async (_options: ClientOptions) => ({
    producer: (name: string, options?: ConstructorParameters<typeof Producer>[2]) =>
      new Producer(router as never, name, options),
    close: async () => {},
  })
  const own = new OwnClient({
    advertise: '127.0.0.1:1',
    credentials: credentials.createInsecure(),
    peerToken: '',
    connect,
  })
  return { own, stored, inFlightMax: () => inFlightMax }
}

const copy = (body: string | Uint8Array): ForwardedMessage => ({
  body: typeof body === 'string' ? text(body) : body,
  headers: {},
  weight: 1,
  key: '',
  partitionKey: 'mq-dlq/7/0',
  dedupKey: '',
})

describe('OwnClient', () => {
  it("keeps one batch in flight per partition: copies over a batch's bytes are stored in their order", async () => {
    const { own, stored, inFlightMax } = fakeCluster()
    // 600 KiB each: two do not fit one batch (1 MiB), so each goes in a Produce of its own.
    const big = (name: string) => {
      const body = new Uint8Array(600 * 1024).fill(0x20)
      body.set(text(name))
      return copy(body)
    }
    expect(await own.send('jobs-dead', [big('first'), big('second'), big('third')])).toEqual([
      undefined,
      undefined,
      undefined,
    ])
    expect(stored.map((b) => b.trim())).toEqual(['first', 'second', 'third'])
    expect(inFlightMax()).toBe(1)
  })

  it('answers each copy once all are settled, so the forwarder sends again only what was refused', async () => {
    const { own, stored } = fakeCluster(new Set(['huge']))
    // jobs#7/0 with three dead letters; jobs-dead refuses `huge`.
    const g = await memoryGroup(3)
    const source = storedQueueName('jobs', 7)
    const apply = (command: Parameters<typeof g.port.propose>[0]) => g.port.propose(command)
    await apply({ type: 'open', queue: source, partition: 0, config: { maxDeliveries: 1 } })
    await apply({
      type: 'apply',
      queue: source,
      partition: 0,
      command: { type: 'enqueue', messages: ['a', 'huge', 'c'].map((b) => ({ body: text(b), weight: 1 })) },
    })
    await leaseAndNack(g.port, source, 0, 3)
    const forwarder = new DeadLetterForwarder({
      groups: () => [g.port],
      formatLevel: () => FORMAT_LEVEL_DEAD_LETTER_QUEUE,
      deadLetterQueueOf: async () => 'jobs-dead',
      placedIn: async () => true,
      forward: (target, messages) => own.send(target, messages),
    })
    const r = await forwarder.round()
    // a and c once each (the producer sent them again itself after the refusal), huge left behind.
    expect(stored).toEqual(['a', 'c'])
    expect(r.forwarded).toBe(2)
    expect(r.failures).toMatchObject([{ queue: 'jobs', partition: 0, messageId: 2 }])
    const dead = (await g.port.machine.listDead(source, 0, 10)) ?? []
    expect(dead.map((d) => new TextDecoder().decode(d.body))).toEqual(['huge'])
  })
})
