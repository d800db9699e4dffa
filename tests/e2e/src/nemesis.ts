import type { MqClient } from '@mq/router-client'
import type { LocalCluster } from './cluster'
import { cutLog, flipLogBits } from './damage'
import type { FaultOp, History } from './history'
import { Prng } from './prng'
import { fillDisk, freeDisk } from './small-disk'

/** The faults the nemesis injects, one at a time. */
export const FaultKind = {
  KillDataLeader: 'kill-data-leader',
  KillDataFollower: 'kill-data-follower',
  KillMetaLeader: 'kill-meta-leader',
  PauseDataLeader: 'pause-data-leader',
  PauseMetaLeader: 'pause-meta-leader',
  /** One-way cut through the node's proxy: nobody reaches the node (needs a proxied cluster). */
  IsolateDataLeader: 'isolate-data-leader',
  IsolateMetaLeader: 'isolate-meta-leader',
  /** Every byte to and from the data-group leader delayed by 50–400 ms (needs a proxied cluster). */
  SlowDataLeader: 'slow-data-leader',
  /**
   * The data-group (meta) leader on the minority side of a symmetric partition, with as many
   * others as a minority allows (needs a cluster in network namespaces).
   */
  PartitionDataLeader: 'partition-data-leader',
  PartitionMetaLeader: 'partition-meta-leader',
  /**
   * Two sides that cannot reach each other and one node that reaches both (a bridge); the
   * data-group leader is on the first side (needs a cluster in network namespaces).
   */
  BridgeDataLeader: 'bridge-data-leader',
  /**
   * A data follower killed and its data damaged while it is down: its newest write-ahead log
   * cut short (at a record boundary or inside a record) or bits flipped in its logs. It must
   * refuse to start (exit 1); it is then retired and a fresh node joins under a new id, onto
   * which the dead id's replicas are replaced (`--replace-dead-after-ms`), its meta vote too
   * when it had one. At most CORRUPTIONS_MAX per run (each adds a node), one at a time, and
   * only once no retired node still holds a meta vote or a data-group replica (a second
   * damaged node before the first one's replicas moved could leave a group with two of its
   * three replicas gone for good: no majority, ever — fault run 14002 did that once the meta
   * group could shrink away a retired voter before its data replicas were replaced); other
   * draws only kill the follower.
   */
  CorruptDataFollower: 'corrupt-data-follower',
  /**
   * A data follower's disk (a small tmpfs: the run's `--disk`) filled up for the step: its
   * next durable write fails with ENOSPC and it stops serving, corrupting nothing; then the
   * space is freed and the node restarted from its data dir, and it catches up.
   */
  FillDiskFollower: 'fill-disk-follower',
  /**
   * The same for a data group's leader: its next durable write (a log append, an apply) fails
   * with ENOSPC while it leads, with entries in flight to its followers and answers owed to
   * clients; it stops serving, a follower takes over, and what it acknowledged must survive.
   */
  FillDiskLeader: 'fill-disk-leader',
} as const
export type FaultKind = (typeof FaultKind)[keyof typeof FaultKind]

/** The faults that fill a node's disk (a small tmpfs: the run's `--disk`). */
const FILL_KINDS: ReadonlySet<FaultKind> = new Set([FaultKind.FillDiskFollower, FaultKind.FillDiskLeader])

/** The process faults: any cluster. */
export const PROCESS_FAULTS: readonly FaultKind[] = [
  FaultKind.KillDataLeader,
  FaultKind.KillDataFollower,
  FaultKind.KillMetaLeader,
  FaultKind.PauseDataLeader,
  FaultKind.PauseMetaLeader,
]

/** The kinds a run's modes add to the process faults. */
export interface FaultModes {
  /** A proxy in front of every node: one-way cuts and slow leaders. */
  readonly network?: boolean
  /** Every node in its own network namespace: partitions and bridges. */
  readonly netns?: boolean
  /** One damaged data follower per run, replaced under a new id. */
  readonly corrupt?: boolean
  /** Every node's data dir on a small tmpfs (root only): full disks. */
  readonly disk?: boolean
}

