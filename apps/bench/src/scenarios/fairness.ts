import { MemoryEngine } from '@mq/kv-storage'
import { CommandType, DirectPartition } from '@mq/weighted-queue'
import { InvalidArgumentError } from 'commander'
import type { ClusterFacts } from '../cluster'
import { round } from '../histogram'
import { Progress } from '../progress'
import type { FairnessSeries, ScenarioResult, SharePoint } from '../result'
import { closeAll, connect, queueName, type Target, withFacts, withTarget } from './common'
import { UnderWay } from './under-way'

/** Sends awaited in batches of this many while the backlog is built. */
const SENDS_IN_FLIGHT_MAX = 5_000

export interface FairnessOptions {
  readonly weights: readonly number[]
  /** Each weight w gets a backlog of w × perWeightUnit, so all stay backlogged together. */
  readonly perWeightUnit: number
  /** Shares are measured over sliding windows of this many leases. */
  readonly windowLeases: number
  /** The worst deviation allowed; the CLI exits 1 beyond it. */
  readonly tolerance: number
  readonly inProcess: boolean
  readonly timeLimitMs: number
}

export const FAIRNESS_DEFAULTS: FairnessOptions = {
  weights: [1, 3, 9],
  perWeightUnit: 200,
  windowLeases: 260,
  tolerance: 0.05,
  inProcess: false,
  timeLimitMs: 120_000,
}

/** Parses `1,3,9`: distinct integers 1..1000. */
export function parseWeights(value: string): number[] {
  const ws = value.split(',').map((s) => Number(s.trim()))
  if (ws.length === 0 || ws.some((w) => !Number.isInteger(w) || w < 1 || w > 1000)) {
    throw new InvalidArgumentError('expected weights 1..1000, comma-separated (e.g. 1,3,9).')
  }
  if (new Set(ws).size !== ws.length) throw new InvalidArgumentError('weights must be distinct.')
  return ws
}

export interface FairnessAnalysis extends FairnessSeries {
  /** Leases measured: those made while every weight was still backlogged. */
  readonly measured: number
  /** Largest |achieved − target| over every full window. */
  readonly deviationMax: number
  /** |achieved − target| over all measured leases, largest over the weights. */
  readonly overallDeviation: number
}

/**
 * Analyses a lease order (the weight of each lease, in order). Only the leases made while
 * every weight was backlogged count: up to the point where the first weight's backlog
 * (`backlog[i]`) is exhausted. Windows of `window` leases (all of them when fewer) slide by a
 * quarter window.
 */
export function analyseShares(
  order: readonly number[],
  weights: readonly number[],
  backlog: readonly number[],
  window: number,
): FairnessAnalysis {
  const sum = weights.reduce((a, b) => a + b, 0)
  const targets = weights.map((w) => w / sum)
  const index = new Map(weights.map((w, i) => [w, i]))
  // The first lease after which some weight has nothing left.
  const seen = weights.map(() => 0)
  let measured = order.length
  for (let k = 0; k < order.length; k++) {
    const i = index.get(order[k] as number)
    if (i === undefined)
      throw new Error(`lease of weight ${order[k]}, which is not one of ${weights.join(',')}`)
    seen[i] = (seen[i] ?? 0) + 1
    if (seen[i] === backlog[i]) {
      measured = k + 1
      break
    }
  }
  const samples: SharePoint[] = []
  let deviationMax = 0
  // Fewer measured leases than a window: one window of them all (no window at all read as no
  // deviation, a pass however unfair the order).
  const size = Math.min(window, measured)
  const step = Math.max(1, Math.floor(size / 4))
  const sample = (end: number): void => {
    const counts = weights.map(() => 0)
    for (let k = end - size; k < end; k++) {
      const i = index.get(order[k] as number) as number
      counts[i] = (counts[i] ?? 0) + 1
    }
    const shares = counts.map((c) => round(c / size, 4))
    shares.forEach((s, i) => {
      deviationMax = Math.max(deviationMax, Math.abs(s - (targets[i] ?? 0)))
    })
    samples.push({ leases: end, shares })
  }
  let end = size
  for (; size > 0 && end <= measured; end += step) sample(end)
  // The last window ends at the last measured lease: sliding by a step left up to a step's
  // leases before it in no window, where a scheduler that runs one weight dry shows.
  if (size > 0 && end - step < measured) sample(measured)
  const totals = weights.map(() => 0)
  for (let k = 0; k < measured; k++) {
    const i = index.get(order[k] as number) as number
    totals[i] = (totals[i] ?? 0) + 1
  }
  const overallDeviation = Math.max(
    ...totals.map((c, i) => Math.abs(c / Math.max(1, measured) - (targets[i] ?? 0))),
  )
  return {
    weights,
    targets: targets.map((t) => round(t, 4)),
    samples,
    measured,
    deviationMax: round(deviationMax, 4),
    overallDeviation: round(overallDeviation, 4),
  }
}

