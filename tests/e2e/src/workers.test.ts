import {
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type sendUnaryData,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js'
import {
  type AckRequest,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseRequest,
  type LeaseResponse,
  type LeaseResultsResponse,
  LimitExceededError,
  type NackRequest,
  NotLeaderError,
  PermissionDeniedError,
  QueueService,
  UnavailableError,
  unaryHandler,
} from '@mq/protocol'
import { type MqClient, SendOutcomeUnknownError, SendTimeoutError } from '@mq/router-client'
import { describe, expect, it } from 'vitest'
import { check } from './checker'
import { type EnqueueOp, History, type LeasedRecord, type LeaseOp, type SettleOp } from './history'
import { Prng } from './prng'
import { runConsumer, runProducer, Workload } from './workers'

/** One consumer worker's options in these tests: `nackRatio` of its deliveries nacked. */
function consumerOptions(nackRatio: number) {
  return {
    worker: 'c0',
    leaseMax: 16,
    visibilityMs: 2_000,
    waitMs: 50,
    attemptMs: 1_000,
    nackRatio,
    abandonRatio: 0,
    holdMsMax: 0,
    opsMax: 100,
  }
}

describe('Workload', () => {
  it('counts the ok-enqueued bodies not acked yet, whichever answer comes first', () => {
    const load = new Workload(new History(), 'q')
    load.noteEnqueued('a')
    load.noteEnqueued('b')
    load.noteAcked('a')
    // An ack that comes before its enqueue's answer, and a repeated note of each kind.
    load.noteAcked('c')
    load.noteEnqueued('c')
    load.noteEnqueued('b')
    load.noteAcked('a')
    expect(load.unackedCount).toBe(1)
    expect(load.unacked()).toEqual(['b'])
    load.noteAcked('b')
    expect(load.unackedCount).toBe(0)
    expect(load.unacked()).toEqual([])
  })

  it('counts a body as acked by an ack of unknown outcome only until a later delivery shows it did not apply', () => {
    const load = new Workload(new History(), 'q')
    load.noteEnqueued('a')
    load.noteDelivered('a', 1)
    load.noteAcked('a', 1)
    expect(load.unackedCount).toBe(0)
    load.noteDelivered('a', 1) // the same lease answered again: no news
    expect(load.unackedCount).toBe(0)
    load.noteDelivered('a', 2)
    expect(load.unacked()).toEqual(['a'])
    // A late unknown answer for delivery 1 changes nothing; one for delivery 2 counts; an ok
    // ack stays.
    load.noteAcked('a', 1)
    expect(load.unackedCount).toBe(1)
    load.noteAcked('a', 2)
    expect(load.unackedCount).toBe(0)
    load.noteAcked('a')
    load.noteDelivered('a', 3)
    expect(load.unackedCount).toBe(0)
  })
})

describe('runProducer', () => {
  it('records a send the SDK says stored nothing as failed, so that its delivery shows; one of unknown outcome as unknown', async () => {
    // p0-0 timed out unsent (SendTimeoutError, UNAVAILABLE: it left the buffer unsent), p0-1
    // was sent and went unanswered (SendOutcomeUnknownError). Both are delivered afterwards.
    const failures = [
      new SendTimeoutError('sendTimeoutMs passed, unsent'),
      new SendOutcomeUnknownError('lost', {}),
    ]
    const client = {
      producer: () => ({
        send: async () => {
          throw failures.shift()
        },
        close: async () => {},
      }),
    } as unknown as MqClient
    const load = new Workload(new History(), 'q')
    await runProducer(client, load, new Prng(1), { worker: 'p0', concurrency: 1, opsMax: 2 })
    const delivered: LeaseOp = {
      kind: 'lease',
      worker: 'c0',
      partition: 0,
      startMs: Date.now(),
      endMs: Date.now() + 1,
      outcome: 'ok',
      visibilityMs: 2_000,
      messages: ['p0-0', 'p0-1'].map((body, i) => ({
        body,
        partition: 0,
        id: i + 1,
        leaseId: `${i + 1}.1`,
        deliveryCount: 1,
        weight: 1,
        deadlineMs: Date.now() + 2_001,
      })),
    }
    const r = check([...load.history.ops, delivered])
    expect(r.anomalies).toEqual([expect.objectContaining({ kind: 'unexpected', body: 'p0-0' })])
    expect(r.enqueues).toEqual({ ok: 0, fail: 1, info: 1 })
  })

  it("flags a send that failed with no error of the cluster's (the SDK's or the harness's bug), whatever it stored", async () => {
    // A TypeError out of producer.send is recorded by its name, of unknown outcome: until an
    // audit the checker took it as a send that may or may not have been stored, and a run
    // whose sends all threw it passed with nothing flagged.
    const client = {
      producer: () => ({
        send: async () => {
          throw new TypeError("Cannot read properties of undefined (reading 'length')")
        },
        close: async () => {},
      }),
    } as unknown as MqClient
    const load = new Workload(new History(), 'q')
    await runProducer(client, load, new Prng(1), { worker: 'p0', concurrency: 1, opsMax: 2 })
    const r = check(load.history.ops)
    expect(r.enqueues).toEqual({ ok: 0, fail: 0, info: 2 })
    expect(r.refused).toBe(2)
    expect(r.anomalies).toEqual([
      expect.objectContaining({ kind: 'refused', body: 'p0-0' }),
      expect.objectContaining({ kind: 'refused', body: 'p0-1' }),
    ])
  })
})

/** A Queue server on loopback whose handlers the test sets; ended by `close`. */
async function queueServer(
  handlers: UntypedServiceImplementation,
): Promise<{ address: string; close: () => void }> {
  const server = new Server()
  server.addService(QueueService, handlers)
  const address = await new Promise<string>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, port) =>
      e ? reject(e) : resolve(`127.0.0.1:${port}`),
    ),
  )
  return { address, close: () => server.forceShutdown() }
}

