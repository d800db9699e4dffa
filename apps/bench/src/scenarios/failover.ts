import type { MqClient } from '@mq/router-client'
import { BenchCluster } from '../cluster'
import { LatencyHistogram, latencyOf, round, Timeline } from '../histogram'
import { Progress } from '../progress'
import type { ScenarioResult } from '../result'
import { type RaftTiming, SERVER_DEFAULT_TIMING, timingAgainstDefault } from '../timing'
import { closeAll, connect, pause, queueName, withFacts } from './common'
import { DrainEnd, type DrainOutcome, drainAcked, drainConclusive } from './drain-acked'
import { paced } from './pacer'
import { type StallSummary, StallTracker } from './stalls'

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

/** How the failover scenario starts its own cluster. */
export interface FailoverCluster {
  /** Run the server from source (tests). */
  readonly fromSource?: boolean
  /** Raft timing of the cluster (default BENCH_DEFAULT_TIMING). */
  readonly timing?: Partial<RaftTiming>
}

/** The drain after the load ends after this long without a new message. */
const DRAIN_IDLE_MS = 5_000
const DRAIN_MAX_MS = 60_000

/**
 * The `failover` scenario. Starts its own 3-node cluster (it needs the PIDs), produces at a
 * fixed rate (round-robin over the partitions), and at a third of the run SIGKILLs (or SIGSTOPs
 * until two thirds, `fault`) the node that leads partition 0's data group
 * (admin.describeQueue) or the meta group (clusterStatus). Measures, per partition, the longest
 * time without an acknowledgement after the fault (the stall; one still open when the sends
 * have all settled counts up to then) against the longest before it, counts the sends that
 * failed and the partitions that never acked again, and, by draining the queue afterwards,
 * how many acknowledged messages were lost (a drain cut short says so instead). Latencies are
 * from each send's intended time. `failoverFailures` says whether the run failed.
 */
export async function runFailover(local: FailoverCluster, o: FailoverOptions): Promise<ScenarioResult> {
  const cluster = await BenchCluster.start({
    fromSource: local.fromSource ?? false,
    ...(local.timing ? { timing: local.timing } : {}),
  })
  const queue = queueName('failover')
  // Connected inside the try whose finally stops the cluster: a connect that failed left its
  // nodes running and their data folder behind (and the CLI held open by their pipes) until an
  // audit.
  const clients: MqClient[] = []
  try {
    const admin = await connect(cluster.servers)
    clients.push(admin)
    const producerClient = await connect(cluster.servers)
    clients.push(producerClient)
    await admin.admin.createQueue(queue, { partitions: o.partitions })
    const count = Math.max(1, Math.round((o.ratePerS * o.durationMs) / 1000))
    const acked = new Set<number>()
    let failed = 0
    let firstFailure = ''
    const ack = new LatencyHistogram()
    const sendLag = new LatencyHistogram()
    const timeline = new Timeline(250)
    const progress = new Progress('failover')
    const start = performance.now()
    // Per partition: the others keep acking while one fails over.
    const stalls = new StallTracker(o.partitions, start)
    const hit = { node: '', atMs: 0, resumeAtMs: 0, partitions: [] as number[] }
    const killer = (async () => {
      await pause(o.durationMs / 3)
      const route = await admin.admin.describeQueue(queue)
      const leader =
        o.kill === 'meta'
          ? (await admin.admin.clusterStatus()).metaLeaderId
          : route.partitions.find((p) => p.partition === 0)?.leaderId
      if (!leader) throw new Error(`no ${o.kill} leader to hit (queue ${queue})`)
      hit.node = leader
      hit.partitions = route.partitions.filter((p) => p.leaderId === leader).map((p) => p.partition)
      hit.atMs = performance.now()
      stalls.fault(hit.atMs)
      if (o.fault === 'kill') {
        await cluster.kill(leader)
        return
      }
      cluster.pause(leader)
      await pause(o.durationMs / 3)
      cluster.resume(leader)
      hit.resumeAtMs = performance.now()
    })()
    killer.catch(() => {}) // awaited below; this only keeps an early failure from going unhandled
    // Round-robin: the stall is measured per partition, so every partition gets sends all along.
    const producer = producerClient.producer(queue, { keyless: 'round-robin' })
    const sent = await paced(o.ratePerS, count, async (seq, intendedAtMs) => {
      sendLag.record(performance.now() - intendedAtMs)
      const body = new Uint8Array(8)
      new DataView(body.buffer).setUint32(0, seq)
      let partition: number
      try {
        partition = (await producer.send({ body })).partition
      } catch (error) {
        if (failed++ === 0) firstFailure = (error as Error).message
        return
      }
      const t1 = performance.now()
      acked.add(seq)
      progress.update(acked.size, count, 'acked')
      ack.record(t1 - intendedAtMs)
      timeline.record(t1 - start, t1 - intendedAtMs)
      stalls.ack(partition, t1)
    })
    const endMs = performance.now()
    const stall = stalls.end(endMs)
    await killer
    progress.end()
    await producer.close().catch(() => {})

    // Partition 0's leader after the fault: the node hit should no longer lead it.
    const leaderAfter =
      o.kill === 'data'
        ? await admin.admin
            .describeQueue(queue)
            .then((r) => r.partitions.find((p) => p.partition === 0)?.leaderId ?? '')
            .catch(() => '')
        : ''

    // Drain with a fresh client: every acknowledged sequence must come back.
    const drainClient = await connect(cluster.nodes.filter((n) => n.child).map((n) => n.address))
    let drain: DrainOutcome
    try {
      drain = await drainAcked(drainClient.consumer(queue, { prefetch: 256, waitMs: 500 }), acked, {
        firstIdleMs: DRAIN_IDLE_MS * 2,
        idleMs: DRAIN_IDLE_MS,
        capMs: DRAIN_MAX_MS,
      })
    } finally {
      await drainClient.close()
    }
    const conclusive = drainConclusive(drain)
    const sec = (ms: number) => round((ms - start) / 1000, 2)
    const result: ScenarioResult = {
      scenario: 'failover',
      params: { ...o },
      metrics: {
        sent,
        acked: acked.size,
        failedSends: failed,
        unrecoveredPartitions: stall.unrecovered.length,
        stallMsMax: round(stall.stallMsMax, 1),
        stallPartition: stall.stallPartition,
        gapMsMaxBeforeKill: round(stall.gapMsMaxBeforeFault, 1),
        killAtS: sec(hit.atMs),
        ...(o.fault === 'pause' ? { resumeAtS: sec(hit.resumeAtMs) } : {}),
        drained: drain.drained,
        ...(conclusive ? { lost: drain.unseen } : { unseenAtDrainEnd: drain.unseen }),
      },
      latency: latencyOf({ ack, sendLag }),
      // The run ends when the last send settled, past the schedule's end (its last acks).
      timeline: timeline.points(endMs - start),
      notes: [
        ...timingNotes(cluster.timing),
        faultNote(o, hit.node, hit.partitions, sec(hit.atMs)),
        stallNote(o, stall, hit.partitions, sec),
        ...(failed > 0 ? [`${failed} sends failed (the first: ${firstFailure})`] : []),
        ...(stall.unrecovered.length > 0
          ? [`partitions ${stall.unrecovered.join(', ')} never acked after the fault`]
          : []),
        ...(o.kill === 'data' && o.fault === 'kill' && leaderAfter === hit.node
          ? [
              `partition 0 was still routed to ${hit.node} after the kill: the route is stale, or the node killed did not lead it`,
            ]
          : []),
        ...drainNotes(drain, DRAIN_MAX_MS),
      ],
    }
    const failures = failoverFailures(result)
    const withVerdict =
      failures.length > 0
        ? { ...result, notes: [`FAILED: ${failures.join('; ')}`, ...(result.notes ?? [])] }
        : result
    return withFacts(withVerdict, cluster.facts())
  } finally {
    await closeAll(clients)
    await cluster.stop()
  }
}