/**
 * The kinds a schedule draws from: the process faults, then those of each mode in a fixed
 * order, so that one mode alone draws exactly what it drew before modes could be combined
 * (a seed's recorded runs replay) — but for `disk`, which draws fill-disk-leader too since
 * 2026-12-04 (a `--disk` seed recorded before draws otherwise). `network` and `netns` exclude
 * each other (the cluster).
 */
export function faultKinds(modes: FaultModes): FaultKind[] {
  return [
    ...PROCESS_FAULTS,
    ...(modes.network
      ? [FaultKind.IsolateDataLeader, FaultKind.IsolateMetaLeader, FaultKind.SlowDataLeader]
      : []),
    ...(modes.netns
      ? [FaultKind.PartitionDataLeader, FaultKind.PartitionMetaLeader, FaultKind.BridgeDataLeader]
      : []),
    ...(modes.corrupt ? [FaultKind.CorruptDataFollower] : []),
    ...(modes.disk ? [FaultKind.FillDiskFollower, FaultKind.FillDiskLeader] : []),
  ]
}

const PAUSE_KINDS: ReadonlySet<FaultKind> = new Set([FaultKind.PauseDataLeader, FaultKind.PauseMetaLeader])

const PARTITION_KINDS: ReadonlySet<FaultKind> = new Set([
  FaultKind.PartitionDataLeader,
  FaultKind.PartitionMetaLeader,
  FaultKind.BridgeDataLeader,
])

/**
 * The sides of a partition step around `leader`: for a minority partition, the leader and
 * floor((n-1)/2) - 1 others against the rest, nodes outside the leader's group (`peers`: its
 * data group's replicas, or the meta voters) first — on 5 nodes a partner from its own group of
 * 3 kept the leader a majority of its group, and it was not deposed (an audit); for a bridge,
 * one other node in no side and the rest split in two, the leader's side the larger by at most
 * one. `choice` rotates the others.
 */
export function partitionSides(
  kind: FaultKind,
  leader: string,
  nodeIds: readonly string[],
  choice: number,
  peers: readonly string[] = [],
): string[][] {
  const sorted = nodeIds.filter((id) => id !== leader).sort()
  const k = sorted.length === 0 ? 0 : choice % sorted.length
  const rotated = [...sorted.slice(k), ...sorted.slice(0, k)]
  if (kind === FaultKind.BridgeDataLeader) {
    const rest = rotated.slice(1)
    const first = Math.ceil(rest.length / 2)
    return [[leader, ...rest.slice(0, first - 1)], rest.slice(first - 1)]
  }
  const others = [
    ...rotated.filter((id) => !peers.includes(id)),
    ...rotated.filter((id) => peers.includes(id)),
  ]
  const minority = Math.max(1, Math.floor((nodeIds.length - 1) / 2))
  return [[leader, ...others.slice(0, minority - 1)], others.slice(minority - 1)]
}

/** One step of a schedule: a fault, how long it lasts, then a recovery gap. */
export interface FaultStep {
  readonly kind: FaultKind
  /** Chooses among the candidates (partitions, followers) when the step runs. */
  readonly choice: number
  /** How long the node stays down or paused. */
  readonly durationMs: number
  /** Quiet time after healing, before the next fault. */
  readonly gapMs: number
}

export interface ScheduleOptions {
  /** The shortest and longest fault (a pause must outlast the election timeout, 200–400 ms at tick 20 ms). */
  readonly durationMsMin: number
  readonly durationMsMax: number
  readonly gapMsMin: number
  readonly gapMsMax: number
  /** The kinds to draw from. */
  readonly kinds: readonly FaultKind[]
}

export const DEFAULT_SCHEDULE: ScheduleOptions = {
  durationMsMin: 600,
  durationMsMax: 2_500,
  gapMsMin: 1_000,
  gapMsMax: 3_000,
  kinds: PROCESS_FAULTS,
}

/**
 * The fault schedule of `seed`: a pure function, so a seed replays the same sequence of
 * kinds, choices and durations (which node a choice lands on depends on where the leaders
 * are when the step runs). Steps are added until their total time reaches `totalMs`, at most
 * `stepsMax`.
 */
