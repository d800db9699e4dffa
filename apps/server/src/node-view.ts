import type { RaftStatus } from '@mq/raft-core'
import { Role } from '@mq/raft-core'
import type { QueueStats } from '@mq/weighted-queue'

/** One Raft group hosted here, as its replica sees it. */
export interface GroupView {
  readonly groupId: number
  readonly status: RaftStatus
  /**
   * Partitions being imported into this data group, their copies partly written (a move under
   * way, or one whose queue was deleted meanwhile, until the orphan sweeper drops it); 0 for
   * the meta group.
   */
  readonly imports: number
  /** Dropped partitions whose keys this data-group replica is still deleting; 0 for the meta group. */
  readonly sweeping: number
  /**
   * The Raft log held in memory: every entry since the last compaction (kv-storage's
   * `tailStats()`; data bytes plus 64 per entry). Compactions behind snapshots bound it.
   */
  readonly logTail: { readonly entries: number; readonly bytes: number }
}

/** One queue partition held by a data group this node leads. */
export interface PartitionView {
  readonly groupId: number
  /** The queue's name (without the incarnation suffix it is stored under). */
  readonly queue: string
  readonly partition: number
  /** As of the group's clock (DataGroupPort.nowMs). */
  readonly stats: () => Promise<QueueStats | undefined>
}

/**
 * What the HTTP endpoints read from a running node: its groups, the partitions it leads and
 * what it knows of the meta group. Reads only; never changes the node.
 */
export interface NodeView {
  readonly nodeId: string
  /** False before start, after stop began, and after a fatal error. */
  serving(): boolean
  /** True once the node stopped serving after a fatal error (a restart is needed). */
  failed(): boolean
  groups(): readonly GroupView[]
  ledPartitions(): readonly PartitionView[]
  /** The meta group's leader as this node knows it ('' = unknown). */
  metaLeaderId(): string
}

/** A follower counts as caught up while it has applied all but at most this many committed entries. */
export const READY_APPLY_LAG_MAX = 1_000

export interface Readiness {
  readonly ready: boolean
  /** Why not ready, one line each (empty when ready). */
  readonly reasons: readonly string[]
}

/**
 * Ready = serving, the meta leader is known, and every hosted group knows its leader and has
 * applied its committed entries (within READY_APPLY_LAG_MAX). A load balancer sends clients
 * only to ready nodes; a restarted node becomes ready once it has caught up.
 */
export function readiness(view: NodeView): Readiness {
  const reasons: string[] = []
  if (!view.serving()) reasons.push('not serving (starting, stopping or stopped after a fatal error)')
  if (view.metaLeaderId() === '') reasons.push('the meta group leader is not known yet')
  for (const { groupId, status } of view.groups()) {
    if (status.role !== Role.Leader && status.lead === '')
      reasons.push(`group ${groupId} has no known leader`)
    const lag = status.commit - status.applied
    if (lag > READY_APPLY_LAG_MAX)
      reasons.push(`group ${groupId} has ${lag} committed entries still to apply`)
  }
  return { ready: reasons.length === 0, reasons }
}

/** Splits a data group's partition id (`storedAs/index`, storedAs = `queue#incarnation`). */
export function parsePartitionId(id: string): { storedAs: string; queue: string; partition: number } {
  const slash = id.lastIndexOf('/')
  const storedAs = id.slice(0, slash)
  const hash = storedAs.lastIndexOf('#')
  return {
    storedAs,
    queue: hash < 0 ? storedAs : storedAs.slice(0, hash),
    partition: Number(id.slice(slash + 1)),
  }
}
