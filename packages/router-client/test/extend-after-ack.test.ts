import { LeaseOutcome } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Consumer } from '../src/consumer'
import type { Delivery } from '../src/delivery'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { type Reply, routeOf, stubPool } from './stub-pool'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('an auto-extension queued behind another when its message is acked', () => {
  it('tells onError nothing of the acked message: its extension, answered UNKNOWN after the ack, lost no lease', async () => {
    const acked = new Set<string>()
    const extended: string[] = []
    let heldExtend: (() => void) | undefined
    /** Answers the held extension (once). */
    const answerHeld = () => {
      const go = heldExtend
      heldExtend = () => {}
      go?.()
    }
    let leases = 0
    const router = new Router(
      stubPool(
        () => routeOf('q', 'A', ['A']),
        () => (method, request, reply: Reply) => {
          const ids = (request.leaseIds ?? []) as string[]
          const answer = (outcome: (id: string) => LeaseOutcome) =>
            reply(null, {
              results: ids.map((leaseId) => ({ leaseId, outcome: outcome(leaseId), deadlineMs: 0 })),
            })
          if (method === 'lease') {
            // Two lease answers of one message each (two groups, two extension timers), then none.
            const n = ++leases
            const messages =
              n <= 2
                ? [
                    {
                      id: n,
                      leaseId: `L${n}`,
                      body: new Uint8Array(),
                      headers: {},
                      weight: 1,
                      deliveryCount: 1,
                    },
                  ]
                : []
            // (The first answered after 100 ms, the second 300 ms after it is sent: its
            // extension falls due ~400 ms after the first's. With ~100 ms between them, a
            // loaded machine's late timers put both in one extension call: CI failed once so.)
            setTimeout(() => reply(null, { messages }), n === 1 ? 100 : n === 2 ? 300 : 50)
          } else if (method === 'ack') {
            for (const id of ids) acked.add(id)
            setImmediate(() => answer(() => LeaseOutcome.LEASE_OUTCOME_OK))
          } else if (method === 'extend') {
            extended.push(...ids)
            const go = () =>
              answer((id) =>
                acked.has(id) ? LeaseOutcome.LEASE_OUTCOME_UNKNOWN : LeaseOutcome.LEASE_OUTCOME_OK,
              )
            // The first extension is slow to answer: the next one waits behind it.
            if (heldExtend === undefined && extended.length === ids.length) heldExtend = go
            else setImmediate(go)
          } else setImmediate(() => answer(() => LeaseOutcome.LEASE_OUTCOME_OK))
        },
      ),
      { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: 0 },
    )
    const reported: unknown[] = []
    const consumer = new Consumer(router, 'q', {
      prefetch: 2,
      waitMs: 0,
      visibilityMs: 400,
      onError: (e) => reported.push(e),
    })
    try {
      const it = consumer[Symbol.asyncIterator]()
      const one = (await it.next()).value as Delivery
      const two = (await it.next()).value as Delivery
      // Both leases' extensions fell due (half their visibility, the second's ~200 ms from
      // now): the first is out, the second waits behind it in the partition's settle batcher.
      await sleep(500)
      expect(extended).toEqual(['L1'])
      await two.ack()
      answerHeld()
      for (let i = 0; i < 100 && !extended.includes('L2'); i++) await sleep(10)
      await sleep(50) // its answer is in
      expect(extended.slice(0, 2)).toEqual(['L1', 'L2']) // L2's went after its ack was applied
      expect(reported).toEqual([])
      await one.ack()
    } finally {
      answerHeld()
      await consumer.close()
      router.close()
    }
  })
})
