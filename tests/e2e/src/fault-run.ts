import { mkdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MqClient } from '@mq/router-client'
import {
  type CheckReport,
  check,
  errorCounts,
  excerpt,
  faultsDuring,
  longestEnqueueStall,
  summarize,
} from './checker'
import { LocalCluster, serverBuildChangedSince } from './cluster'
import { drainBacklog, drainQueue, messagesLeft } from './drain-backlog'
import { clockAheadEnv, skewOf } from './faketime'
import { ATTEMPT_SLOW_MS, History } from './history'
import { DEFAULT_SCHEDULE, FaultKind, faultKinds, NemesisShared, runNemesis, schedule } from './nemesis'
import { Prng } from './prng'
import { runScaler } from './scaler'
import { runConsumer, runProducer, Workload } from './workers'

/** With `orderedKeys`, p0 sends under this many keys in turn (one message per key in flight). */
const ORDERED_KEYS = 64

export interface FaultRunOptions {
  readonly seed: number
  readonly nodes: number
  /** Length of the fault phase. */
  readonly faultSeconds: number
  /** Put a proxy in front of every node and add one-way network cuts to the faults. */
  readonly network?: boolean
  /**
   * Run every node in its own network namespace (root only) and add partitions between
   * nodes to the faults: majority/minority around a leader, a bridge. Not with `network`.
   */
  readonly netns?: boolean
  /** Scale the data groups up and down (src/scaler.ts) while the nemesis runs. */
  readonly scale?: boolean
  /**
   * Add a damaged data follower to the faults (refused, retired, replaced by a fresh node;
   * nodes replace dead replicas and meta votes after 10 s; at most CORRUPTIONS_MAX per run,
   * one at a time, once no retired node still votes in the meta group). Combines with the
   * other modes.
   */
  readonly corrupt?: boolean
  /**
   * Put every node's data dir on a small tmpfs (root only) and add full disks to the faults
   * (fill-disk-follower, fill-disk-leader). Combines with the other modes.
   */
  readonly disk?: boolean
  /**
   * Nemesis loops running at once, each on its own schedule (1 to 3, default 1): their faults
   * overlap in time (a leader paused while another node is down or a partition is up), never
   * on one node at once, one partition at a time (NemesisShared).
   */
  readonly overlap?: number
  /**
   * The servers' `--snapshot-entries` (default: theirs, 50,000): small values make data groups
   * compact often, so that followers restarted or cut off catch up by snapshot under faults.
   */
  readonly snapshotEntries?: number
  /**
   * Run every node but n1 with its wall clock off by a fixed amount in [-skewMs, skewMs]
   * (libfaketime, `skewOf`; steady clocks are not shifted): leadership then moves between
   * clocks that disagree, and no lease may end early for it. 0 or absent: one clock.
   */
  readonly skewMs?: number
  /**
   * Create the queue with ordered keys: p0 sends under 64 keys in turn, the checker checks each
   * key's order (keyOrder), and the scaler adds no partitions (an ordered queue keeps its count).
   */
  readonly orderedKeys?: boolean
  readonly partitions?: number
  readonly producers?: number
  readonly consumers?: number
  /**
   * The drain after healing goes on while the backlog shrinks: it fails (whatever is unacked
   * then counts as lost) once no message has been acked for `drainStallMs` (30 s), or after
   * `drainMsMax` in all (10 min). Faults slow consumers more than producers, so a long run
   * can leave a large backlog, drained at the consumers' pace.
   */
  readonly drainMsMax?: number
  readonly drainStallMs?: number
  /** Save the history and the nodes' output even when the run passes (for studying stalls). */
  readonly keep?: boolean
  readonly log?: (line: string) => void
}

