import { LeaseOutcome, NotLeaderError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Consumer } from '../src/consumer'
import { LeaseLostError } from '../src/delivery'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { fail, type Replica, routeOf, stubPool } from './stub-pool'

// Acks that travel with the consumer's next lease (LeaseRequest.ack_lease_ids): a busy
// partition's acks ride with its leases instead of taking Ack calls of their own. One lease
// brings one message (prefetch 1), so the message's ack rides with the next lease.

/** Message `n`, leased under lease id `L<n>`. */
const message = (n: number) => ({
  id: n,
  leaseId: `L${n}`,
  body: new Uint8Array(),
  headers: {},
  weight: 1,
  deliveryCount: 1,
})

/**
 * A broker of one partition on A: a lease brings the next message; acks are applied once
 * (UNKNOWN after). `carries`: it applies ack_lease_ids (else it is of a version before them).
 * `loseFirst`: the answer to the first lease that carries acks is lost after it was applied;
 * `refuseFirst`: that lease is refused before anything is applied (NOT_LEADER, naming A again).
 */
function broker(options: {
  carries: boolean
  loseFirst?: boolean
  refuseFirst?: boolean
  messages?: number
}) {
  const acked = new Set<string>()
  const calls: string[] = []
  let next = 1
  let lost = false
  const ack = (ids: readonly string[]) =>
    ids.map((leaseId) => {
      const outcome = acked.has(leaseId) ? LeaseOutcome.LEASE_OUTCOME_UNKNOWN : LeaseOutcome.LEASE_OUTCOME_OK
      acked.add(leaseId)
      return { leaseId, outcome, deadlineMs: 0 }
    })
  const replica =
    (_address: string): Replica =>
    (method, request, reply) => {
      const ackIds = (request.ackLeaseIds as string[] | undefined) ?? []
      calls.push(method === 'lease' && ackIds.length > 0 ? `lease+ack ${ackIds.join(',')}` : method)
      if (method === 'ack') {
        setImmediate(() => reply(null, { results: ack(request.leaseIds as string[]) }))
        return
      }
      if (method !== 'lease') {
        setImmediate(() => reply(null, { results: [] }))
        return
      }
      if (options.refuseFirst && ackIds.length > 0 && !lost) {
        lost = true
        setImmediate(() => fail(reply, new NotLeaderError('not the leader yet', { leaderAddress: 'A' })))
        return
      }
      const ackResults = options.carries && ackIds.length > 0 ? ack(ackIds) : []
      const messages = request.attemptRepeat || next > (options.messages ?? 3) ? [] : [message(next++)]
      if (options.loseFirst && ackIds.length > 0 && !lost) {
        lost = true
        setImmediate(() => reply({ code: 14, details: 'the reply was lost' }))
        return
      }
      setImmediate(() => reply(null, options.carries ? { messages, ackResults } : { messages }))
    }
  return { acked, calls, replica }
}

function consumerOn(replica: (address: string) => Replica) {
  const router = new Router(
    stubPool(() => routeOf('q', 'A', ['A']), replica),
    {
      ...DEFAULT_ROUTER_OPTIONS,
      servers: ['A'],
      leaderSilenceMs: 0,
    },
  )
  return { router, consumer: new Consumer(router, 'q', { prefetch: 1, waitMs: 0 }) }
}

describe('acks that travel with the next lease', () => {
  it("carries a busy partition's ack with its next lease, and resolves it with the lease's answer", async () => {
    const b = broker({ carries: true })
    const { router, consumer } = consumerOn(b.replica)
    try {
      const it = consumer[Symbol.asyncIterator]()
      for (let i = 0; i < 2; i++) {
        const delivery = (await it.next()).value
        await delivery.ack()
      }
      expect(b.calls).toContain('lease+ack L1')
      expect(b.calls).toContain('lease+ack L2')
      expect(b.calls, 'no Ack call of their own').not.toContain('ack')
      expect([...b.acked]).toEqual(['L1', 'L2'])
    } finally {
      await consumer.close()
      router.close()
    }
  })

  it('sends the acks in an Ack call when the broker answers no ack results (a version before them)', async () => {
    const b = broker({ carries: false })
    const { router, consumer } = consumerOn(b.replica)
    try {
      const delivery = (await consumer[Symbol.asyncIterator]().next()).value
      await delivery.ack() // resolves: done
      expect(b.calls).toContain('lease+ack L1')
      expect(b.calls).toContain('ack')
      expect([...b.acked]).toEqual(['L1'])
    } finally {
      await consumer.close()
      router.close()
    }
  })

  it('takes an ack whose lease answer was lost and whose resent copy finds no lease as done', async () => {
    const b = broker({ carries: true, loseFirst: true })
    const { router, consumer } = consumerOn(b.replica)
    try {
      const delivery = (await consumer[Symbol.asyncIterator]().next()).value
      await delivery.ack() // resolves: done
      // The lost answer's copy applied it; the one resent found it gone.
      expect(b.calls.filter((c) => c === 'lease+ack L1')).toHaveLength(2)
    } finally {
      await consumer.close()
      router.close()
    }
  })

  it.each([
    ['of a lease that carried an ack', false, 1],
    ['applied after a copy refused NOT_LEADER', true, 2],
  ])('takes the answer to the one copy %s as it is: UNKNOWN fails it', async (_, refuseFirst, copies) => {
    const b = broker({ carries: true, refuseFirst })
    // L1's lease lapsed and the message was acked through a later delivery: gone.
    b.acked.add('L1')
    const { router, consumer } = consumerOn(b.replica)
    try {
      const delivery = (await consumer[Symbol.asyncIterator]().next()).value
      const outcome = await delivery.ack().catch((e: unknown) => e)
      expect(b.calls.filter((c) => c === 'lease+ack L1')).toHaveLength(copies)
      expect(outcome).toBeInstanceOf(LeaseLostError)
    } finally {
      await consumer.close()
      router.close()
    }
  })
})

