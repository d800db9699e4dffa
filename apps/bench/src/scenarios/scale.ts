import { round } from '../histogram'
import type { ScenarioResult } from '../result'
import { connect, queueName, type Target, withFacts, withTarget } from './common'
import { PRODUCE_DEFAULTS, produceInto } from './produce'

export interface ScaleOptions {
  /** One produce run per entry, each into a fresh queue with this many partitions. */
  readonly partitions: readonly number[]
  readonly count: number
  readonly sizeBytes: number
  readonly inFlight: number
  readonly timeLimitMs: number
}

export const SCALE_DEFAULTS: ScaleOptions = {
  partitions: [1, 2, 4, 8],
  count: 10_000,
  sizeBytes: 100,
  inFlight: 256,
  timeLimitMs: 60_000,
}

/**
 * The `scale` scenario, by partitions: the same produce run into queues of 1, 2, 4 …
 * partitions (spread by the cluster over its data groups). The number of data groups is the
 * cluster's own; growing them is left to `mq cluster scale` before the run.
 */
export async function runScale(target: Target, o: ScaleOptions): Promise<ScenarioResult> {
  return withTarget(target, async ({ servers, facts }) => {
    const admin = await connect(servers)
    const metrics: Record<string, number> = {}
    const latency: ScenarioResult['latency'] = {}
    const base: { msgsPerS?: number } = {}
    try {
      for (const p of o.partitions) {
        const queue = queueName(`scale${p}`)
        const route = await admin.admin.createQueue(queue, { partitions: p })
        metrics[`p${p}DataGroups`] = new Set(route.partitions.map((x) => x.groupId)).size
        try {
          const run = await produceInto(servers, queue, {
            ...PRODUCE_DEFAULTS,
            count: o.count,
            sizeBytes: o.sizeBytes,
            inFlight: o.inFlight,
            partitions: p,
            timeLimitMs: o.timeLimitMs,
          })
          const rate = round(run.acked / (run.elapsedMs / 1000), 0)
          base.msgsPerS ??= rate
          metrics[`p${p}MsgsPerS`] = rate
          metrics[`p${p}VsP${o.partitions[0]}`] = round(rate / Math.max(1, base.msgsPerS), 2)
          if (run.ack.count > 0) Object.assign(latency, { [`ack p${p}`]: run.ack.summary() })
        } finally {
          await admin.admin.deleteQueue(queue).catch(() => {})
        }
      }
    } finally {
      await admin.close()
    }
    return withFacts(
      { scenario: 'scale', params: { ...o, partitions: o.partitions.join(',') }, metrics, latency },
      facts,
    )
  })
}