export interface FaultRunResult {
  readonly seed: number
  readonly nodes: number
  readonly report: CheckReport
  /** Ok enqueues never acked by the end of the drain (delivered maybe, then gone). */
  readonly unacked: number
  readonly deadLettered: number
  /**
   * False when the drain ended (stalled, or its time limit) with acknowledged enqueues still
   * unacked, or with messages still in the queue (not dead-lettered).
   */
  readonly drained: boolean
  readonly faults: number
  /** Accepted scaleDataGroups calls during the faults (with `scale`). */
  readonly scaleCalls: number
  /** Liveness failures: nodes that did not serve again in time after a restart or the heal. */
  readonly problems: readonly string[]
  readonly longestStallMs: number
  readonly ops: number
  /** Server exits the harness did not cause. */
  readonly crashes: readonly string[]
  readonly elapsedMs: number
  /** The command that replays the schedule. */
  readonly replay: string
  /**
   * Server build files changed during the run (someone rebuilt the working tree): restarted
   * nodes then ran other code, and the run proves nothing either way.
   */
  readonly buildChanged: readonly string[]
  /** Where the history and the nodes' output were saved, when the run failed. */
  readonly artifacts?: string
}

const VISIBILITY_MS = 2_000
/** Each node's tmpfs with `disk`. */
const DISK_BYTES = 512 << 20
/** Failed or slow client attempts kept in the history, at most. */
const ATTEMPTS_KEPT_MAX = 100_000

/** The command that reruns a seed. */
export function replayCommand(
  o: Pick<
    FaultRunOptions,
    | 'seed'
    | 'nodes'
    | 'faultSeconds'
    | 'network'
    | 'netns'
    | 'scale'
    | 'corrupt'
    | 'disk'
    | 'overlap'
    | 'snapshotEntries'
    | 'orderedKeys'
    | 'skewMs'
  >,
): string {
  const network =
    (o.network ? ' --network' : '') +
    (o.netns ? ' --netns' : '') +
    (o.scale ? ' --scale' : '') +
    (o.corrupt ? ' --corrupt' : '') +
    (o.disk ? ' --disk' : '') +
    ((o.overlap ?? 1) > 1 ? ` --overlap ${o.overlap}` : '') +
    (o.snapshotEntries !== undefined ? ` --snapshot-entries ${o.snapshotEntries}` : '') +
    (o.orderedKeys ? ' --ordered-keys' : '') +
    (o.skewMs ? ` --skew-ms ${o.skewMs}` : '')
  return `pnpm --filter @mq/e2e faults --seconds ${o.faultSeconds} --seed ${o.seed} --nodes ${o.nodes}${network}`
}

/**
 * Whether a run failed: an anomaly, a message left unacked, an unfinished drain, a liveness
 * problem, a crash, no fault injected, or no enqueue acknowledged (every send failed or ended
 * unknown: nothing could be lost, and the run proved nothing; until an audit such a run passed).
 */
export function runFailed(
  r: Pick<FaultRunResult, 'report' | 'unacked' | 'drained' | 'problems' | 'crashes' | 'faults'>,
): boolean {
  return (
    r.report.anomalies.length > 0 ||
    r.unacked > 0 ||
    !r.drained ||
    r.problems.length > 0 ||
    r.crashes.length > 0 ||
    r.faults === 0 ||
    r.report.ackedEnqueues === 0
  )
}

/**
 * One fault run: starts a cluster of `nodes`, runs producers and consumers while the nemesis
 * follows the seed's schedule for `faultSeconds`, heals every node, drains the queue with no
 * faults, and checks the history. Ends every process it started (by PID) before returning.
 */
