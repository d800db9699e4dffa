import { UnavailableError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { unary } from '../src/unary'
import { fail, type Replica, routeOf, stubPool } from './stub-pool'

describe('a cached route whose addresses all stay silent', () => {
  it('is fetched again by the next operation once one gave up on it', async () => {
    // The partition's group on A, B and C; then its nodes come back at another address (D), and
    // nothing answers at the old ones (a paused process, a machine gone: each call waits out
    // its deadline, which grpc-js ends it at).
    let route = routeOf('q', 'A', ['A', 'B', 'C'])
    let fetches = 0
    const replica =
      (address: string): Replica =>
      (_method, _request, reply, deadline) => {
        if (address === 'D') return void setImmediate(() => reply(null, { servedBy: address }))
        setTimeout(
          () => fail(reply, new UnavailableError('Deadline exceeded')),
          Math.max(0, (deadline ?? 0) - Date.now()),
        )
      }
    const router = new Router(
      stubPool(() => {
        fetches++
        return route
      }, replica),
      { ...DEFAULT_ROUTER_OPTIONS, servers: ['M'], deadlineMs: 600, attemptMs: 200, leaderSilenceMs: 0 },
    )
    const stats = () =>
      router.partition('q', 0, (c, target, ms) =>
        unary<object, { servedBy: string }>(c.queue, c.queue.stats as never, { target }, ms),
      )
    try {
      // Each address in turn waits out an attempt: the operation's deadline passes at the last.
      await expect(stats()).rejects.toBeInstanceOf(UnavailableError)
      expect(fetches).toBe(1)
      route = routeOf('q', 'D', ['D'])
      // Until an audit every later operation tried the cached route's addresses again, and gave
      // up before it had tried them all: the route was never fetched again.
      for (let i = 0; i < 2; i++) await expect(stats()).resolves.toEqual({ servedBy: 'D' })
      expect(fetches).toBe(2)
    } finally {
      router.close()
    }
  })
})
