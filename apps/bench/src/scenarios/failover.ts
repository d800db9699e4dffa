import { BenchCluster } from '../cluster'
import { LatencyHistogram, latencyOf, round, Timeline } from '../histogram'
import { Progress } from '../progress'
import type { ScenarioResult } from '../result'
import { closeAll, connect, pause, queueName } from './common'
import { paced } from './pacer'

export interface FailoverOptions {
  readonly ratePerS: number
  readonly durationMs: number
  readonly partitions: number
  /** Whose leader is hit: partition 0's data group, or the meta group. */
  readonly kill: 'data' | 'meta'
  /**
   * kill: SIGKILL (the process dies, its sockets close); pause: SIGSTOP until two thirds of
   * the run, then SIGCONT (it falls silent, its sockets stay open, then it comes back).
   */
  readonly fault: 'kill' | 'pause'
}

export const FAILOVER_DEFAULTS: FailoverOptions = {
  ratePerS: 500,
  durationMs: 12_000,
  partitions: 2,
  kill: 'data',
  fault: 'kill',
}

/** The drain after the load ends after this long without a new message. */
const DRAIN_IDLE_MS = 5_000
const DRAIN_MAX_MS = 60_000

/**
 * The `failover` scenario. Starts its own 3-node cluster (it needs the PIDs), produces at a
 * fixed rate, and at a third of the run SIGKILLs (or SIGSTOPs until two thirds, `fault`) the node that leads partition 0's data
 * group (admin.describeQueue → partitions[0].leaderId) or the meta group (clusterStatus). Measures the longest gap between two
 * acknowledgements of one partition (the stall) and, by draining the queue afterwards, how many acknowledged
 * messages were lost (must be 0).
 */
export async function runFailover(
  local: { readonly fromSource?: boolean },
  o: FailoverOptions,
): Promise<ScenarioResult> {
  const cluster = await BenchCluster.start({ fromSource: local.fromSource ?? false })
  const admin = await connect(cluster.servers)
  const producerClient = await connect(cluster.servers)
  const queue = queueName('failover')
  try {
    await admin.admin.createQueue(queue, { partitions: o.partitions })
    const count = Math.max(1, Math.round((o.ratePerS * o.durationMs) / 1000))
    const acked = new Set<number>()
    let failed = 0
    const ack = new LatencyHistogram()
    const timeline = new Timeline(250)
    const progress = new Progress('failover')
    const start = performance.now()
    // The stall is measured per partition: the others keep acking while one fails over.
    const lastAckAt = new Map<number, number>()
    // Gaps that end after the kill are the stall; those before it are the baseline.
    let stallMsMax = 0
    let stallAtS = 0
    let gapMsMaxBeforeKill = 0
    let killAtMs = Number.POSITIVE_INFINITY
    let killedNode = ''
    let killAtS = 0
    const killer = (async () => {
      await pause(o.durationMs / 3)
      const leader =
        o.kill === 'meta'
          ? (await admin.admin.clusterStatus()).metaLeaderId
          : (await admin.admin.describeQueue(queue)).partitions[0]?.leaderId
      if (!leader) throw new Error(`no ${o.kill} leader to kill (queue ${queue})`)
      killedNode = leader
      killAtMs = performance.now()
      killAtS = (killAtMs - start) / 1000
      if (o.fault === 'kill') {
        await cluster.kill(leader)
        return
      }
      cluster.pause(leader)
      await pause(o.durationMs / 3)
      cluster.resume(leader)
    })()
    // Round-robin: the stall is measured per partition, so every partition gets sends all along.
    const producer = producerClient.producer(queue, { keyless: 'round-robin' })
    const sends = await paced(o.ratePerS, count, async (seq) => {
      const body = new Uint8Array(8)
      new DataView(body.buffer).setUint32(0, seq)
      const t0 = performance.now()
      let partition: number
      try {
        partition = (await producer.send({ body })).partition
      } catch {
        failed++
        return
      }
      const t1 = performance.now()
      acked.add(seq)
      progress.update(acked.size, count, 'acked')
      ack.record(t1 - t0)
      timeline.record(t1 - start, t1 - t0)
      // A partition's first ack opens its series (connection set-up is not a stall).
      const previous = lastAckAt.get(partition)
      lastAckAt.set(partition, t1)
      if (previous === undefined) return
      const gap = t1 - previous
      if (t1 < killAtMs) {
        gapMsMaxBeforeKill = Math.max(gapMsMaxBeforeKill, gap)
      } else if (gap > stallMsMax) {
        stallMsMax = gap
        stallAtS = (t1 - start) / 1000
      }
    })
    await Promise.allSettled(sends)
    await killer
    progress.end()
    await producer.close().catch(() => {})

    // Drain with a fresh client: every acknowledged sequence must come back.
    const drainClient = await connect(cluster.nodes.filter((n) => n.child).map((n) => n.address))
    const seen = new Set<number>()
    try {
      const consumer = drainClient.consumer(queue, { prefetch: 256, waitMs: 500 })
      let idle = setTimeout(() => void consumer.close(), DRAIN_IDLE_MS * 2)
      const cap = setTimeout(() => void consumer.close(), DRAIN_MAX_MS)
      const acks: Promise<void>[] = []
      try {
        for await (const m of consumer) {
          clearTimeout(idle)
          idle = setTimeout(() => void consumer.close(), DRAIN_IDLE_MS)
          seen.add(new DataView(m.body.buffer, m.body.byteOffset, 4).getUint32(0))
          acks.push(m.ack().catch(() => {}))
          if ([...acked].every((s) => seen.has(s)) && seen.size >= acked.size) break
        }
      } finally {
        clearTimeout(idle)
        clearTimeout(cap)
        await Promise.allSettled(acks)
        await consumer.close()
      }
    } finally {
      await drainClient.close()
    }
    const lost = [...acked].filter((s) => !seen.has(s)).length
    return {
      scenario: 'failover',
      params: { ...o },
      metrics: {
        sent: count,
        acked: acked.size,
        failedSends: failed,
        stallMsMax: round(stallMsMax, 1),
        gapMsMaxBeforeKill: round(gapMsMaxBeforeKill, 1),
        killAtS: round(killAtS, 2),
        lost,
        drained: seen.size,
      },
      latency: latencyOf({ ack }),
      timeline: timeline.points(o.durationMs),
      notes: [
        `${o.fault === 'kill' ? 'killed' : 'paused (SIGSTOP, SIGCONT a third of the run later)'} ${killedNode} (${o.kill === 'meta' ? 'the meta leader' : "leader of partition 0's data group"}) at ${round(killAtS, 2)} s; longest stall ended at ${round(stallAtS, 2)} s`,
        ...(lost > 0 ? [`LOST ${lost} acknowledged messages`] : []),
      ],
    }
  } finally {
    await closeAll([admin, producerClient])
    await cluster.stop()
  }
}
