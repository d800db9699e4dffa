import { MqClient } from '@mq/router-client'
import type { CheckReport } from './checker'
import { LocalCluster } from './cluster'
import type { Op } from './history'
import { Prng } from './prng'
import { STEADY_VISIBILITY_MS, startSteadyLoad } from './steady-load'

export interface ScaleRunOptions {
  readonly seed: number
  readonly nodes: number
  /** Data groups to scale to, one step after the other (e.g. [6, 2]). */
  readonly steps: readonly number[]
  readonly partitions: number
  /** SIGKILL the meta leader while the first step's moves are under way (restarted 1 s later). */
  readonly killMetaLeader: boolean
  /**
   * After the steps: a node joins with `--join` (it must be given a share of the replicas),
   * then `n3` is drained (it must end up with none) and stopped, all under the same load.
   */
  readonly joinAndDrain?: boolean
  /** One step (groups made or removed, partitions moved) must end by this. */
  readonly stepMsMax?: number
  readonly log?: (line: string) => void
}

/** A partition seen to change data group (its route flipped) during the run. */
export interface ObservedMove {
  readonly partition: number
  readonly fromGroup: number
  readonly toGroup: number
  /** The flip happened after `seenBeforeMs` (the last poll that saw the old group) and by this. */
  readonly flippedAtMs: number
  readonly seenBeforeMs: number
  /**
   * The client-visible pause: the longest gap between two successful operations on the
   * partition (produce, lease, ack) around the flip.
   */
  readonly pauseMs: number
}

export interface ScaleRunResult {
  readonly report: CheckReport
  readonly unacked: number
  readonly drained: boolean
  readonly moves: readonly ObservedMove[]
  /** Data groups after each step, as the meta state lists them. */
  readonly groupsAfterStep: readonly (readonly number[])[]
  /** Groups removed while scaling down that some node did not report deleting. */
  readonly notDeleted: readonly string[]
  /** With joinAndDrain: data-group replicas per node once the joined node got its share. */
  readonly afterJoin?: Readonly<Record<string, number>>
  /** With joinAndDrain: replicas per node once n3 was drained (n3 holds none), and how long it took. */
  readonly afterDrain?: Readonly<Record<string, number>>
  /**
   * With joinAndDrain: the drained n3's removal (Meta.RemoveNode): what the cluster said while
   * n3 still ran, how long after n3 stopped it was removed, and the nodes listed after.
   */
  readonly removal?: {
    readonly refusedWhileAlive: string
    readonly removedAfterStopMs: number | undefined
    readonly nodesAfter: readonly string[]
    /** n3 started again after its removal: its exit code (it must refuse, exit 1) and why. */
    readonly restartExit: number | string | undefined
    readonly restartSaid: string
  }
  readonly metaLeaderKilled: string
  /** Whether a move was seen in its copy phase when the meta leader was killed. */
  readonly killedDuringCopy: boolean
  readonly crashes: readonly string[]
  /** The nodes' log lines about moves and removed groups (and any error). */
  readonly serverLog: readonly string[]
  readonly elapsedMs: number
}

export async function waitFor(
  condition: () => Promise<boolean> | boolean,
  timeoutMs: number,
  pollMs = 100,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (!(await condition())) {
    if (Date.now() >= deadline) return false
    await new Promise((r) => setTimeout(r, pollMs))
  }
  return true
}

/** The end times of the successful operations on each partition, sorted. */
function okTimesByPartition(ops: readonly Op[]): Map<number, number[]> {
  const out = new Map<number, number[]>()
  for (const op of ops) {
    if (op.kind === 'fault' || op.kind === 'attempt' || op.outcome !== 'ok' || op.partition === undefined)
      continue
    const list = out.get(op.partition)
    if (list) list.push(op.endMs)
    else out.set(op.partition, [op.endMs])
  }
  for (const list of out.values()) list.sort((a, b) => a - b)
  return out
}

