import { Server, ServerCredentials, type UntypedServiceImplementation } from '@grpc/grpc-js'
import {
  type AckRequest,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseResponse,
  type LeaseResultsResponse,
  type NackRequest,
  NotLeaderError,
  QueueService,
  UnavailableError,
  unaryHandler,
} from '@mq/protocol'
import type { MqClient } from '@mq/router-client'
import { describe, expect, it } from 'vitest'
import { History } from './history'
import { Prng } from './prng'
import { runConsumer, Workload } from './workers'

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
      return { messages: [] }
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
    return { messages: [message] }
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
      const consumer = runConsumer(client, load, new Prng(1), {
        worker: 'c0',
        leaseMax: 16,
        visibilityMs: 2_000,
        waitMs: 50,
        attemptMs: 1_000,
        nackRatio: 1,
        abandonRatio: 0,
        holdMsMax: 0,
        opsMax: 100,
      })
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
