import type {
  GroupStatus,
  NodeStatus,
  PartitionRoute,
  QueueRoute,
  Replica,
  ReplicaChange,
} from '@mq/protocol'
import type { GroupRecord, MetaState, QueueRecord, ReplicaChangeRecord } from './meta-state'

/**
 * Renders a queue's route: for each partition its storage address (data group + engine) and
 * where to send its requests (the group's last reported leader, and every replica).
 */
export function routeOf(state: MetaState, queue: QueueRecord): QueueRoute {
  return {
    queue: queue.name,
    queueId: queue.queueId,
    config: queue.config,
    routeEpoch: state.routeEpoch,
    partitionsEpoch: queue.partitionsEpoch ?? 0,
    partitions: queue.partitions.map((p): PartitionRoute => {
      const group = state.group(p.groupId)
      const leaderId = group?.leaderId ?? ''
      return {
        partition: p.partition,
        groupId: p.groupId,
        leaderId,
        leaderAddress: leaderId ? (state.node(leaderId)?.address ?? '') : '',
        replicas: group ? replicasOf(state, group) : [],
        engine: p.engine,
      }
    }),
  }
}

export function replicasOf(state: MetaState, group: GroupRecord): Replica[] {
  return group.replicas.map((nodeId) => ({
    nodeId,
    address: state.node(nodeId)?.address ?? '',
    learner: false,
    appliedIndex: 0,
  }))
}

/** Liveness as the meta leader sees it (from heartbeats); not part of the replicated state. */
export interface Liveness {
  alive(nodeId: string): boolean
  lastHeartbeatMs(nodeId: string): number
  /** The commit and applied index `nodeId` last reported for its replica of `groupId`, if any. */
  groupIndexes?(nodeId: string, groupId: number): { commitIndex: number; appliedIndex: number } | undefined
}

/**
 * Each node's status; its groups are the data groups it replicates or is being added to, and 0
 * for a meta voter or the node a meta change is adding: what DrainNode counts and RemoveNode
 * refuses for (a node being added showed no group while both counted it).
 */
export function nodeStatusesOf(state: MetaState, liveness: Liveness): NodeStatus[] {
  const groupsOf = new Map<string, number[]>()
  // Group 0: the meta group's recorded voters, and the one a change is adding.
  for (const m of state.metaMembers() ?? []) groupsOf.set(m, [0])
  const metaAdd = state.metaChange()?.add
  if (metaAdd) groupsOf.set(metaAdd, [0])
  for (const g of state.groups()) {
    const add = state.replicaChange(g.groupId)?.add
    for (const r of add && !g.replicas.includes(add) ? [...g.replicas, add] : g.replicas) {
      const list = groupsOf.get(r)
      if (list) list.push(g.groupId)
      else groupsOf.set(r, [g.groupId])
    }
  }
  return state.nodes().map((n) => ({
    nodeId: n.nodeId,
    address: n.address,
    alive: liveness.alive(n.nodeId),
    lastHeartbeatMs: liveness.lastHeartbeatMs(n.nodeId),
    groupIds: groupsOf.get(n.nodeId) ?? [],
    draining: state.draining(n.nodeId),
    formatLevel: n.formatLevel ?? 1,
  }))
}

/** A replica change as ClusterStatus shows it (a data group's, or the meta group's). */
export function changeOf(c: ReplicaChangeRecord): ReplicaChange {
  return { add: c.add, remove: c.remove, reason: c.reason, startedAtMs: c.startedAtMs }
}

/**
 * Each data group's status; `state` is removing (scale plan), changing (replicas: `change`
 * says which, since when), electing or active. The commit and applied index are those the group's leader last reported (0 when it
 * has not reported since this meta leader took over, or without `liveness`).
 */
export function groupStatusesOf(state: MetaState, liveness?: Liveness): GroupStatus[] {
  const counts = state.partitionCounts()
  const removing = new Set(state.scale?.running ? state.scale.removing : [])
  return state.groups().map((g) => {
    const change = state.replicaChange(g.groupId)
    return {
      groupId: g.groupId,
      leaderId: g.leaderId,
      replicas: replicasOf(state, g).map((r) => ({
        ...r,
        appliedIndex: liveness?.groupIndexes?.(r.nodeId, g.groupId)?.appliedIndex ?? 0,
      })),
      term: g.leaderTerm,
      commitIndex: liveness?.groupIndexes?.(g.leaderId, g.groupId)?.commitIndex ?? 0,
      appliedIndex: liveness?.groupIndexes?.(g.leaderId, g.groupId)?.appliedIndex ?? 0,
      partitions: counts.get(g.groupId) ?? 0,
      state: removing.has(g.groupId) ? 'removing' : change ? 'changing' : g.leaderId ? 'active' : 'electing',
      ...(change ? { change: changeOf(change) } : {}),
    }
  })
}