export function schedule(
  seed: number,
  totalMs: number,
  options: ScheduleOptions = DEFAULT_SCHEDULE,
  stepsMax = 10_000,
): FaultStep[] {
  const prng = new Prng(seed)
  const steps: FaultStep[] = []
  let ms = 0
  while (ms < totalMs && steps.length < stepsMax) {
    const step: FaultStep = {
      kind: prng.pick(options.kinds),
      choice: prng.int(0, 1_000_000),
      durationMs: prng.int(options.durationMsMin, options.durationMsMax),
      gapMs: prng.int(options.gapMsMin, options.gapMsMax),
    }
    steps.push(step)
    ms += step.durationMs + step.gapMs
  }
  return steps
}

/** The node a step targets, found from the cluster's own view (describeQueue, clusterStatus). */
async function target(
  step: FaultStep,
  client: MqClient,
  queue: string,
): Promise<{ nodeId: string | undefined; peers: readonly string[] }> {
  if (
    step.kind === FaultKind.KillMetaLeader ||
    step.kind === FaultKind.PauseMetaLeader ||
    step.kind === FaultKind.IsolateMetaLeader ||
    step.kind === FaultKind.PartitionMetaLeader
  ) {
    const status = await client.admin.clusterStatus()
    return { nodeId: status.metaLeaderId || undefined, peers: status.metaVoters }
  }
  const route = await client.admin.describeQueue(queue)
  const partitions = [...route.partitions].sort((a, b) => a.partition - b.partition)
  const p = partitions[step.choice % partitions.length]
  if (!p) return { nodeId: undefined, peers: [] }
  // The replicas of the partition's data group (the route's replica list, else the group's).
  let replicas = p.replicas.map((r) => r.nodeId)
  if (replicas.length === 0) {
    const group = (await client.admin.clusterStatus()).groups.find((g) => g.groupId === p.groupId)
    replicas = group?.replicas.map((r) => r.nodeId) ?? []
  }
  if (
    step.kind === FaultKind.KillDataFollower ||
    step.kind === FaultKind.CorruptDataFollower ||
    step.kind === FaultKind.FillDiskFollower
  ) {
    const followers = replicas.filter((id) => id !== p.leaderId).sort()
    if (followers.length === 0) return { nodeId: undefined, peers: replicas }
    return { nodeId: followers[Math.floor(step.choice / 7) % followers.length], peers: replicas }
  }
  return { nodeId: p.leaderId || undefined, peers: replicas }
}

/**
 * Damages a stopped node's data as `choice` picks: its newest write-ahead log cut at a record
 * boundary, or inside a record (either needs 8 records, so that the cut reaches batches the
 * node had made durable and marked, not only one LevelDB wrote as it was killed), else one
 * bit flipped at 5 places of each log. Returns what was done, or undefined when the node has
 * no log to damage.
 */
export function damageData(dataDir: string, choice: number): string | undefined {
  const way = choice % 3
  if (way < 2) {
    const where = way === 0 ? 'boundary' : 'inside'
    const dropped = cutLog(dataDir, where, 8)
    if (dropped > 0)
      return `newest log cut ${where === 'boundary' ? 'at a record boundary' : 'inside a record'}, ${dropped} records dropped`
  }
  const flipped = flipLogBits(dataDir).length
  return flipped > 0 ? `bits flipped in ${flipped} log(s)` : undefined
}

/**
 * What nemesis loops running at once (`--overlap`) share, so that their faults overlap in time
 * without stepping on each other: the nodes under a fault (a node is never killed while
 * paused, say), the network of a namespaced cluster (a partition heals every cut, so one at a
 * time), and the run's one damaged follower.
 */
export class NemesisShared {
  readonly #busy = new Set<string>()
  #network = false
  /** A damage step is under way (one at a time). */
  corrupting = false
  /** Damage steps done (or under way) in this run, at most CORRUPTIONS_MAX. */
  corruptions = 0

