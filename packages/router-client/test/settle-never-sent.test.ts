import { LeaseOutcome } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Consumer } from '../src/consumer'
import { LeaseLostError } from '../src/delivery'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { type Replica, routeOf, stubPool } from './stub-pool'

/** Every lease result of `request` with `outcome`. */
const results = (request: Record<string, unknown>, outcome: LeaseOutcome) => ({
  results: (request.leaseIds as string[]).map((leaseId) => ({ leaseId, outcome, deadlineMs: 0 })),
})

describe('a settlement one copy of which was never sent', () => {
  it('takes the answer to the one copy that went out as it is: UNKNOWN fails the ack with LeaseLostError', async () => {
    const acks: string[] = []
    // A (the route's leader) is down: its calls never leave this process. B leases message 1,
    // and later answers its ack UNKNOWN (the lease lapsed and the message went elsewhere).
    const replica =
      (address: string): Replica =>
      (method, request, reply) => {
        if (address === 'A')
          setImmediate(() =>
            reply({ code: 14, details: 'No connection established. Last error: connect ECONNREFUSED' }),
          )
        else if (method === 'lease') {
          const message = {
            id: 1,
            leaseId: 'L1',
            body: new Uint8Array(),
            headers: {},
            weight: 1,
            deliveryCount: 1,
          }
          setImmediate(() => reply(null, { messages: request.attemptRepeat ? [] : [message] }))
        } else if (method === 'ack') {
          acks.push(address)
          setImmediate(() => reply(null, results(request, LeaseOutcome.LEASE_OUTCOME_UNKNOWN)))
        } else setImmediate(() => reply(null, results(request, LeaseOutcome.LEASE_OUTCOME_OK)))
      }
    const router = new Router(
      stubPool(() => routeOf('q', 'A', ['A', 'B']), replica),
      {
        ...DEFAULT_ROUTER_OPTIONS,
        servers: ['B'],
        leaderSilenceMs: 0,
      },
    )
    const consumer = new Consumer(router, 'q', { prefetch: 1, waitMs: 0 })
    try {
      const delivery = (await consumer[Symbol.asyncIterator]().next()).value
      router.invalidate('q') // the ack starts at the route's leader, A, again
      const outcome = await delivery.ack().catch((e: unknown) => e)
      expect(acks).toEqual(['B']) // one copy went out
      expect(outcome).toBeInstanceOf(LeaseLostError)
    } finally {
      await consumer.close()
      router.close()
    }
  })
})