/**
 * The longest gap between consecutive successful operations (`times`, sorted) that overlaps
 * [fromMs, toMs]: the route flipped somewhere in that window, and the pause of the move lies
 * around it.
 */
export function longestGapIn(times: readonly number[], fromMs: number, toMs: number): number {
  let longest = 0
  for (let i = 1; i < times.length; i++) {
    const a = times[i - 1] as number
    const b = times[i] as number
    if (b >= fromMs && a <= toMs) longest = Math.max(longest, b - a)
  }
  return longest
}

/**
 * Scales a real cluster's data groups step by step under a steady produce/consume load (an
 * idempotent producer; consumers that ack, nack and abandon), optionally SIGKILLing the meta
 * leader in the middle of the first step's moves; then drains and checks the history: every
 * acknowledged message consumed, none acked twice, no lease overlap, FIFO per weight. Ends
 * every process it started (by PID) before returning.
 */
export async function runScale(options: ScaleRunOptions): Promise<ScaleRunResult> {
  const log = options.log ?? ((line: string) => console.log(line))
  const started = Date.now()
  const stepMsMax = options.stepMsMax ?? 60_000
  const prng = new Prng(options.seed)
  const cluster = await LocalCluster.start({ nodes: options.nodes })
  // A client that cannot connect must not leave the cluster's processes running.
  const client = await MqClient.connect({
    servers: cluster.servers,
    deadlineMs: 20_000,
    attemptMs: 1_500,
  }).catch(async (error: unknown) => {
    await cluster.stop()
    throw error
  })
  const queue = 'scale'
  let steady: ReturnType<typeof startSteadyLoad> | undefined
  const flips: {
    partition: number
    fromGroup: number
    toGroup: number
    flippedAtMs: number
    seenBeforeMs: number
  }[] = []
  let watching = true
  let metaLeaderKilled = ''
  let killedDuringCopy = false
  try {
    const initialGroups = options.nodes
    await waitFor(
      async () =>
        (await client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0).length >= initialGroups,
      30_000,
      200,
    )
    await client.admin.createQueue(queue, {
      partitions: options.partitions,
      visibilityTimeoutMs: STEADY_VISIBILITY_MS,
      maxDeliveries: 1_000,
    })
    // Watches the route: each change of a partition's group is a move seen by clients.
    const watcher = (async () => {
      let last = new Map<number, number>()
      let lastSeenMs = Date.now()
      while (watching) {
        try {
          const route = await client.admin.describeQueue(queue)
          const now = Date.now()
          const next = new Map(route.partitions.map((p) => [p.partition, p.groupId]))
          for (const [partition, groupId] of next) {
            const before = last.get(partition)
            if (before !== undefined && before !== groupId)
              flips.push({
                partition,
                fromGroup: before,
                toGroup: groupId,
                flippedAtMs: now,
                seenBeforeMs: lastSeenMs,
              })
          }
          last = next
          lastSeenMs = now
        } catch {
          // The meta leader is changing: the next poll sees the route.
        }
        await new Promise((r) => setTimeout(r, 100))
      }
    })()
    steady = startSteadyLoad(client, queue, prng)
    await new Promise((r) => setTimeout(r, 1_500))
    const groupsAfterStep: number[][] = []
    const removed = new Set<number>()
    for (const [i, target] of options.steps.entries()) {
      const before = (await client.admin.clusterStatus()).groups
        .filter((g) => g.groupId !== 0)
        .map((g) => g.groupId)
      const stepStart = Date.now()
      await client.admin.scaleDataGroups(target)
      log(`scale step ${i + 1}: ${before.length} → ${target} data groups`)
      if (i === 0 && options.killMetaLeader) {
        // Kill the meta leader while a move is in its copy phase (the source is fenced); if
        // every move of the step slipped between two polls, kill it when the step is done.
        let copying = ''
        await waitFor(
          async () => {
            const status = await client.admin.clusterStatus()
            metaLeaderKilled = status.metaLeaderId
            const move = status.moves.find((m) => m.phase === 'copy')
            if (move)
              copying = `move ${move.moveId} of ${move.queue}/${move.partition} (group ${move.fromGroup} → ${move.toGroup})`
            return move !== undefined || status.scale?.state === 'done'
          },
          stepMsMax,
          20,
        )
        killedDuringCopy = copying !== ''
        log(
          `killing the meta leader ${metaLeaderKilled} (SIGKILL) ${copying ? `during the copy of ${copying}` : 'after the step (no copy was seen under way)'}`,
        )
        await cluster.kill(metaLeaderKilled)
        await new Promise((r) => setTimeout(r, 1_000))
        await cluster.restart(metaLeaderKilled)
      }
      const done = await waitFor(
        async () => {
          try {
            const s = await client.admin.clusterStatus()
            return s.scale?.state === 'done' && s.groups.filter((g) => g.groupId !== 0).length === target
          } catch {
            return false
          }
        },
        stepMsMax,
        200,
      )
      const after = (await client.admin.clusterStatus()).groups
        .filter((g) => g.groupId !== 0)
        .map((g) => g.groupId)
      for (const g of before) if (!after.includes(g)) removed.add(g)
      groupsAfterStep.push(after)
      log(
        `scale step ${i + 1} ${done ? 'done' : 'NOT done'} in ${Date.now() - stepStart} ms: groups ${after.join(',')}`,
      )
      if (!done) break
    }
    // Every node deletes the removed groups' storage (a restarted node once it reports them).
    const deletedBy = (g: number) =>
      cluster.nodes.filter((n) => n.output.includes(`removed data group ${g} `))
    await waitFor(() => [...removed].every((g) => deletedBy(g).length === cluster.nodes.length), 15_000, 200)
    const notDeleted = [...removed].flatMap((g) =>
      cluster.nodes.filter((n) => !deletedBy(g).includes(n)).map((n) => `${n.nodeId}: group ${g}`),
    )
    let afterJoin: Record<string, number> | undefined
    let afterDrain: Record<string, number> | undefined
    let removal: ScaleRunResult['removal']
    if (options.joinAndDrain)
      ({ afterJoin, afterDrain, removal } = await joinThenDrain(cluster, client, stepMsMax, log))
    const outcome = await steady.finish()
    watching = false
    await watcher
    const times = okTimesByPartition(steady.history.ops)
    const moves = flips.map((f) => ({
      ...f,
      pauseMs: longestGapIn(times.get(f.partition) ?? [], f.seenBeforeMs, f.flippedAtMs),
    }))
    for (const m of moves)
      log(
        `move of partition ${m.partition}: group ${m.fromGroup} → ${m.toGroup}, client-visible pause ${m.pauseMs} ms`,
      )
    return {
      ...outcome,
      moves,
      groupsAfterStep,
      notDeleted,
      ...(afterJoin ? { afterJoin } : {}),
      ...(afterDrain ? { afterDrain } : {}),
      ...(removal ? { removal } : {}),
      metaLeaderKilled,
      killedDuringCopy,
      crashes: cluster.nodes.flatMap((n) => n.crashes.map((c) => `${n.nodeId}: ${c}`)),
      serverLog: cluster.nodes.flatMap((n) =>
        n.output
          .split('\n')
          .filter((l) => /move|removed|error|cannot/i.test(l))
          .map((l) => `${n.nodeId}: ${l}`),
      ),
      elapsedMs: Date.now() - started,
    }
  } finally {
    watching = false
    steady?.abort()
    await client.close()
    await cluster.stop()
  }
}

