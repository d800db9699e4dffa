import {
  InvalidArgumentError,
  LimitExceededError,
  seededRandom as prng,
  SequenceGapError,
  StaleRouteError,
} from '@mq/protocol'
import { describe, it, vi } from 'vitest'
import { Producer } from '../src/producer'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { SendOutcomeUnknownError } from '../src/send-outcome-unknown-error'
import { movingLeader, runSeeds } from './seeded-sim'
import { fail, type Replica, routeOf, stubPool } from './stub-pool'

interface Stored {
  readonly body: string
  readonly key: string
}

interface ProducerRecord {
  last: number
  kept: { seq: number; ids: number[] }[]
}

/**
 * One seeded run: a producer (a real Router over stub replicas) of a partition model that
 * applies Produce as the weighted queue does (idempotent sequences, the last 5 batches kept,
 * SEQUENCE_GAP, a full queue now and then, a message it refuses by index) after random delays,
 * loses replies at a random rate, and with `failover` moves its leader among three replicas (a
 * deposed one sometimes silent first). Returns what broke the producer's promises.
 */
async function run(seed: number, failover: boolean): Promise<string[]> {
  const rand = prng(seed)
  const pick = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1))
  const problems: string[] = []
  const partitions = pick(1, 3)
  const idempotent = rand() < 0.8
  const loseRate = rand() < 0.3 ? 0 : rand() * 0.3
  const limitRate = rand() < 0.5 ? 0 : rand() * 0.2
  const scale = pick(1, 4)
  // Sends called without awaiting: full batches, pipelined.
  const bursty = rand() < 0.5
  // Partitions may be added meanwhile (route epoch 2): requests routed before are refused.
  const grown = rand() < 0.4 ? partitions + pick(1, 2) : partitions
  let epoch = 1
  const logs: Stored[][] = Array.from({ length: grown }, () => [])
  const producers: Map<string, ProducerRecord>[] = Array.from({ length: grown }, () => new Map())
  if (grown > partitions)
    setTimeout(
      () => {
        epoch = 2
      },
      pick(500, 15_000),
    )
  const apply = (request: Record<string, unknown>) => {
    const partition = (request.target as { partition: number }).partition
    const messages = request.messages as { body: Uint8Array; key: string }[]
    const bodies = messages.map((m) => Buffer.from(m.body).toString())
    const log = logs[partition] as Stored[]
    const pid = request.producerId as string
    const seq = request.sequence as number
    const base = request.sequenceBase as number | undefined
    const rec = pid ? producers[partition]?.get(pid) : undefined
    if (pid && seq > 0) {
      const hit = rec?.kept.find((b) => b.seq === seq)
      if (hit) return { ids: hit.ids, duplicate: true, pipelining: true }
      if (rec && seq < rec.last) throw new InvalidArgumentError(`sequence ${seq} after ${rec.last}`)
      if (base !== undefined && base < seq && (rec === undefined || seq > rec.last + 1))
        throw new SequenceGapError(`sequence ${seq} before ${rec ? rec.last + 1 : base}`)
    }
    if (rand() < limitRate) throw new LimitExceededError('queue full')
    const bad = bodies.findIndex((b) => b.startsWith('bad'))
    if (bad >= 0) throw new InvalidArgumentError('message too large', { messageIndex: bad })
    const ids = messages.map((m, i) => {
      log.push({ body: bodies[i] as string, key: m.key })
      return log.length
    })
    if (pid && seq > 0) {
      const r = rec ?? { last: 0, kept: [] }
      r.last = seq
      r.kept = [...r.kept, { seq, ids }].slice(-5)
      producers[partition]?.set(pid, r)
    }
    return { ids, duplicate: false, pipelining: true }
  }
  const leader = movingLeader(rand, failover)
  const replica =
    (address: string): Replica =>
    (method, request, reply, deadline) => {
      // The call's deadline, as grpc-js ends it (the request may still be applied after).
      let answered = false
      const once: typeof reply = (e, r) => {
        if (answered) return
        answered = true
        reply(e, r)
      }
      if (deadline !== undefined)
        setTimeout(() => once({ code: 4, details: 'Deadline exceeded' }), Math.max(0, deadline - Date.now()))
      const answer = once
      if (leader.refuses(address, answer, () => replica(address)(method, request, answer, deadline))) return
      if ((request.target as { routeEpoch: number }).routeEpoch < epoch) {
        setTimeout(() => fail(answer, new StaleRouteError('partitions added', { groupId: 1 })), pick(0, 20))
        return
      }
      const applyMs = rand() < 0.05 ? pick(500, 2_500) : pick(0, 100 * scale)
      const answerMs = pick(0, 100 * scale)
      const lost = rand() < loseRate
      if (rand() < loseRate / 2) {
        setTimeout(() => answer({ code: 14, details: 'not applied' }), answerMs)
        return
      }
      if (rand() < loseRate / 3) {
        const r = rand()
        setTimeout(
          () =>
            r < 0.5
              ? answer({ code: 14, details: 'No connection established. Last error: connect ECONNREFUSED' })
              : fail(answer, new StaleRouteError('stale route', { groupId: 1 })),
          answerMs,
        )
        return
      }
      setTimeout(() => {
        let result: unknown
        let error: unknown
        try {
          result = apply(request)
        } catch (e) {
          error = e
        }
        setTimeout(() => {
          if (lost) answer({ code: 14, details: 'reply lost' })
          else if (error) fail(answer, error as never)
          else answer(null, result)
        }, answerMs)
      }, applyMs)
    }
  const deadlineMs = 3_000
  const router = new Router(
    stubPool(
      () => ({
        ...routeOf('q', 'A', failover ? ['A', 'B', 'C'] : ['A'], epoch === 1 ? partitions : grown),
        routeEpoch: epoch,
      }),
      replica,
    ),
    {
      ...DEFAULT_ROUTER_OPTIONS,
      servers: ['A'],
      leaderSilenceMs: failover ? 200 : 0,
      deadlineMs,
      attemptMs: 1_000,
    },
  )
  const sendTimeoutMs = pick(300, 6_000)
  const options = {
    idempotent,
    inFlightMax: pick(1, 5),
    batchMax: pick(1, 8),
    lingerMs: [0, 0, 5, 50, 20][pick(0, 4)] as number,
    bufferMax: pick(1, 20),
    keyless: rand() < 0.5 ? ('sticky' as const) : ('round-robin' as const),
    sendTimeoutMs,
  }
  const producer = new Producer(router, 'q', options)
  const keys = ['a', 'b', 'c', undefined, undefined]
  type Outcome = { ok: true; id: number; partition: number } | { ok: false; error: unknown }
  const sends: {
    body: string
    key: string | undefined
    at: number
    outcome?: Outcome
    settledAt?: number
  }[] = []
  const sending = (async () => {
    for (let i = 0; i < (bursty ? 150 : 60); i++) {
      const body = rand() < 0.04 ? `bad${i}` : `m${i}`
      const key = keys[pick(0, keys.length - 1)]
      const s: (typeof sends)[number] = { body, key, at: Date.now() }
      sends.push(s)
      const p = producer.send({ body, key }).then(
        (r) => {
          s.outcome = { ok: true, id: r.id, partition: r.partition }
          s.settledAt = Date.now()
        },
        (error: unknown) => {
          s.outcome = { ok: false, error }
          s.settledAt = Date.now()
        },
      )
      if (rand() < (bursty ? 0.02 : 0.3)) await p
      else if (rand() < (bursty ? 0.1 : 0.5)) await new Promise((r) => setTimeout(r, pick(0, 200)))
      if (rand() < 0.05) await producer.flush()
    }
  })()
  let sent = false
  void sending.then(() => {
    sent = true
  })
  for (let i = 0; i < 3_000 && !sent; i++) await vi.advanceTimersByTimeAsync(100)
  if (!sent) problems.push('the sends did not end')
  // close() settles what it accepted within the delivery timeout plus the deadline.
  const closing = Date.now()
  let closedAt: number | undefined
  void producer.close().then(() => {
    closedAt = Date.now()
  })
  for (let i = 0; i < 400 && closedAt === undefined; i++) await vi.advanceTimersByTimeAsync(100)
  if (closedAt === undefined) problems.push('close() did not resolve')
  else if (closedAt - closing > sendTimeoutMs + deadlineMs + 1_500)
    problems.push(`close() took ${closedAt - closing} ms`)
  for (let i = 0; i < 200 && sends.some((s) => !s.outcome); i++) await vi.advanceTimersByTimeAsync(100)
  // Every apply under way lands (a lost reply's request, a silent replica's).
  await vi.advanceTimersByTimeAsync(10_000)
  leader.end()
  router.close()
  const where = new Map<string, { partition: number; id: number }[]>()
  for (const [partition, log] of logs.entries())
    for (const [i, m] of log.entries())
      where.set(m.body, [...(where.get(m.body) ?? []), { partition, id: i + 1 }])
  const bound = sendTimeoutMs + deadlineMs + 1_500
  for (const s of sends) {
    const at = where.get(s.body) ?? []
    const o = s.outcome
    if (!o) {
      problems.push(`${s.body} never settled`)
      continue
    }
    if ((s.settledAt as number) - s.at > bound)
      problems.push(`${s.body} settled after ${(s.settledAt as number) - s.at} ms (bound ${bound})`)
    if (o.ok) {
      if (at.length === 0) problems.push(`${s.body} resolved but not stored`)
      else if (!at.some((w) => w.partition === o.partition && w.id === o.id))
        problems.push(`${s.body} resolved as ${o.partition}/${o.id}, stored at ${JSON.stringify(at)}`)
      if (idempotent && at.length > 1) problems.push(`${s.body} stored ${at.length} times`)
    } else if (o.error instanceof SendOutcomeUnknownError) {
      if (idempotent && at.length > 1) problems.push(`${s.body} stored ${at.length} times (outcome unknown)`)
    } else if (at.length > 0)
      problems.push(`${s.body} failed (${String(o.error)}) but stored at ${JSON.stringify(at)}`)
  }
  if (idempotent) {
    // A partition stores the producer's messages in the order they were sent.
    const order = new Map(sends.map((s, i) => [s.body, i]))
    logs.forEach((log, partition) => {
      const seq = log.map((m) => order.get(m.body) as number)
      for (let i = 1; i < seq.length; i++)
        if ((seq[i] as number) < (seq[i - 1] as number))
          problems.push(`partition ${partition} stored ${log[i]?.body} after ${log[i - 1]?.body}`)
    })
  }
  return problems
}

describe('a producer over a partition that answers late, loses replies and fails over (seeded)', () => {
  it.each([
    ['one leader', false, 60],
    ['failovers and silent leaders', true, 60],
  ])(
    'with %s: a send resolves only once stored, fails only unstored or as outcome unknown, in order, within its bound',
    (_, failover, defaultSeeds) => runSeeds(defaultSeeds, (seed) => run(seed, failover)),
    600_000,
  )
})