export async function runFaults(options: FaultRunOptions): Promise<FaultRunResult> {
  const log = options.log ?? ((line: string) => console.log(line))
  const started = Date.now()
  const replay = replayCommand(options)
  log(
    `fault run: seed ${options.seed}, ${options.nodes} nodes, ${options.faultSeconds} s of faults; replay: ${replay}`,
  )
  const overlap = options.overlap ?? 1
  if (!(Number.isInteger(overlap) && overlap >= 1 && overlap <= 3))
    throw new RangeError(`overlap must be 1, 2 or 3, got ${overlap}`)
  const prng = new Prng(options.seed)
  const scheduleOptions = { ...DEFAULT_SCHEDULE, kinds: faultKinds(options) }
  // One schedule per nemesis loop; the first is the one a run without overlap draws.
  const schedules = Array.from({ length: overlap }, () =>
    schedule(prng.int(0, 0xffffffff), options.faultSeconds * 1000, scheduleOptions),
  )
  const steps = schedules.flat()
  if (options.corrupt && steps.some((s) => s.kind === FaultKind.CorruptDataFollower) === false)
    log('fault run: this seed draws no corrupt-data-follower step in its time')
  const skewMs = options.skewMs ?? 0
  if (skewMs > 0) {
    const offsets = Array.from(
      { length: options.nodes },
      (_, i) => `n${i + 1} ${skewOf(options.seed, `n${i + 1}`, skewMs)} ms`,
    )
    log(`fault run: clocks off by ${offsets.join(', ')}`)
  }
  const cluster = await LocalCluster.start({
    nodes: options.nodes,
    ...(skewMs > 0
      ? {
          nodeEnv: (nodeId: string) => {
            const offset = skewOf(options.seed, nodeId, skewMs)
            return offset === 0 ? undefined : clockAheadEnv(offset)
          },
        }
      : {}),
    proxied: options.network ?? false,
    netns: options.netns ?? false,
    // A damaged node is replaced under a new id: its replicas move once it is dead for 10 s; a
    // replica being added that makes no progress for 10 s goes to another node too (so that the
    // stall watch runs under the faults, its false stalls included).
    serverArgs: [
      ...(options.corrupt ? ['--replace-dead-after-ms', '10000', '--replica-stall-ms', '10000'] : []),
      ...(options.snapshotEntries !== undefined
        ? ['--snapshot-entries', String(options.snapshotEntries)]
        : []),
    ],
    // A kept run's node output covers its whole fault phase (~30 MB per node at most).
    ...(options.keep ? { outputCharsMax: 32_000_000 } : {}),
    // Small disks that fill up in a moment, large enough for the run's own data.
    ...(options.disk
      ? {
          smallDisks: Object.fromEntries(
            Array.from({ length: options.nodes }, (_, i) => [`n${i + 1}`, DISK_BYTES]),
          ),
          // A node that joins to replace a damaged one (with `corrupt`) gets one too.
          joinDiskBytes: DISK_BYTES,
        }
      : {}),
  })
  const history = new History()
  let attemptsKept = 0
  const client = await MqClient.connect({
    servers: cluster.servers,
    deadlineMs: 10_000,
    attemptMs: 1_500,
    // Failed and slow attempts go into the history (bounded), to explain stalls afterwards.
    onAttempt: (r) => {
      if ((r.error === undefined && r.ms < ATTEMPT_SLOW_MS) || attemptsKept >= ATTEMPTS_KEPT_MAX) return
      attemptsKept++
      history.add({
        kind: 'attempt',
        worker: 'client',
        call: r.kind,
        ...(r.partition !== undefined ? { partition: r.partition } : {}),
        address: r.address,
        ...(r.servedBy !== undefined ? { servedBy: r.servedBy } : {}),
        startMs: r.startMs,
        endMs: r.startMs + r.ms,
        ...(r.error !== undefined ? { error: r.error.slice(0, 300) } : {}),
      })
    },
  }).catch(async (error: unknown) => {
    // No client (no meta leader within its deadline, say): the nodes must not outlive the run.
    await cluster.stop()
    throw error
  })
  const queue = 'faults'
  const load = new Workload(history, queue)
  /** Where the nodes' data is copied when the cluster stops (a failed run). */
  let keptData: string | undefined
  try {
    await client.admin.createQueue(queue, {
      partitions: options.partitions ?? 3,
      visibilityTimeoutMs: VISIBILITY_MS,
      maxDeliveries: 1_000,
      ...(options.orderedKeys ? { orderedKeys: true } : {}),
    })
    const producers = Array.from({ length: options.producers ?? 3 }, (_, i) =>
      // p0's sends go to one partition, four batches in flight (see `pipelined`); with ordered
      // keys, under 64 keys, to their partitions.
      runProducer(client, load, prng.fork(), {
        worker: `p${i}`,
        concurrency: 4,
        opsMax: 1_000_000,
        pipelined: i === 0,
        ...(options.orderedKeys ? { keys: ORDERED_KEYS } : {}),
      }),
    )
    const consumers = Array.from({ length: options.consumers ?? 3 }, (_, i) =>
      runConsumer(client, load, prng.fork(), {
        worker: `c${i}`,
        leaseMax: 16,
        visibilityMs: VISIBILITY_MS,
        waitMs: 300,
        attemptMs: 1_500,
        nackRatio: 0.05,
        abandonRatio: 0.03,
        holdMsMax: 300,
        opsMax: 1_000_000,
        // Half the rounds' acks ride with the next lease: the server's path for them under faults.
        carryAcksRatio: 0.5,
      }),
    )
    const faultStart = Date.now()
    const faultUntil = faultStart + options.faultSeconds * 1000
    const scaler = options.scale
      ? runScaler(
          client,
          queue,
          prng.fork(),
          options.nodes + 3,
          history,
          faultUntil,
          log,
          (id) => cluster.isRetired(id),
          !options.orderedKeys,
        )
      : Promise.resolve({ calls: 0, refused: 0 })
    const shared = new NemesisShared()
    const loops = await Promise.all(
      schedules.map(async (loopSteps, i) => {
        // Later loops start a little after the first, so that their steps interleave.
        if (i > 0) await new Promise((r) => setTimeout(r, 700 * i))
        const worker = i === 0 ? 'nemesis' : (`nemesis${i + 1}` as 'nemesis2' | 'nemesis3')
        return runNemesis(cluster, client, queue, loopSteps, history, faultUntil, log, shared, worker)
      }),
    )
    const nemesis = {
      faults: loops.reduce((n, l) => n + l.faults, 0),
      skipped: loops.reduce((n, l) => n + l.skipped, 0),
      problems: loops.flatMap((l) => l.problems),
    }
    const scaled = await scaler
    const faultEnd = Date.now()
    const problems = [...nemesis.problems]
    await cluster.heal().catch((error: unknown) => problems.push(`heal: ${(error as Error).message}`))
    load.producing = false
    await Promise.all(producers)
    load.draining = true
    const backlog = load.unackedCount
    const drainStart = Date.now()
    const drainStallMs = options.drainStallMs ?? 30_000
    const drainMsMax = options.drainMsMax ?? 600_000
    const backlogDrained = await drainBacklog(() => load.unackedCount, drainStallMs, drainMsMax)
    log(
      `fault run: drain of ${backlog} unacked messages ${backlogDrained ? 'done' : 'FAILED'} in ${Math.round((Date.now() - drainStart) / 1000)} s`,
    )
    // Then until the queue is empty: what is left is a message whose enqueue's outcome was
    // unknown, one whose ack of unknown outcome did not apply, or one stored twice — each must
    // be delivered (and checked) too, not left unseen when the consumers stop.
    const left = await messagesLeft(client, queue)
    const drained = backlogDrained && (await drainQueue(client, queue, drainStallMs, drainStart + drainMsMax))
    if (backlogDrained)
      log(`fault run: drain of the ${left ?? '?'} messages left in the queue ${drained ? 'done' : 'FAILED'}`)
    load.consuming = false
    await Promise.all(consumers)
    // A cluster left without a leader somewhere must still get its report and artifacts.
    const deadLettered = await client.admin.deadLetters(queue, 1_000).then(
      (dead) => dead.length,
      (error: unknown) => {
        problems.push(`dead letters unreadable after the drain: ${(error as Error).message}`)
        return -1
      },
    )
    const report = check(history.ops, { orderedKeys: options.orderedKeys ?? false })
    const unacked = load.unacked()
    const buildChanged = serverBuildChangedSince(started)
    if (buildChanged.length > 0) {
      log(
        `INVALID RUN: server build changed during the run (${buildChanged.slice(0, 5).join(', ')}…); ` +
          'restarted nodes ran other code than their peers, against data the old code wrote',
      )
    }
    const crashes = cluster.nodes.flatMap((n) => n.crashes.map((c) => `${n.nodeId}: ${c}`))
    const failed = runFailed({
      report,
      unacked: unacked.length,
      drained,
      problems,
      crashes,
      faults: nemesis.faults,
    })
    let artifacts: string | undefined
    if (failed || options.keep) {
      artifacts = join(tmpdir(), `mq-faults-seed${options.seed}-n${options.nodes}-${started}`)
      mkdirSync(artifacts, { recursive: true })
      if (failed || process.env.MQ_FAULTS_KEEP_DATA === '1') keptData = join(artifacts, 'data')
      writeFileSync(join(artifacts, 'history.jsonl'), history.ops.map((o) => JSON.stringify(o)).join('\n'))
      for (const n of cluster.nodes) writeFileSync(join(artifacts, `${n.nodeId}.log`), n.output)
      const status = await client.admin.clusterStatus().catch((e: unknown) => String(e))
      writeFileSync(join(artifacts, 'cluster-status.json'), JSON.stringify(status, null, 2))
      // Each partition's counts by weight as its leader sees them (ready, leased, delayed…).
      const stats = await client.admin.queueStats(queue).catch((e: unknown) => String(e))
      writeFileSync(join(artifacts, 'queue-stats.json'), JSON.stringify(stats, null, 2))
      const route = await client.admin.describeQueue(queue).catch((e: unknown) => String(e))
      writeFileSync(join(artifacts, 'route.json'), JSON.stringify(route, null, 2))
    }
    const stall = longestEnqueueStall(history.ops, faultStart, faultEnd)
    const result: FaultRunResult = {
      seed: options.seed,
      nodes: options.nodes,
      report,
      unacked: unacked.length,
      deadLettered,
      drained,
      buildChanged,
      faults: nemesis.faults,
      scaleCalls: scaled.calls,
      problems,
      longestStallMs: stall.ms,
      ops: history.ops.length,
      crashes,
      elapsedMs: Date.now() - started,
      replay,
      ...(artifacts ? { artifacts } : {}),
    }
    log(
      `fault run: seed ${options.seed}: ${nemesis.faults} faults (${nemesis.skipped} skipped), ` +
        `${scaled.calls} scalings (${scaled.refused} refused), ${result.ops} ops, ` +
        `${summarize(report)}; unacked=${unacked.length}${drained ? '' : ' (drain timed out)'} ` +
        `deadLettered=${deadLettered} longestStall=${result.longestStallMs} ms crashes=${result.crashes.length} problems=${problems.length} ` +
        `in ${Math.round(result.elapsedMs / 1000)} s`,
    )
    log(`errors: ${JSON.stringify(errorCounts(history.ops))}`)
    log(
      `longest stall without an acknowledged enqueue: ${stall.fromMs - faultStart}..${stall.toMs - faultStart} ms into the faults, during: ` +
        (faultsDuring(history.ops, stall.fromMs, stall.toMs, faultStart).join('; ') || 'no fault'),
    )
    const shown = new Set<string>()
    for (const a of report.anomalies) {
      if (shown.size >= 5 || shown.has(a.body)) continue
      shown.add(a.body)
      log(`anomaly ${a.kind} ${a.body}: ${a.detail}`)
      for (const op of excerpt(history.ops, a.body)) log(`  ${JSON.stringify(op)}`)
    }
    for (const body of unacked.slice(0, 5)) {
      log(`unacked ${body}:`)
      for (const op of excerpt(history.ops, body)) log(`  ${JSON.stringify(op)}`)
    }
    if (failed) {
      const faults = history.ops.filter((o) => o.kind === 'fault')
      for (const f of faults)
        log(`  fault ${f.startMs}..${f.endMs}: ${f.kind === 'fault' ? f.description : ''}`)
      log(`rerun: ${replay}`)
      log(`history and node output saved in ${artifacts}${keptData ? ' (each node data dir in data/)' : ''}`)
    }
    return result
  } finally {
    load.producing = false
    load.consuming = false
    await client.close()
    // A failed run keeps its nodes' data beside its history (MQ_FAULTS_KEEP_DATA=1: any run).
    await cluster.stop(keptData)
  }
}