/** A Lease handler that answers message `p0-0` (lease 1.1, 2 s) once, then nothing after 50 ms. */
function oneMessageThenNone() {
  let leases = 0
  return unaryHandler(async (): Promise<LeaseResponse> => {
    if (leases++ > 0) {
      await new Promise((r) => setTimeout(r, 50))
      return { messages: [], ackResults: [] }
    }
    const message: LeasedMessage = {
      id: 1,
      leaseId: '1.1',
      body: new TextEncoder().encode('p0-0'),
      weight: 1,
      headers: {},
      key: '',
      deliveryCount: 1,
      deadlineMs: Date.now() + 2_000,
      enqueuedAtMs: Date.now(),
    }
    return { messages: [message], ackResults: [] }
  })
}

describe('runConsumer', () => {
  it('records a settle whose only other attempt was refused as ok: a retry that could not be sent (no route) applied nothing', async () => {
    let nacks = 0
    const server = await queueServer({
      lease: oneMessageThenNone(),
      nack: unaryHandler(async (req: NackRequest): Promise<LeaseResultsResponse> => {
        // First refused by a replica that knows no leader (nothing applied), then answered.
        if (nacks++ === 0) throw new NotLeaderError('no leader yet', {})
        return {
          results: req.leaseIds.map((leaseId) => ({
            leaseId,
            outcome: LeaseOutcome.LEASE_OUTCOME_EXPIRED,
            deadlineMs: 0,
          })),
        }
      }),
    })
    // The route: found, then not readable once (the meta leader changing), then found again.
    let routes = 0
    const route = () => ({
      queue: 'q',
      routeEpoch: 1,
      partitions: [{ partition: 0, leaderAddress: server.address }],
    })
    const client = {
      admin: {
        describeQueue: async () => {
          if (routes++ === 1) throw new UnavailableError('no meta leader')
          return route()
        },
      },
    } as unknown as MqClient
    const load = new Workload(new History(), 'q')
    try {
      const consumer = runConsumer(client, load, new Prng(1), consumerOptions(1))
      const nacked = () => load.history.ops.find((o) => o.kind === 'nack')
      for (let i = 0; i < 100 && !nacked(); i++) await new Promise((r) => setTimeout(r, 50))
      load.consuming = false
      await consumer
      expect(nacks).toBe(2)
      expect(nacked()).toMatchObject({ outcome: 'ok', leaseIds: ['1.1'], results: { '1.1': 'expired' } })
    } finally {
      server.close()
    }
  })
})