describe('an ack of a delivery no longer held', () => {
  it('goes at once while its busy partition waits for room, not when other leases end', async () => {
    // Every lease brings what it asks for; every ack is applied.
    let next = 1
    const replica =
      (_address: string): Replica =>
      (method, request, reply) => {
        if (method === 'lease') {
          const n = request.max as number
          const messages = Array.from({ length: n }, () => message(next++))
          const ackResults = ((request.ackLeaseIds as string[] | undefined) ?? []).map((leaseId) => ({
            leaseId,
            outcome: LeaseOutcome.LEASE_OUTCOME_OK,
            deadlineMs: 0,
          }))
          setImmediate(() => reply(null, { messages, ackResults }))
          return
        }
        const results = ((request.leaseIds as string[] | undefined) ?? []).map((leaseId) => ({
          leaseId,
          outcome: LeaseOutcome.LEASE_OUTCOME_OK,
          deadlineMs: 0,
        }))
        setImmediate(() => reply(null, { results }))
      }
    const router = new Router(
      stubPool(() => routeOf('q', 'A', ['A']), replica),
      { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: 0 },
    )
    // Unextended: a handler slower than the visibility acks a delivery whose lease the consumer
    // no longer holds, while the partition is busy and out of room (its messages buffered).
    const visibilityMs = 3_000
    const consumer = new Consumer(router, 'q', { prefetch: 2, waitMs: 0, autoExtend: false, visibilityMs })
    try {
      const first = (await consumer[Symbol.asyncIterator]().next()).value
      await new Promise((r) => setTimeout(r, visibilityMs + 100))
      const askedAt = performance.now()
      await first.ack()
      // Not held until the messages leased after it lapse (most of a visibility later: ~2 s).
      expect(performance.now() - askedAt).toBeLessThan(1_000)
    } finally {
      await consumer.close()
      router.close()
    }
  })

  it('sends no lease after the one that answered the last ack when the application closes then', async () => {
    // One message: the lease that carries its ack brings none, and the next would go at once.
    const b = broker({ carries: true, messages: 1 })
    const { router, consumer } = consumerOn(b.replica)
    try {
      const delivery = (await consumer[Symbol.asyncIterator]().next()).value
      await delivery.ack()
      const leases = b.calls.filter((c) => c.startsWith('lease')).length
      await consumer.close()
      // A lease sent as the consumer closes may lease, on a broker, what comes meanwhile for no
      // one (the cancel reaches the broker after its stream is up).
      expect(b.calls.filter((c) => c.startsWith('lease')).length).toBe(leases)
      expect(b.calls.at(-1)).toBe('lease+ack L1')
    } finally {
      await consumer.close()
      router.close()
    }
  })
})

describe('the room of acks held for their partition', () => {
  it('is not kept past the partition’s share of prefetch while another partition waits for room: full partitions are consumed alike', async () => {
    // Four partitions never empty; each lease brings what it asks for, and the broker applies the
    // acks a lease carries. Until an audit a partition's acks kept their room for it however
    // much it had: here one partition had 1,997 of the 2,000 deliveries, the others 1 each (now
    // ~500 each, and 99 % of the acks ride with a lease, as before).
    let next = 1
    let carried = 0
    let alone = 0
    const ok = (ids: readonly string[]) =>
      ids.map((leaseId) => ({ leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_OK, deadlineMs: 0 }))
    const replica =
      (_address: string): Replica =>
      (method, request, reply) => {
        if (method === 'lease') {
          const ackLeaseIds = (request.ackLeaseIds as string[] | undefined) ?? []
          carried += ackLeaseIds.length
          const messages = Array.from({ length: request.max as number }, () => message(next++))
          setTimeout(() => reply(null, { messages, ackResults: ok(ackLeaseIds) }), 1)
          return
        }
        const leaseIds = (request.leaseIds as string[] | undefined) ?? []
        if (method === 'ack') alone += leaseIds.length
        setTimeout(() => reply(null, { results: ok(leaseIds) }), 1)
      }
    const router = new Router(
      stubPool(() => routeOf('q', 'A', ['A'], 4), replica),
      { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: 0 },
    )
    const consumer = new Consumer(router, 'q', { prefetch: 8, waitMs: 100 })
    const byPartition = [0, 0, 0, 0]
    const acks: Promise<void>[] = []
    try {
      for await (const d of consumer) {
        byPartition[d.partition] = (byPartition[d.partition] ?? 0) + 1
        acks.push(new Promise((r) => setTimeout(r, (d.id * 7) % 4)).then(() => d.ack()))
        if (acks.length === 2_000) break
      }
      await Promise.all(acks)
      for (const n of byPartition) expect(n).toBeGreaterThan(300)
      // Within their shares, the acks still ride with their partitions' leases.
      expect(carried).toBeGreaterThan(0.9 * (carried + alone))
    } finally {
      await consumer.close()
      router.close()
    }
  })
})