/** Leases the backlog through DirectPartition over a MemoryEngine; returns the lease order. */
async function inProcessOrder(o: FairnessOptions, backlog: readonly number[]): Promise<number[]> {
  const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
  const body = new Uint8Array(16)
  let now = 1_000_000
  // Interleave the enqueues in batches, as producers would.
  const left = [...backlog]
  while (left.some((n) => n > 0)) {
    const messages = o.weights.flatMap((w, i) => {
      const n = Math.min(100, left[i] ?? 0)
      left[i] = (left[i] ?? 0) - n
      return Array.from({ length: n }, () => ({ weight: w, body }))
    })
    const r = await q.apply({ type: CommandType.Enqueue, messages }, now++)
    if (r.type !== 'enqueue') throw new Error(`enqueue failed: ${JSON.stringify(r)}`)
  }
  const total = backlog.reduce((a, b) => a + b, 0)
  const order: number[] = []
  const deadline = performance.now() + o.timeLimitMs
  for (let rounds = 0; order.length < total && rounds < total && performance.now() < deadline; rounds++) {
    const r = await q.apply(
      { type: CommandType.Lease, consumerId: 'bench', max: 16, visibilityMs: 60_000 },
      now++,
    )
    if (r.type !== 'lease') throw new Error(`lease failed: ${JSON.stringify(r)}`)
    if (r.leases.length === 0) break
    for (const l of r.leases) order.push(l.weight)
    await q.apply({ type: CommandType.Ack, leaseIds: r.leases.map((l) => l.leaseId) }, now++)
  }
  return order
}

/**
 * Produces the backlog into a 1-partition queue, then consumes it in lease order. Returns the
 * order and what is known of the cluster.
 */
async function clusterOrder(
  target: Target,
  o: FairnessOptions,
  backlog: readonly number[],
): Promise<{ order: number[]; facts: ClusterFacts }> {
  return withTarget(target, async ({ servers, facts }) => {
    const admin = await connect(servers)
    const queue = queueName('fairness')
    const client = await connect(servers)
    try {
      await admin.admin.createQueue(queue, { partitions: 1 })
      const producer = client.producer(queue)
      const body = new Uint8Array(16)
      const left = [...backlog]
      const sends: Promise<unknown>[] = []
      while (left.some((n) => n > 0)) {
        o.weights.forEach((w, i) => {
          const n = Math.min(50, left[i] ?? 0)
          left[i] = (left[i] ?? 0) - n
          for (let k = 0; k < n; k++) sends.push(producer.send({ body, weight: w }))
        })
        // Bounded in flight: the SDK refuses sends past its buffer and waiting list (20,000).
        if (sends.length >= SENDS_IN_FLIGHT_MAX) await Promise.all(sends.splice(0))
      }
      await Promise.all(sends)
      await producer.flush()
      const total = backlog.reduce((a, b) => a + b, 0)
      const order: number[] = []
      const progress = new Progress('fairness')
      const consumer = client.consumer(queue, { prefetch: 16, waitMs: 500 })
      const timer = setTimeout(() => void consumer.close(), o.timeLimitMs)
      const acks = new UnderWay()
      try {
        for await (const m of consumer) {
          order.push(m.weight)
          // Handled at once: a failed ack left for allSettled at the end ended the process.
          acks.add(m.ack().catch(() => {}))
          progress.update(order.length, total, 'leased')
          if (order.length >= total) break
        }
      } finally {
        clearTimeout(timer)
        progress.end()
        await acks.settled()
        await consumer.close()
      }
      return { order, facts }
    } finally {
      await admin.admin.deleteQueue(queue).catch(() => {})
      await closeAll([admin, client])
    }
  })
}

/** The `fairness` scenario: achieved vs target share per weight over time; worst deviation. */
export async function runFairness(target: Target, o: FairnessOptions): Promise<ScenarioResult> {
  const backlog = o.weights.map((w) => w * o.perWeightUnit)
  const start = performance.now()
  const { order, facts } = o.inProcess
    ? { order: await inProcessOrder(o, backlog), facts: { params: {}, notes: [] } }
    : await clusterOrder(target, o, backlog)
  const elapsedS = (performance.now() - start) / 1000
  const a = analyseShares(order, o.weights, backlog, o.windowLeases)
  const result: ScenarioResult = {
    scenario: o.inProcess ? 'fairness-in-process' : 'fairness',
    params: { ...o, weights: o.weights.join(',') },
    metrics: {
      leased: order.length,
      measured: a.measured,
      deviationMax: a.deviationMax,
      overallDeviation: a.overallDeviation,
      elapsedS: round(elapsedS, 2),
    },
    latency: {},
    fairness: { weights: a.weights, targets: a.targets, samples: a.samples },
    notes: [
      `targets ${a.weights.map((w, i) => `w${w}=${a.targets[i]}`).join(' ')}; worst window deviation ${a.deviationMax}` +
        (a.measured === 0
          ? `: no lease was measured (${order.length} leased), fairness not determined`
          : a.deviationMax > o.tolerance
            ? ` exceeds the tolerance ${o.tolerance}`
            : ` within ${o.tolerance}`),
    ],
  }
  return withFacts(result, facts)
}

/**
 * Why a fairness result failed, one phrase each; empty when it passed: a window's deviation
 * past the tolerance of its run (`params.tolerance`), or no lease measured (its deviation
 * reads 0 only because no window was there to deviate).
 */
export function fairnessFailures(r: ScenarioResult): string[] {
  const m = r.metrics
  const tolerance = Number(r.params.tolerance)
  if (!((m.measured ?? 0) > 0))
    return [`no lease was measured (${m.leased ?? 0} leased): fairness not determined`]
  if ((m.deviationMax ?? 0) > tolerance)
    return [`worst window deviation ${m.deviationMax} exceeds the tolerance ${tolerance}`]
  return []
}