describe('runConsumer lease attempts', () => {
  it('dates a lease from its own call when the call before it could not be sent (no route): that call made no lease', async () => {
    const server = await queueServer({
      lease: oneMessageThenNone(),
      ack: unaryHandler(
        async (req: AckRequest): Promise<LeaseResultsResponse> => ({
          results: req.leaseIds.map((leaseId) => ({
            leaseId,
            outcome: LeaseOutcome.LEASE_OUTCOME_OK,
            deadlineMs: 0,
          })),
        }),
      ),
    })
    // The partition's leader: unknown at first, then the route cannot be read once (the meta
    // leader changing), then it is found.
    let routes = 0
    const client = {
      admin: {
        describeQueue: async () => {
          const n = routes++
          if (n === 1) throw new UnavailableError('no meta leader')
          return {
            queue: 'q',
            routeEpoch: 1,
            partitions: [{ partition: 0, leaderAddress: n === 0 ? '' : server.address }],
          }
        },
      },
    } as unknown as MqClient
    const load = new Workload(new History(), 'q')
    try {
      const consumer = runConsumer(client, load, new Prng(1), {
        worker: 'c0',
        leaseMax: 16,
        visibilityMs: 2_000,
        waitMs: 50,
        attemptMs: 1_000,
        nackRatio: 0,
        abandonRatio: 0,
        holdMsMax: 0,
        opsMax: 100,
      })
      const leased = () => load.history.ops.find((o) => o.kind === 'lease' && o.outcome === 'ok')
      for (let i = 0; i < 100 && !leased(); i++) await new Promise((r) => setTimeout(r, 50))
      load.consuming = false
      await consumer
      const failed = load.history.ops.filter((o) => o.kind === 'lease' && o.outcome !== 'ok')
      expect(failed.length).toBe(1)
      expect(leased()).toBeDefined()
      expect(leased()).not.toHaveProperty('attemptStartMs')
    } finally {
      server.close()
    }
  })
})

