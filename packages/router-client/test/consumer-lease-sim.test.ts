import { LeaseOutcome, seededRandom as prng } from '@mq/protocol'
import { describe, it, vi } from 'vitest'
import { Consumer } from '../src/consumer'
import type { Delivery } from '../src/delivery'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { movingLeader, runSeeds } from './seeded-sim'
import { type Replica, routeOf, stubPool } from './stub-pool'

/** A lease as the broker holds it. */
interface Lease {
  readonly id: number
  deadline: number
  state: 'held' | 'acked' | 'nacked' | 'expired'
}

/**
 * One seeded run: a consumer (a real Router over stub replicas) of a broker model whose calls
 * are applied and answered after random delays, and whose replies are lost (UNAVAILABLE after
 * the call was applied, or before) at a random rate; with `failover`, the leader moves among
 * three replicas, a deposed one sometimes silent first. Handlers take random times, sometimes
 * extend, then ack or nack. Returns what broke the consumer's promises to its application
 * (replay one seed with SIM_FROM=<seed> SIM_SEEDS=1).
 */
async function run(seed: number, failover: boolean): Promise<string[]> {
  const rand = prng(seed)
  const pick = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1))
  const V = 1_000
  const loseRate = rand() < 0.3 ? 0 : rand() * 0.3
  const autoExtend = rand() < 0.7
  const prefetch = pick(1, 6)
  const scale = pick(1, 4)
  // A broker that applies the acks a lease carries (ack_lease_ids) before the lease, or one of
  // a version before them (it ignores them: the consumer sends them in Ack calls).
  const carriesAcks = rand() < 0.7
  const problems: string[] = []
  const ready: number[] = Array.from({ length: 40 }, (_, i) => i + 1)
  const leases = new Map<string, Lease>()
  const byAttempt = new Map<string, string[]>()
  const handedOut = new Set<string>()
  let n = 0
  const expire = () => {
    for (const [, l] of leases)
      if (l.state === 'held' && Date.now() >= l.deadline) {
        l.state = 'expired'
        ready.push(l.id)
      }
  }
  const lease = (request: Record<string, unknown>) => {
    expire()
    // A repeat of an attempt is answered the attempt's leases still held, and nothing more.
    const attempt = request.attempt as string
    const made = (byAttempt.get(attempt) ?? []).filter((id) => leases.get(id)?.state === 'held')
    const fresh =
      request.attemptRepeat && byAttempt.has(attempt) ? [] : ready.splice(0, request.max as number)
    const ids = [
      ...made,
      ...fresh.map((id) => {
        const leaseId = `${id}.${++n}`
        leases.set(leaseId, { id, deadline: Date.now() + (request.visibilityMs as number), state: 'held' })
        return leaseId
      }),
    ]
    byAttempt.set(attempt, ids)
    return ids.map((leaseId) => {
      const id = (leases.get(leaseId) as Lease).id
      return { id, leaseId, body: new Uint8Array(), headers: {}, weight: 1, deliveryCount: 1 }
    })
  }
  const settle = (method: string, request: Record<string, unknown>) =>
    (request.leaseIds as string[]).map((leaseId) => {
      expire()
      const l = leases.get(leaseId)
      if (method === 'nack' && request.release && handedOut.has(leaseId))
        problems.push(`${leaseId} given back after it was handed out`)
      let outcome = LeaseOutcome.LEASE_OUTCOME_OK
      if (!l || l.state === 'acked' || l.state === 'nacked') outcome = LeaseOutcome.LEASE_OUTCOME_UNKNOWN
      else if (l.state === 'expired') outcome = LeaseOutcome.LEASE_OUTCOME_EXPIRED
      else if (method === 'ack') l.state = 'acked'
      else if (method === 'nack') {
        l.state = 'nacked'
        ready.push(l.id)
      } else l.deadline = Date.now() + (request.extendMs as number)
      return { leaseId, outcome, deadlineMs: 0 }
    })
  // Failovers: the leader moves among A, B and C; a deposed one may fall silent for a while
  // first (its calls wait, then it answers NOT_LEADER).
  const leader = movingLeader(rand, failover)
  const replica =
    (address: string): Replica =>
    (method, request, reply) => {
      if (leader.refuses(address, reply, () => replica(address)(method, request, reply))) return
      const applyMs = pick(0, 150 * scale)
      const answerMs = pick(0, 150 * scale)
      const lost = rand() < loseRate
      if (method !== 'lease' && rand() < loseRate) {
        // Refused before it was applied (no leader yet).
        setTimeout(() => reply({ code: 14, details: 'not applied' }), answerMs)
        return
      }
      setTimeout(() => {
        const ackIds = carriesAcks && method === 'lease' ? ((request.ackLeaseIds as string[]) ?? []) : []
        const ackResults = ackIds.length > 0 ? settle('ack', { leaseIds: ackIds }) : []
        const answer =
          method === 'lease' ? { messages: lease(request), ackResults } : { results: settle(method, request) }
        const emptyMs = method === 'lease' && answer.messages?.length === 0 ? 50 : 0
        setTimeout(
          () => (lost ? reply({ code: 14, details: 'reply lost' }) : reply(null, answer)),
          answerMs + emptyMs,
        )
      }, applyMs)
    }
  const router = new Router(
    stubPool(
      () =>
        ({
          ...routeOf('q', 'A', failover ? ['A', 'B', 'C'] : ['A']),
          config: { visibilityTimeoutMs: V },
        }) as never,
      replica,
    ),
    { ...DEFAULT_ROUTER_OPTIONS, servers: ['A'], leaderSilenceMs: failover ? 200 : 0, deadlineMs: 3_000 },
  )
  const consumer = new Consumer(router, 'q', { prefetch, waitMs: 100, visibilityMs: V, autoExtend })
  const handled: Promise<void>[] = []
  const handle = async (d: Delivery) => {
    handedOut.add(d.leaseId)
    const l = leases.get(d.leaseId)
    if (l?.state !== 'held' || l.deadline <= Date.now())
      problems.push(`${d.leaseId} handed out at ${Date.now()} with its lease ${JSON.stringify(l)}`)
    // Unextended, it is handed out only before its give-back margin (a tenth of V) at least.
    else if (!autoExtend && l.deadline - Date.now() < V / 10)
      problems.push(`${d.leaseId} handed out ${l.deadline - Date.now()} ms before its lease ends, unextended`)
    await new Promise((r) => setTimeout(r, pick(0, autoExtend ? 2_500 : 900)))
    if (rand() < 0.2) await d.extend(2 * V).catch(() => {})
    await new Promise((r) => setTimeout(r, pick(0, 300)))
    const kind = rand()
    const ok = await (kind < 0.7 ? d.ack() : d.nack(kind < 0.9 ? 0 : 200)).then(
      () => true,
      () => false,
    )
    const after = leases.get(d.leaseId)
    if (!ok && loseRate === 0 && autoExtend && scale === 1 && !failover)
      problems.push(`settling ${d.leaseId} failed without faults: ${JSON.stringify(after)}`)
    if (ok && kind < 0.7 && after?.state !== 'acked')
      problems.push(`ack of ${d.leaseId} resolved, its lease ${JSON.stringify(after)}`)
    if (ok && kind >= 0.7 && after?.state === 'held')
      problems.push(`nack of ${d.leaseId} resolved, its lease ${JSON.stringify(after)}`)
  }
  const reading = (async () => {
    for await (const d of consumer) handled.push(handle(d))
  })()
  await vi.advanceTimersByTimeAsync(30_000)
  // Stopped, then closed once the handlers are done (as consume() does): the handed-out
  // deliveries stay extended meanwhile.
  const closing = consumer
    .stop()
    .then(() => Promise.all(handled))
    .then(() => consumer.close())
  for (let i = 0; i < 200; i++) {
    let done = false
    void closing.then(() => {
      done = true
    })
    await vi.advanceTimersByTimeAsync(100)
    if (done) break
  }
  await vi.advanceTimersByTimeAsync(5_000)
  await reading
  leader.end()
  router.close()
  expire()
  // Without faults, a lease never handed out is given back, not let lapse (a lapse counts a
  // delivery the application never saw).
  if (loseRate === 0 && scale === 1 && autoExtend && !failover)
    for (const [leaseId, l] of leases)
      if (!handedOut.has(leaseId) && l.state !== 'nacked')
        problems.push(`${leaseId}, never handed out, ${l.state}`)
  return problems
}

describe('a consumer over a broker that answers late and loses replies (seeded)', () => {
  it.each([
    ['one leader', false, 100],
    ['failovers and silent leaders', true, 100],
  ])(
    'with %s: hands out only leased messages (unextended: not within the give-back margin), resolves an ack only once applied, gives back the rest',
    (_, failover, defaultSeeds) => runSeeds(defaultSeeds, (seed) => run(seed, failover)),
    600_000,
  )
})
