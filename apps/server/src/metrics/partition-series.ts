import type { WeightStats } from '@mq/protocol'
import { addWeightFigures, largestTargets, noWeightFigures } from './weight-figures'

/**
 * Per-weight series of one partition in a scrape, at most: those of the weights with the
 * largest target share. The others are summed under the weight label OTHER_WEIGHTS, so a sum
 * over weights stays the partition's total. A partition may hold messages of 1,000 weights:
 * 64 such partitions were 448,000 lines (36 MB) per scrape.
 */
export const WEIGHT_SERIES_MAX = 16
/** The `weight` label of the weights past WEIGHT_SERIES_MAX, summed (ages: the oldest). */
export const OTHER_WEIGHTS = 'other'
/** Lines rendered between two event-loop turns: a large scrape never holds the Raft ticks up. */
const LINES_PER_TURN = 2_000

/** `mq_partition_messages_total`'s `event` label for each of a partition's counters. */
const EVENT_NAMES: Readonly<Record<string, string>> = { deadLettered: 'dead_lettered' }
const STATES = ['ready', 'delayed', 'leased', 'dead'] as const

/** A weight's stats with its `weight` label: the weight, or OTHER_WEIGHTS. */
type WeightSample = Omit<Readonly<WeightStats>, 'weight'> & { readonly weight: string }

/** What a scrape keeps of one led partition's stats (weights cut to WEIGHT_SERIES_MAX + 1). */
export interface PartitionSample {
  readonly queue: string
  readonly partition: number
  readonly waiting: number
  readonly counters: Readonly<Record<string, number>>
  readonly weights: readonly WeightSample[]
}

/** What samplePartition reads of a partition's stats. */
export interface StatsRead {
  readonly weights: readonly WeightStats[]
  readonly waiting: number
  readonly counters?: object | undefined
}

export function samplePartition(queue: string, partition: number, stats: StatsRead): PartitionSample {
  const kept = largestTargets(stats.weights, WEIGHT_SERIES_MAX)
  const weights: WeightSample[] = kept.map((w) => ({ ...w, weight: String(w.weight) }))
  if (kept.length < stats.weights.length) {
    const shown = new Set(kept)
    const other = noWeightFigures()
    for (const w of stats.weights) if (!shown.has(w)) addWeightFigures(other, w)
    weights.push({ weight: OTHER_WEIGHTS, ...other })
  }
  const counters: Record<string, number> = {}
  for (const [key, count] of Object.entries(stats.counters ?? {}) as [string, number][])
    counters[EVENT_NAMES[key] ?? key] = count
  return { queue, partition, waiting: stats.waiting, counters, weights }
}

/** One family of per-partition series: its samples as [labels after queue and partition, value]. */
interface Family {
  readonly name: string
  readonly type: 'gauge' | 'counter'
  readonly help: string
  readonly samples: (p: PartitionSample) => Iterable<readonly [string, number]>
}

function* perWeight(
  p: PartitionSample,
  value: (w: WeightSample) => number,
): Iterable<readonly [string, number]> {
  for (const w of p.weights) yield [`,weight="${escapeLabel(w.weight)}"`, value(w)]
}

const FAMILIES: readonly Family[] = [
  {
    name: 'mq_queue_messages',
    type: 'gauge',
    help: `Messages per state (ready, delayed, leased, dead) and weight, in the partitions this node leads (the ${WEIGHT_SERIES_MAX} weights with the largest target share; the others summed under weight="${OTHER_WEIGHTS}")`,
    *samples(p) {
      for (const w of p.weights)
        for (const state of STATES) yield [`,weight="${escapeLabel(w.weight)}",state="${state}"`, w[state]]
    },
  },
  {
    name: 'mq_queue_waiting_messages',
    type: 'gauge',
    help: 'Messages waiting behind an earlier message of their key (ordered keys), in the partitions this node leads',
    samples: (p) => [['', p.waiting]],
  },
  {
    name: 'mq_queue_oldest_age_seconds',
    type: 'gauge',
    help: `Age of the oldest ready message per weight, in the partitions this node leads (weight="${OTHER_WEIGHTS}": the oldest of the weights past the first ${WEIGHT_SERIES_MAX})`,
    samples: (p) => perWeight(p, (w) => w.oldestAgeMs / 1000),
  },
  {
    name: 'mq_queue_target_share',
    type: 'gauge',
    help: 'Share of leases the weighted scheduler aims to give this weight (weight / sum of backlogged weights)',
    samples: (p) => perWeight(p, (w) => w.targetShare),
  },
  {
    name: 'mq_queue_achieved_share',
    type: 'gauge',
    help: 'Share of the recent leases this weight got',
    samples: (p) => perWeight(p, (w) => w.achievedShare),
  },
  {
    name: 'mq_partition_messages_total',
    type: 'counter',
    help: 'What happened to messages in the partitions this node leads since each was created (replicated counts): enqueued, delivered (leases handed out), acked, nacked, expired (leases past their deadline), dead_lettered, discarded (outlived the TTL)',
    *samples(p) {
      for (const [event, count] of Object.entries(p.counters)) yield [`,event="${escapeLabel(event)}"`, count]
    },
  },
]

/**
 * The Prometheus text of the per-partition families for `samples`, those of the queues `sees`
 * accepts (all when undefined), each sample ending with `labelsAfter` (e.g. `,node="n1"`).
 * Rendered here rather than by prom-client so that it yields to the event loop every
 * LINES_PER_TURN lines, and leaves out the queues a caller may not see before rendering them.
 */
export async function renderPartitionSeries(
  samples: readonly PartitionSample[],
  labelsAfter: string,
  sees?: (queue: string) => boolean,
): Promise<string> {
  const shown = sees ? samples.filter((p) => sees(p.queue)) : samples
  // Joined a turn's lines at a time: one join of every line held the loop too.
  const chunks: string[] = []
  let lines: string[] = []
  for (const family of FAMILIES) {
    lines.push(`# HELP ${family.name} ${family.help}\n# TYPE ${family.name} ${family.type}\n`)
    for (const p of shown) {
      const head = `${family.name}{queue="${escapeLabel(p.queue)}",partition="${p.partition}"`
      for (const [labels, value] of family.samples(p))
        lines.push(`${head}${labels}${labelsAfter}} ${formatValue(value)}\n`)
      if (lines.length >= LINES_PER_TURN) {
        chunks.push(lines.join(''))
        lines = []
        await new Promise<void>((resolve) => setImmediate(resolve))
      }
    }
    lines.push('\n')
  }
  chunks.push(lines.join(''))
  return chunks.join('')
}

/** A label value as the text format writes it (backslash, double quote and newline escaped). */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')
}

function formatValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Number.POSITIVE_INFINITY) return '+Inf'
  if (value === Number.NEGATIVE_INFINITY) return '-Inf'
  return String(value)
}