  /** Takes what a step of `kind` on `nodeId` needs; false (nothing taken) when a fault holds it. */
  claim(kind: FaultKind, nodeId: string): boolean {
    const network = PARTITION_KINDS.has(kind)
    if (this.#busy.has(nodeId) || (network && this.#network)) return false
    this.#busy.add(nodeId)
    if (network) this.#network = true
    return true
  }

  /** Gives back what `claim(kind, nodeId)` took. */
  release(kind: FaultKind, nodeId: string): void {
    this.#busy.delete(nodeId)
    if (PARTITION_KINDS.has(kind)) this.#network = false
  }
}

export interface NemesisResult {
  readonly faults: number
  readonly skipped: number
  /** Nodes that did not serve again in time after a restart (liveness failures). */
  readonly problems: readonly string[]
}

/** Damaged followers retired per run, at most (each one adds a node to the cluster). */
export const CORRUPTIONS_MAX = 2

/**
 * Whether no retired node is still a meta voter or a data-group replica, and no meta change is
 * under way (false when unknown).
 */
async function retiredHoldNothing(cluster: LocalCluster, client: MqClient): Promise<boolean> {
  const status = await client.admin.clusterStatus().catch(() => undefined)
  if (!status || status.metaChange !== undefined) return false
  if (status.metaVoters.some((id) => cluster.isRetired(id))) return false
  return !status.groups.some((g) => g.replicas.some((r) => cluster.isRetired(r.nodeId)))
}

/**
 * Runs `steps` against the cluster, one fault at a time, until they end or `untilMs` (wall
 * clock) passes: injects, holds for the step's duration, heals (restart or resume), waits
 * the gap. Each fault is recorded in the history. The durations are the only sleeps: they
 * are the faults themselves.
 */
export async function runNemesis(
  cluster: LocalCluster,
  client: MqClient,
  queue: string,
  steps: readonly FaultStep[],
  history: History,
  untilMs: number,
  log: (line: string) => void,
  shared: NemesisShared = new NemesisShared(),
  worker: FaultOp['worker'] = 'nemesis',
): Promise<NemesisResult> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
  let faults = 0
  let skipped = 0
  const problems: string[] = []
  for (const step of steps) {
    if (Date.now() >= untilMs) break
    const startMs = Date.now()
    let nodeId: string | undefined
    /** The members of the target's group (its data group's replicas, or the meta voters). */
    let peers: readonly string[] = []
    try {
      ;({ nodeId, peers } = await target(step, client, queue))
    } catch (error) {
      log(`${worker}: no target for ${step.kind}: ${(error as Error).message}`)
    }
    if (nodeId && cluster.isRetired(nodeId)) nodeId = undefined
    // A pause needs a process to freeze: a node that exited on its own (and is not restarted
    // until the next heal) is no target (a run stopped on "SIGSTOP to n3 failed").
    if (nodeId && PAUSE_KINDS.has(step.kind) && !cluster.isRunning(nodeId)) nodeId = undefined
    // Only a small tmpfs is ever filled, never the disk the temp dir is on.
    if (nodeId && FILL_KINDS.has(step.kind) && !cluster.hasSmallDisk(nodeId)) nodeId = undefined
    if (!nodeId) {
      log(`${worker}: no node found for ${step.kind}; skipped`)
      skipped++
      await sleep(step.gapMs)
      continue
    }
    if (!shared.claim(step.kind, nodeId)) {
      log(`${worker}: ${step.kind} ${nodeId} skipped: another fault holds the node or the network`)
      skipped++
      await sleep(step.gapMs)
      continue
    }
    /** This step took the run's damage slot (`shared.corrupting`). */
    let holdsCorruption = false
    try {
      const pause = PAUSE_KINDS.has(step.kind)
      const isolate = step.kind === FaultKind.IsolateDataLeader || step.kind === FaultKind.IsolateMetaLeader
      const slow = step.kind === FaultKind.SlowDataLeader
      const split = PARTITION_KINDS.has(step.kind)
      // Taken now, before the damage: another loop's corrupt step meanwhile only kills. The
      // slot is checked again after the cluster status is read: both loops of fault run 27001
      // passed the first check, awaited the status, and damaged n5 and n1 at once (a third
      // corruption, two replicas of groups 18 and 28 retired for good).
      const slotFree = () => !shared.corrupting && shared.corruptions < CORRUPTIONS_MAX
      const corrupt =
        step.kind === FaultKind.CorruptDataFollower &&
        slotFree() &&
        (await retiredHoldNothing(cluster, client)) &&
        slotFree()
      if (corrupt) {
        shared.corrupting = true
        holdsCorruption = true
        shared.corruptions++
      }
      const fill = FILL_KINDS.has(step.kind)
      /** Filler bytes written by this step (fill-disk-follower, fill-disk-leader). */
      let filled = 0
      const delayMs = 50 + (step.choice % 351)
      const sides = split
        ? partitionSides(
            step.kind,
            nodeId,
            cluster.nodes.filter((n) => !cluster.isRetired(n.nodeId)).map((n) => n.nodeId),
            step.choice,
            peers,
          )
        : []
      if (pause) cluster.pause(nodeId)
      else if (split) cluster.partition(sides)
      else if (isolate) cluster.isolate(nodeId)
      else if (slow) cluster.slow(nodeId, delayMs)
      else if (fill) filled = fillDisk(cluster.node(nodeId).dataDir)
      else await cluster.kill(nodeId)
      const damage = corrupt ? damageData(cluster.node(nodeId).dataDir, step.choice) : undefined
      // No log to damage: this damage is still to come.
      if (corrupt && damage === undefined) shared.corruptions--
      let outcome = ''
      await sleep(step.durationMs)
      if (pause) cluster.resume(nodeId)
      else if (fill) {
        // Space returns; a node that hit ENOSPC stopped serving (fail-stop), so it is restarted.
        freeDisk(cluster.node(nodeId).dataDir)
        const stopped = /stopped serving after a fatal error/.test(cluster.node(nodeId).output.slice(-20_000))
        await cluster.kill(nodeId)
        await cluster.restart(nodeId).catch((error: unknown) => {
          problems.push(`${nodeId} not serving after its disk was freed: ${(error as Error).message}`)
        })
        outcome = `, ${filled} filler bytes${stopped ? ', it stopped serving' : ''}; freed and restarted`
      } else if (split) cluster.healNetwork()
      else if (isolate || slow) cluster.reconnect(nodeId)
      else if (damage) {
        const code = await cluster.startExpectingExit(nodeId)
        if (code === 1) {
          cluster.retire(nodeId)
          const fresh = await cluster.join()
          outcome = `, refused to start (exit 1), retired; ${fresh.nodeId} joined to replace it`
        } else {
          // Started from damaged data (or died otherwise): a safety failure, whatever follows.
          problems.push(`${nodeId} was not refused after damage (${damage}): exit ${code ?? 'none, it runs'}`)
          outcome = `, NOT refused (exit ${code ?? 'none'})`
        }
      } else {
        try {
          await cluster.restart(nodeId)
        } catch (error) {
          // The process runs but does not serve: a liveness failure. Record it and go on; the
          // final heal waits for it again.
          const tail = cluster.node(nodeId).output.slice(-2_000)
          problems.push(`${nodeId} not serving after restart: ${(error as Error).message}`)
          log(
            `${worker}: ${nodeId} not serving after restart: ${(error as Error).message}; its last output:\n${tail}`,
          )
        }
      }
      const what = slow
        ? `${step.kind} ${nodeId} by ${delayMs} ms`
        : split
          ? `${step.kind} ${nodeId} ${sides.map((side) => `{${side.join(',')}}`).join(' | ')}`
          : damage
            ? `${step.kind} ${nodeId} (${damage}${outcome})`
            : fill
              ? `${step.kind} ${nodeId} (${outcome.slice(2)})`
              : `${step.kind} ${nodeId}${step.kind === FaultKind.CorruptDataFollower ? ' (killed only)' : ''}`
      const description = `${what} for ${step.durationMs} ms, healed after ${Date.now() - startMs} ms`
      history.add({ kind: 'fault', worker, startMs, endMs: Date.now(), description })
      log(`${worker}: ${description}`)
      faults++
    } catch (error) {
      // The harness itself failed at this step: a problem of the run, which still heals,
      // checks and keeps its artifacts (a throw here used to end the run and lose them).
      problems.push(`${worker}: ${step.kind} ${nodeId} failed in the harness: ${(error as Error).message}`)
      log(`${worker}: ${step.kind} ${nodeId} failed in the harness: ${(error as Error).message}`)
    } finally {
      shared.release(step.kind, nodeId)
      if (holdsCorruption) shared.corrupting = false
    }
    await sleep(step.gapMs)
  }
  return { faults, skipped, problems }
}
