import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { LeaseOutcome } from '@mq/protocol'
import { expect, it, vi } from 'vitest'
import { Consumer } from '../src/consumer'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { routeOf, stubPool } from './stub-pool'

it('lets go of buffered deliveries whose extension failed, not only once the reader comes to them', async () => {
  vi.useFakeTimers({
    toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'Date', 'performance'],
  })
  try {
    let id = 0
    // Every body leased, weakly: what the consumer still holds on to stays alive.
    const bodies: WeakRef<Uint8Array>[] = []
    const router = new Router(
      stubPool(
        () => ({ ...routeOf('q', 'A', ['A']), config: { visibilityTimeoutMs: 1_000 } }) as never,
        () => (method, request, reply) => {
          if (method === 'lease') {
            const messages = Array.from({ length: request.max as number }, () => {
              const body = new Uint8Array(1_024)
              bodies.push(new WeakRef(body))
              id++
              return { id, leaseId: `l${id}`, body, headers: {}, weight: 1, deliveryCount: 1 }
            })
            setTimeout(() => reply(null, { messages }), 10)
            return
          }
          // Every extension comes too late (EXPIRED); acks and releases are applied.
          const outcome =
            method === 'extend' ? LeaseOutcome.LEASE_OUTCOME_EXPIRED : LeaseOutcome.LEASE_OUTCOME_OK
          const results = (request.leaseIds as string[]).map((leaseId) => ({
            leaseId,
            outcome,
            deadlineMs: 0,
          }))
          setTimeout(() => reply(null, { results }), 10)
        },
      ),
      { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: 0 },
    )
    const consumer = new Consumer(router, 'q', { prefetch: 4, visibilityMs: 1_000 })
    const iterator = consumer[Symbol.asyncIterator]()
    const first = iterator.next()
    await vi.advanceTimersByTimeAsync(100)
    expect((await first).done).toBe(false)
    // A sequential for-await loop busy with its first message for 30 s: the buffered ones lose
    // their leases (their extensions fail) and the consumer leases others in their place.
    await vi.advanceTimersByTimeAsync(30_000)
    expect(bodies.length).toBeGreaterThan(100)
    setFlagsFromString('--expose-gc')
    const gc = runInNewContext('gc') as () => void
    gc()
    gc()
    // Those lost are let go (until an audit they stayed in the buffer until the reader came to
    // them: all 240 of 240 here, without bound while the reader was busy).
    expect(bodies.filter((w) => w.deref() !== undefined).length).toBeLessThan(20)
    const closing = consumer.close()
    await vi.advanceTimersByTimeAsync(1_000)
    await closing
    router.close()
  } finally {
    vi.useRealTimers()
  }
})
