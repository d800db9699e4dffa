import type { MqClient } from '@mq/router-client'
import { type CheckReport, check } from './checker'
import { drainBacklog, drainQueue } from './drain-backlog'
import { History } from './history'
import type { Prng } from './prng'
import { runConsumer, runProducer, Workload } from './workers'

/** The visibility timeout of a steady-load queue (short, so that abandoned leases come back). */
export const STEADY_VISIBILITY_MS = 2_000

export interface LoadOutcome {
  readonly report: CheckReport
  /** Ok enqueues never acked by the end of the drain. */
  readonly unacked: number
  readonly drained: boolean
}

/**
 * What is wrong with a load's outcome, one line a kind (empty when nothing is): lost or
 * unexpected messages, overlapping or reused leases, deliveries after an ack, messages
 * stored twice, FIFO violations, messages stored out of send order, enqueues refused for
 * good, an unfinished drain.
 */
export function outcomeProblems(o: LoadOutcome): string[] {
  const r = o.report
  const problems: string[] = []
  const counts: [string, number][] = [
    ['lost', r.lost],
    ['unexpected', r.unexpected],
    ['overlapping leases', r.overlaps],
    ['delivered after an ack', r.deliveredAfterAck],
    ['stored twice', r.storedTwice],
    ['lease ids reused', r.leaseReused],
    ['FIFO violations', r.fifoViolations],
    ['stored out of send order', r.producerOrder],
    ['enqueues refused for good', r.refused],
    ['unacked after the drain', o.unacked],
  ]
  for (const [what, n] of counts) if (n > 0) problems.push(`${n} ${what}`)
  if (!o.drained) problems.push('the drain did not finish')
  if (problems.length > 0)
    problems.push(...r.anomalies.slice(0, 10).map((a) => `${a.kind} ${a.body}: ${a.detail}`))
  return problems
}

/** Producers and consumers running against one queue, recording a history. */
export interface SteadyLoad {
  readonly load: Workload
  readonly history: History
  /**
   * Stops producing, drains (consumers ack everything) while the backlog shrinks — until
   * nothing was acked for `drainStallMs` (30 s) or `drainMsMax` (5 min) passed — then until
   * the queue holds nothing but dead letters (as a fault run's drain), and checks the history.
   */
  finish(drainMsMax?: number, drainStallMs?: number): Promise<LoadOutcome>
  /** Stops every worker without draining (after a failure). */
  abort(): void
}

/**
 * Starts a steady produce/consume load on `queue` (which must exist): `producers` workers
 * through the SDK's idempotent producer (4 sends in flight each), `consumers` workers that
 * ack most messages, nack 5 % and abandon 3 % (workers.ts).
 */
export function startSteadyLoad(
  client: MqClient,
  queue: string,
  prng: Prng,
  options: { producers?: number; consumers?: number } = {},
): SteadyLoad {
  const history = new History()
  const load = new Workload(history, queue)
  const producers = Array.from({ length: options.producers ?? 2 }, (_, i) =>
    // Round-robin: every partition gets sends all the time, so that a move's pause shows.
    runProducer(client, load, prng.fork(), {
      worker: `p${i}`,
      concurrency: 4,
      opsMax: 1_000_000,
      keyless: 'round-robin',
    }),
  )
  const consumers = Array.from({ length: options.consumers ?? 2 }, (_, i) =>
    runConsumer(client, load, prng.fork(), {
      worker: `c${i}`,
      leaseMax: 16,
      visibilityMs: STEADY_VISIBILITY_MS,
      waitMs: 300,
      attemptMs: 1_500,
      nackRatio: 0.05,
      abandonRatio: 0.03,
      holdMsMax: 100,
      opsMax: 1_000_000,
    }),
  )
  return {
    load,
    history,
    // The drain goes on while the backlog shrinks (as a fault run's): a fixed 60 s failed as
    // "not drained" on a slow machine with the backlog still going down.
    finish: async (drainMsMax = 300_000, drainStallMs = 30_000) => {
      load.producing = false
      await Promise.all(producers)
      load.draining = true
      const drainStart = Date.now()
      const backlogDrained = await drainBacklog(() => load.unackedCount, drainStallMs, drainMsMax)
      // Then until the queue is empty, as a fault run's drain: a message whose enqueue's
      // outcome was unknown, one whose ack of unknown outcome did not apply, one stored twice
      // must be delivered (and checked) too, not left unseen when the consumers stop.
      const drained =
        backlogDrained && (await drainQueue(client, queue, drainStallMs, drainStart + drainMsMax))
      load.consuming = false
      await Promise.all(consumers)
      return { report: check(history.ops), unacked: load.unacked().length, drained }
    },
    abort: () => {
      load.producing = false
      load.consuming = false
    },
  }
}