// What the recorder dates and counts decides what the checker can see (an audit, 2026-12-06):
// each of these failed before its fix.
describe('runConsumer records', () => {
  type Handler<Req, Res> = (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void

  /** `handlers` in turn, one per call (the last for the rest), noting when each call arrived. */
  function inTurn<Req, Res>(arrivals: number[], ...handlers: Handler<Req, Res>[]): Handler<Req, Res> {
    return (call, callback) => {
      arrivals.push(Date.now())
      const handler = handlers[Math.min(arrivals.length, handlers.length) - 1] as Handler<Req, Res>
      handler(call, callback)
    }
  }

  /** Refused by a replica that is not the leader (no hint): nothing applied. */
  const notLeader = unaryHandler(async () => {
    throw new NotLeaderError('not the leader', {})
  })

  /** Answers every lease id ok. */
  const allOk = unaryHandler(
    async (req: AckRequest | NackRequest): Promise<LeaseResultsResponse> => ({
      results: req.leaseIds.map((leaseId) => ({
        leaseId,
        outcome: LeaseOutcome.LEASE_OUTCOME_OK,
        deadlineMs: 0,
      })),
    }),
  )

  /** A client whose route names `firstLeader` first, then `address`, each read after the first taking `delayMs`. */
  function routed(address: string, delayMs: number, firstLeader = address): MqClient {
    let routes = 0
    return {
      admin: {
        describeQueue: async () => {
          const n = routes++
          if (n > 0) await new Promise((r) => setTimeout(r, delayMs))
          return {
            queue: 'q',
            routeEpoch: 1,
            partitions: [{ partition: 0, leaderAddress: n === 0 ? firstLeader : address }],
          }
        },
      },
    } as unknown as MqClient
  }

  /** Runs one consumer until `done()` (5 s at most), then stops it. */
  async function consumeUntil(client: MqClient, load: Workload, nackRatio: number, done: () => boolean) {
    const consumer = runConsumer(client, load, new Prng(1), consumerOptions(nackRatio))
    for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setTimeout(r, 50))
    load.consuming = false
    await consumer
  }

  const leased = (load: Workload) =>
    load.history.ops.find((o): o is LeaseOp => o.kind === 'lease' && o.outcome === 'ok')

  it('dates a lease from when its call went out, not from before the route read it waited for', async () => {
    const arrivals: number[] = []
    const server = await queueServer({ lease: inTurn(arrivals, oneMessageThenNone()), ack: allOk })
    const load = new Workload(new History(), 'q')
    try {
      // No leader known at first: the loop reads the route (400 ms: a meta group under faults
      // takes up to the client's deadline) before its first call.
      await consumeUntil(routed(server.address, 400, ''), load, 0, () => leased(load) !== undefined)
      // The checker takes a lease's start as the earliest its leases can date from (fifo, the
      // clients'-clock overlap, delivered after ack): 400 ms early, it hid as much.
      expect((leased(load)?.startMs ?? 0) - (arrivals[0] ?? 0)).toBeGreaterThan(-100)
    } finally {
      server.close()
    }
  })

  it('does not date a lease from an earlier call of its attempt that was refused (that call leased nothing)', async () => {
    const arrivals: number[] = []
    const requests: LeaseRequest[] = []
    const answer = inTurn(arrivals, notLeader, oneMessageThenNone())
    const noting: Handler<LeaseRequest, LeaseResponse> = (call, callback) => {
      requests.push(call.request)
      answer(call, callback)
    }
    const server = await queueServer({ lease: noting, ack: allOk })
    const load = new Workload(new History(), 'q')
    try {
      await consumeUntil(routed(server.address, 300), load, 0, () => leased(load) !== undefined)
      expect(load.history.ops.filter((o) => o.kind === 'lease' && o.outcome === 'fail')).toHaveLength(1)
      expect(leased(load)).toBeDefined()
      // Dated from the refused call, its leases dated from 300 ms (a route read) and more early.
      expect(leased(load)).not.toHaveProperty('attemptStartMs')
      expect(requests[1]?.attemptRepeat).toBe(false)
    } finally {
      server.close()
    }
  })

  it('records a call refused by a limit or a permission as failed, not of unknown outcome', async () => {
    const refusals = [
      unaryHandler(async () => {
        throw new LimitExceededError('too many waiting leases', {})
      }),
      unaryHandler(async () => {
        throw new PermissionDeniedError('token may not consume q', {})
      }),
    ]
    const arrivals: number[] = []
    const server = await queueServer({
      lease: inTurn(arrivals, ...refusals, oneMessageThenNone()),
      ack: allOk,
    })
    const load = new Workload(new History(), 'q')
    try {
      await consumeUntil(routed(server.address, 0), load, 0, () => leased(load) !== undefined)
      const refused = load.history.ops.filter((o): o is LeaseOp => o.kind === 'lease' && o.outcome !== 'ok')
      expect(refused.map((o) => [o.outcome, o.error])).toEqual([
        ['fail', 'LIMIT_EXCEEDED'],
        ['fail', 'PERMISSION_DENIED'],
      ])
      expect(leased(load)).not.toHaveProperty('attemptStartMs')
    } finally {
      server.close()
    }
  })

  it('dates a nack from its first attempt that may have applied, so that an overlap before it shows', async () => {
    const arrivals: number[] = []
    const server = await queueServer({
      lease: oneMessageThenNone(),
      nack: inTurn(arrivals, notLeader, allOk),
    })
    const load = new Workload(new History(), 'q')
    const nacked = () => load.history.ops.find((o): o is SettleOp => o.kind === 'nack')
    try {
      await consumeUntil(routed(server.address, 400), load, 1, () => nacked() !== undefined)
      expect(nacked()).toMatchObject({ outcome: 'ok', results: { '1.1': 'ok' } })
      const refusedMs = arrivals[0] ?? 0
      expect(nacked()?.startMs).toBeGreaterThan(refusedMs + 200)
      // Another consumer is handed the message between the refused attempt and the one that
      // applied (400 ms later), while c0 still holds it: an overlap the checker must flag.
      const held = leased(load)?.messages[0] as LeasedRecord
      const other: LeaseOp = {
        kind: 'lease',
        worker: 'c1',
        partition: 0,
        startMs: refusedMs + 150,
        endMs: refusedMs + 160,
        outcome: 'ok',
        visibilityMs: 2_000,
        messages: [{ ...held, leaseId: '1.2', deliveryCount: 2, deadlineMs: refusedMs + 2_155 }],
      }
      const enqueue: EnqueueOp = {
        kind: 'enqueue',
        worker: 'p0',
        body: held.body,
        startMs: 0,
        endMs: 1,
        outcome: 'info',
      }
      expect(check([enqueue, ...load.history.ops, other]).overlaps).toBe(1)
    } finally {
      server.close()
    }
  })

  it('counts a message to ack again once it is delivered after an ack of unknown outcome: one lost then shows', async () => {
    // c0's ack of p0-0's first lease goes unanswered five times (outcome unknown: it counts as
    // acked). The message comes again (delivery 2), which shows that ack did not apply; the ack
    // of lease 1.2 is answered expired, and the server never hands it out again: lost.
    let leases = 0
    const delivery = (n: number): LeasedMessage => ({
      id: 1,
      leaseId: `1.${n}`,
      body: new TextEncoder().encode('p0-0'),
      weight: 1,
      headers: {},
      key: '',
      deliveryCount: n,
      deadlineMs: Date.now() + 2_000,
      enqueuedAtMs: Date.now(),
    })
    const server = await queueServer({
      lease: unaryHandler(async (): Promise<LeaseResponse> => {
        const n = ++leases
        if (n > 2) await new Promise((r) => setTimeout(r, 50))
        return { messages: n <= 2 ? [delivery(n)] : [], ackResults: [] }
      }),
      ack: unaryHandler(async (req: AckRequest): Promise<LeaseResultsResponse> => {
        if (req.leaseIds.includes('1.1')) throw new UnavailableError('no answer', {})
        return {
          results: req.leaseIds.map((leaseId) => ({
            leaseId,
            outcome: LeaseOutcome.LEASE_OUTCOME_EXPIRED,
            deadlineMs: 0,
          })),
        }
      }),
    })
    const load = new Workload(new History(), 'q')
    try {
      await consumeUntil(routed(server.address, 0), load, 0, () =>
        load.history.ops.some((o) => o.kind === 'ack' && o.leaseIds.includes('1.2')),
      )
      expect(
        load.history.ops.filter((o) => o.kind === 'ack').map((o) => o.kind === 'ack' && o.outcome),
      ).toEqual(['info', 'ok'])
      expect(load.unacked()).toEqual(['p0-0'])
      expect(load.unackedCount).toBe(1)
    } finally {
      server.close()
    }
  })

  it('counts a delivered message of unknown enqueue outcome as one to ack: one lost after a nack shows', async () => {
    // p0-0's enqueue went unanswered (outcome unknown); it was delivered, so it is stored. c0
    // nacks it and the server never hands it out again: lost, though no ok enqueue names it
    // (the drain's stats then read an empty queue, and nothing else would tell).
    const server = await queueServer({ lease: oneMessageThenNone(), nack: allOk })
    const load = new Workload(new History(), 'q')
    try {
      await consumeUntil(routed(server.address, 0), load, 1, () =>
        load.history.ops.some((o) => o.kind === 'nack'),
      )
      expect(load.unacked()).toEqual(['p0-0'])
      expect(load.unackedCount).toBe(1)
    } finally {
      server.close()
    }
  })
})