type Status = Awaited<ReturnType<MqClient['admin']['clusterStatus']>>

/** Data-group replicas per node (the meta group left out). */
function replicaCounts(status: Status): Record<string, number> {
  return Object.fromEntries(status.nodes.map((n) => [n.nodeId, n.groupIds.filter((g) => g !== 0).length]))
}

/**
 * Joins a node and waits until the replicas are spread within one (the new node holding
 * some), then drains n3 and waits until it holds none, then stops n3 (SIGTERM). Returns the
 * replica counts at both points (undefined where the wait timed out).
 */
async function joinThenDrain(
  cluster: LocalCluster,
  client: MqClient,
  timeoutMs: number,
  log: (line: string) => void,
): Promise<{
  afterJoin?: Record<string, number>
  afterDrain?: Record<string, number>
  removal?: ScaleRunResult['removal']
}> {
  const quiet = (s: Status) => s.groups.every((g) => g.state !== 'changing') && s.metaChange === undefined
  let status: Status | undefined
  const joinStart = Date.now()
  const joined = await cluster.join()
  const spread = await waitFor(
    async () => {
      status = await client.admin.clusterStatus().catch(() => undefined)
      if (!status) return false
      const counts = replicaCounts(status)
      const values = Object.values(counts)
      return (
        (counts[joined.nodeId] ?? 0) > 0 && Math.max(...values) - Math.min(...values) <= 1 && quiet(status)
      )
    },
    timeoutMs,
    250,
  )
  const afterJoin = spread && status ? replicaCounts(status) : undefined
  log(
    `join of ${joined.nodeId}: ${afterJoin ? JSON.stringify(afterJoin) : 'NOT spread'} after ${Date.now() - joinStart} ms`,
  )
  const drainStart = Date.now()
  await client.admin.drainNode('n3')
  const drained = await waitFor(
    async () => {
      // Drained as the drain call counts it: no replica left, its meta vote (group 0) included
      // (n3 is a founder, and n4 takes its place in the meta group). Polled through the status:
      // each drain call would append an entry to the meta log.
      status = await client.admin.clusterStatus().catch(() => undefined)
      const n3 = status?.nodes.find((n) => n.nodeId === 'n3')
      return status !== undefined && n3?.groupIds.length === 0 && quiet(status)
    },
    timeoutMs,
    250,
  )
  const afterDrain = drained && status ? replicaCounts(status) : undefined
  log(
    `drain of n3: ${afterDrain ? JSON.stringify(afterDrain) : 'NOT drained'} after ${Date.now() - drainStart} ms`,
  )
  if (!afterDrain) return { ...(afterJoin ? { afterJoin } : {}) }
  // Drained, n3 is forgotten once stopped: refused while it runs, accepted once silent.
  const refusedWhileAlive = await client.admin.removeNode('n3').then(
    () => 'removed while alive',
    (e: Error) => e.message,
  )
  await cluster.kill('n3', 'SIGTERM')
  const stoppedAt = Date.now()
  let removedAfterStopMs: number | undefined
  let lastRefusal = ''
  await waitFor(
    async () => {
      const removed = await client.admin.removeNode('n3').then(
        () => true,
        (e: Error) => {
          lastRefusal = e.message
          return false
        },
      )
      if (removed) removedAfterStopMs = Date.now() - stoppedAt
      return removed
    },
    timeoutMs,
    500,
  )
  if (removedAfterStopMs === undefined)
    log(`removal of n3 after it stopped: last refused with ${lastRefusal}`)
  const nodesAfter = ((await client.admin.clusterStatus().catch(() => undefined))?.nodes ?? []).map(
    (n) => n.nodeId,
  )
  log(
    `removal of n3: refused while alive (${refusedWhileAlive}); removed ${removedAfterStopMs} ms after it stopped`,
  )
  // Started again by mistake (its old data dir), it is refused at its first heartbeat and exits.
  const restartExit =
    removedAfterStopMs === undefined ? undefined : await cluster.startExpectingExit('n3', 30_000)
  const restartSaid =
    cluster.node('n3').output.match(/node n3 was removed from the cluster[^\n"]*/)?.[0] ?? ''
  log(`n3 started after its removal: exit ${restartExit}: ${restartSaid}`)
  return {
    ...(afterJoin ? { afterJoin } : {}),
    afterDrain,
    removal: { refusedWhileAlive, removedAfterStopMs, nodesAfter, restartExit, restartSaid },
  }
}
