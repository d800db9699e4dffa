import { LeaseOutcome, type MqError, NotLeaderError, StaleRouteError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Consumer } from '../src/consumer'
import { LeaseLostError } from '../src/delivery'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { fail, type Replica, routeOf, stubPool } from './stub-pool'

// A settlement only one copy of which was applied: the other never went out, or a replica
// refused it. The one applied answers UNKNOWN (the lease lapsed, the message went elsewhere):
// the ack fails with LeaseLostError, not resolved as done by an earlier copy.

/** Every lease result of `request` with `outcome`. */
const results = (request: Record<string, unknown>, outcome: LeaseOutcome) => ({
  results: (request.leaseIds as string[]).map((leaseId) => ({ leaseId, outcome, deadlineMs: 0 })),
})

const message = { id: 1, leaseId: 'L1', body: new Uint8Array(), headers: {}, weight: 1, deliveryCount: 1 }

/** A consumer of queue q (one partition on A and B, led by `leader`) over `replica`, seeded with B. */
function consumerOn(leader: string, replica: (address: string) => Replica) {
  const router = new Router(
    stubPool(() => routeOf('q', leader, ['A', 'B']), replica),
    {
      ...DEFAULT_ROUTER_OPTIONS,
      servers: ['B'],
      leaderSilenceMs: 0,
    },
  )
  return { router, consumer: new Consumer(router, 'q', { prefetch: 1, waitMs: 0 }) }
}

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
          setImmediate(() => reply(null, { messages: request.attemptRepeat ? [] : [message] }))
        } else if (method === 'ack') {
          acks.push(address)
          setImmediate(() => reply(null, results(request, LeaseOutcome.LEASE_OUTCOME_UNKNOWN)))
        } else setImmediate(() => reply(null, results(request, LeaseOutcome.LEASE_OUTCOME_OK)))
      }
    const { router, consumer } = consumerOn('A', replica)
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

describe('a settlement one copy of which a replica refused', () => {
  it.each([
    [
      'NOT_LEADER (a failover: it names the new leader)',
      () => new NotLeaderError('not the leader of group 1; it is B at B', { leaderAddress: 'B', groupId: 1 }),
    ],
    [
      'STALE_ROUTE (the partition moved: the route is fetched again)',
      () => new StaleRouteError('stale route'),
    ],
  ] as const)(
    'takes the answer to the one copy applied as it is after a copy refused %s: UNKNOWN fails the ack with LeaseLostError',
    async (_, refusal: () => MqError) => {
      const acks: string[] = []
      // A refuses the first ack, appending nothing; B (and A after that) answers the ack
      // UNKNOWN: the lease lapsed and the message was acked through a later delivery elsewhere.
      let refused = false
      const replica =
        (address: string): Replica =>
        (method, request, reply) => {
          if (method === 'lease') {
            setImmediate(() => reply(null, { messages: request.attemptRepeat ? [] : [message] }))
            return
          }
          acks.push(address)
          if (address === 'A' && !refused) {
            refused = true
            setImmediate(() => fail(reply, refusal()))
          } else setImmediate(() => reply(null, results(request, LeaseOutcome.LEASE_OUTCOME_UNKNOWN)))
        }
      const { router, consumer } = consumerOn('B', replica)
      try {
        const delivery = (await consumer[Symbol.asyncIterator]().next()).value
        // The ack starts at A (a route of an earlier leader, say).
        const route = router.cachedRoute('q')?.partitions[0]
        if (route) route.leaderAddress = 'A'
        const outcome = await delivery.ack().catch((e: unknown) => e)
        expect(acks).toHaveLength(2) // A refused the first copy; one was applied
        expect(outcome).toBeInstanceOf(LeaseLostError)
      } finally {
        await consumer.close()
        router.close()
      }
    },
  )
})
