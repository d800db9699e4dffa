import { InvalidArgumentError, NotLeaderError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Producer } from '../src/producer'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { SendOutcomeUnknownError } from '../src/send-outcome-unknown-error'
import { fail, type Replica, routeOf, stubPool } from './stub-pool'

const bodiesOf = (request: Record<string, unknown>) =>
  (request.messages as { body: Uint8Array }[]).map((m) => Buffer.from(m.body).toString())

/**
 * A leads the partition and falls silent holding the batch (it may have committed it); B,
 * probed meanwhile, names C; C refuses the batch for its message `big` (the queue's limit
 * lowered since), else stores it.
 */
function silentLeaderCluster(storedAtA: string[][], storedAtC: string[][]): Router {
  const replica =
    (address: string): Replica =>
    (_method, request, reply) => {
      const bodies = bodiesOf(request)
      if (address === 'A')
        storedAtA.push(bodies) // never answered
      else if (address === 'B')
        setImmediate(() =>
          fail(reply, new NotLeaderError('not the leader', { leaderId: 'C', leaderAddress: 'C' })),
        )
      else if (bodies.includes('big'))
        setImmediate(() =>
          fail(reply, new InvalidArgumentError('message too large', { messageIndex: bodies.indexOf('big') })),
        )
      else {
        storedAtC.push(bodies)
        setImmediate(() =>
          reply(null, { ids: bodies.map((_, i) => i + 1), duplicate: false, pipelining: true }),
        )
      }
    }
  const pool = stubPool(() => routeOf('q', 'A', ['A', 'B', 'C']), replica)
  return new Router(pool, { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: 50 })
}

describe('a Produce attempt the router left with a silent leader', () => {
  it('makes the outcome unknown: the batch is not split and sent again under a new sequence', async () => {
    const storedAtA: string[][] = []
    const storedAtC: string[][] = []
    const router = silentLeaderCluster(storedAtA, storedAtC)
    try {
      const producer = new Producer(router, 'q')
      const outcomes = await Promise.allSettled([
        producer.send({ body: 'small' }),
        producer.send({ body: 'big' }),
      ])
      // A took both and may have stored them: sending 'small' again would store it twice.
      expect(storedAtA).toEqual([['small', 'big']])
      expect(storedAtC).toEqual([])
      for (const o of outcomes) {
        expect(o.status).toBe('rejected')
        expect((o as PromiseRejectedResult).reason).toBeInstanceOf(SendOutcomeUnknownError)
      }
    } finally {
      router.close()
    }
  })

  it('makes a lone send the next leader refuses fail as outcome unknown, not as not stored', async () => {
    const storedAtA: string[][] = []
    const router = silentLeaderCluster(storedAtA, [])
    try {
      const error = await new Producer(router, 'q').send({ body: 'big' }).catch((e: unknown) => e)
      expect(storedAtA).toEqual([['big']])
      expect(error).toBeInstanceOf(SendOutcomeUnknownError)
      expect((error as Error).message).toMatch(/message too large.*may have been stored/)
    } finally {
      router.close()
    }
  })
})

describe('a silent leader whose first replica probed is silent too', () => {
  it('has the other replicas asked meanwhile, not after that probe’s deadline', async () => {
    // Five replicas: A, the leader the route names, and B are silent (paused, or cut off with
    // their connections hanging: a call to them ends at its deadline); C names D, which leads
    // now. Until an audit the probes went one after another, each awaited: B's held C's and D's
    // for its whole attempt (5 s) while the group had a leader.
    const stored: string[][] = []
    const replica =
      (address: string): Replica =>
      (_method, request, reply, deadline) => {
        if (address === 'A' || address === 'B')
          setTimeout(() => reply({ code: 4, details: 'Deadline exceeded' }), (deadline ?? 0) - Date.now())
        else if (address !== 'D')
          setImmediate(() =>
            fail(reply, new NotLeaderError('not the leader', { leaderId: 'D', leaderAddress: 'D' })),
          )
        else {
          const bodies = bodiesOf(request)
          stored.push(bodies)
          setImmediate(() =>
            reply(null, { ids: bodies.map((_, i) => i + 1), duplicate: false, pipelining: true }),
          )
        }
      }
    const pool = stubPool(() => routeOf('q', 'A', ['A', 'B', 'C', 'D', 'E']), replica)
    const router = new Router(pool, { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: 100 })
    try {
      const started = Date.now()
      await new Producer(router, 'q').send({ body: 'm' })
      expect(Date.now() - started).toBeLessThan(1_500)
      expect(stored).toEqual([['m']])
    } finally {
      router.close()
    }
  }, 20_000)
})
