import type { Counters, Depth, PartitionInfo, WeightInfo } from '@mq/console'
import type { PartitionStats, QueueRoute } from '@mq/protocol'
import { addWeightFigures, noWeightFigures } from '../metrics/weight-figures'

/** A queue's figures summed over its partitions. */
export interface QueueFigures {
  readonly depth: Depth
  /** Sorted by weight. */
  readonly weights: readonly WeightInfo[]
  readonly partitions: readonly PartitionInfo[]
  /** The partitions' counters, summed. */
  readonly counters: Counters
}

export const NO_COUNTS: Counters = {
  enqueued: 0,
  delivered: 0,
  acked: 0,
  nacked: 0,
  expired: 0,
  deadLettered: 0,
  discarded: 0,
}

/**
 * Sums the per-partition stats of one queue: counts add up, the oldest age is the largest.
 * Shares are averaged over the partitions weighted by each partition's lease window (so the
 * achieved share is the fraction of the queue's recent leases the weight got, and the target
 * the fraction it should have got); when no partition leased anything recently, every
 * partition counts the same. A weight absent from a partition has shares 0 there.
 */
export function queueFigures(stats: readonly PartitionStats[], route?: QueueRoute): QueueFigures {
  const windowTotal = stats.reduce((sum, p) => sum + p.windowLeases, 0)
  const partitionWeight = (p: PartitionStats) =>
    windowTotal > 0 ? p.windowLeases / windowTotal : stats.length > 0 ? 1 / stats.length : 0
  const byWeight = new Map<number, { -readonly [K in keyof WeightInfo]: WeightInfo[K] }>()
  for (const p of stats) {
    const share = partitionWeight(p)
    for (const w of p.weights) {
      let sum = byWeight.get(w.weight)
      if (!sum) {
        sum = { weight: w.weight, ...noWeightFigures() }
        byWeight.set(w.weight, sum)
      }
      addWeightFigures(sum, w, share)
    }
  }
  const weights = [...byWeight.values()].sort((a, b) => a.weight - b.weight)
  const depth: Depth = {
    ready: weights.reduce((n, w) => n + w.ready, 0),
    delayed: weights.reduce((n, w) => n + w.delayed, 0),
    leased: weights.reduce((n, w) => n + w.leased, 0),
    dead: weights.reduce((n, w) => n + w.dead, 0),
    waiting: stats.reduce((n, p) => n + p.waiting, 0),
    oldestAgeMs: weights.reduce((n, w) => Math.max(n, w.oldestAgeMs), 0),
  }
  const leaders = new Map(route?.partitions.map((p) => [p.partition, p.leaderId]) ?? [])
  const partitions = stats
    .map((p) => ({
      partition: p.partition,
      groupId: p.groupId,
      leaderId: leaders.get(p.partition) ?? '',
      messages: p.messages,
      windowLeases: p.windowLeases,
      waiting: p.waiting,
    }))
    .sort((a, b) => a.partition - b.partition)
  const counters = { ...NO_COUNTS }
  for (const p of stats) {
    for (const k of Object.keys(counters) as (keyof Counters)[]) counters[k] += p.counters?.[k] ?? 0
  }
  return { depth, weights, partitions, counters }
}

/** All the messages a depth counts. */
export function storedMessages(d: Depth): number {
  return d.ready + d.delayed + d.leased + d.dead + d.waiting
}