/**
 * Why a failover result failed, one phrase each; empty when it passed. It fails when a send
 * failed, a partition never acked after the fault, an acknowledged message was lost, the
 * drain stopped before it could tell (acknowledged messages not yet seen), or no gap between
 * acks ended after the fault (`stallPartition` −1: the fault came once the sends had all
 * settled, and the stall of 0 ms measured no failover).
 */
export function failoverFailures(r: ScenarioResult): string[] {
  const m = r.metrics
  const out: string[] = []
  if ((m.stallPartition ?? 0) < 0) out.push('the fault came after the load: no failover was measured')
  if ((m.failedSends ?? 0) > 0) out.push(`${m.failedSends} sends failed`)
  if ((m.unrecoveredPartitions ?? 0) > 0)
    out.push(`${m.unrecoveredPartitions} partition(s) never acked after the fault`)
  if ((m.lost ?? 0) > 0) out.push(`${m.lost} acknowledged messages lost`)
  if ((m.unseenAtDrainEnd ?? 0) > 0)
    out.push(
      `loss not determined: the drain stopped with ${m.unseenAtDrainEnd} acknowledged messages not yet seen`,
    )
  return out
}

/** The Raft timing the run had, against mq-server's default (stalls are tick-bound). */
function timingNotes(t: RaftTiming): string[] {
  const d = SERVER_DEFAULT_TIMING
  const slower = d.tickMs * d.electionTicks > t.tickMs * t.electionTicks
  return [
    `ran with ${timingAgainstDefault(t)}${slower ? ': stalls bound by elections take longer on a default deployment' : ''}`,
  ]
}

function faultNote(o: FailoverOptions, node: string, led: readonly number[], atS: number): string {
  const what = o.fault === 'kill' ? 'killed (SIGKILL)' : 'paused (SIGSTOP, SIGCONT a third of the run later)'
  const role = o.kill === 'meta' ? 'the meta leader' : "leader of partition 0's data group"
  const partitions = led.length > 0 ? `partitions ${led.join(', ')}` : 'no partition of the queue'
  return `${what} ${node} (${role}; it led ${partitions}) at ${atS} s`
}

function stallNote(
  o: FailoverOptions,
  s: StallSummary,
  led: readonly number[],
  sec: (ms: number) => number,
): string {
  if (s.stallPartition < 0) return 'no gap between acks ended after the fault'
  const where = `longest stall ${round(s.stallMsMax, 1)} ms on partition ${s.stallPartition}`
  const when = s.stallOpenAtEnd
    ? `still open when the sends ended at ${sec(s.stallEndAtMs)} s`
    : `ended at ${sec(s.stallEndAtMs)} s`
  const elsewhere =
    o.kill === 'data' && !led.includes(s.stallPartition) ? ' (a partition the node hit did not lead)' : ''
  return `${where}${elsewhere}, ${when}`
}

function drainNotes(d: DrainOutcome, capMs: number): string[] {
  if (d.end === DrainEnd.cap)
    return [
      `the drain hit its ${capMs / 1000} s cap with ${d.unseen} acknowledged messages not yet seen: loss not determined (not counted as lost)`,
    ]
  if (d.end === DrainEnd.ended)
    return [
      `the drain's consumer stopped${d.error ? ` (${d.error})` : ''} with ${d.unseen} acknowledged messages not yet seen: loss not determined (not counted as lost)`,
    ]
  return d.unseen > 0 ? [`LOST ${d.unseen} acknowledged messages`] : []
}
