import type { GroupRecord, MetaState } from './meta-state'

export interface LeaderBalanceOptions {
  /** An operator's choice of leader (group → node); it wins while that node is a live replica. */
  readonly overrides?: ReadonlyMap<number, string>
  /**
   * Nodes that may keep the leaderships they hold (default: `alive`). A node can be a
   * keeper without being a transfer target, e.g. one whose heartbeat is a little late: its
   * groups stay where they are rather than moving and moving back.
   */
  readonly keepers?: ReadonlySet<string>
  /**
   * Nodes that balancing may give a leadership to (default: `alive`); a live node outside it
   * (one just back, still catching up) gets only an operator's override.
   */
  readonly stable?: ReadonlySet<string>
}

/**
 * The leader each data group should have, so that leaderships spread evenly over the live
 * nodes while as few as possible move (each transfer pauses a group's writes briefly):
 *
 * 1. an operator's choice in `overrides` wins while that node is a live replica;
 * 2. every other group keeps its last reported leader when that node is a keeper;
 * 3. a group without one takes its live replica with the fewest leaderships so far (the
 *    group's own rotation of its replicas breaks ties);
 * 4. then, while some group's leader holds at least two leaderships more than another live
 *    replica of that group, that group moves there (the widest gap first).
 *
 * Only `stable` nodes are given leaderships by steps 3 and 4. A spread within one leadership is left alone, so a node that dies and comes back, or a
 * group created or removed, moves at most the leaderships needed to even out again.
 * Deterministic.
 */
export function preferredLeaders(
  state: MetaState,
  alive: ReadonlySet<string>,
  options: LeaderBalanceOptions = {},
): Map<number, string> {
  const overrides = options.overrides ?? new Map<number, string>()
  const keepers = options.keepers ?? alive
  const stable = options.stable ?? alive
  const target = (node: string) => alive.has(node) && stable.has(node)
  const preferred = new Map<number, string>()
  const load = new Map<string, number>()
  const assign = (groupId: number, node: string): void => {
    const before = preferred.get(groupId)
    if (before !== undefined) load.set(before, (load.get(before) ?? 1) - 1)
    preferred.set(groupId, node)
    load.set(node, (load.get(node) ?? 0) + 1)
  }
  const pinned = new Set<number>()
  const movable: GroupRecord[] = []
  const unled: GroupRecord[] = []
  for (const group of state.groups()) {
    const override = overrides.get(group.groupId)
    if (override !== undefined && alive.has(override) && group.replicas.includes(override)) {
      assign(group.groupId, override)
      pinned.add(group.groupId)
    } else if (
      group.leaderId !== '' &&
      keepers.has(group.leaderId) &&
      group.replicas.includes(group.leaderId)
    ) {
      assign(group.groupId, group.leaderId)
      movable.push(group)
    } else if (group.replicas.some(target)) {
      unled.push(group)
    }
  }
  for (const group of unled) {
    const live = rotation(group).filter(target)
    let choice = live[0] as string
    for (const candidate of live) if ((load.get(candidate) ?? 0) < (load.get(choice) ?? 0)) choice = candidate
    assign(group.groupId, choice)
    movable.push(group)
  }
  // Each round moves the group with the widest gap (≥ 2) between its preferred leader's load
  // and its least loaded other target replica (the lowest group id among equal gaps, the first
  // such replica in its rotation). A move changes two nodes' loads, so only the groups with a
  // replica on either get a new gap: scanning every group's replicas each round cost ~2–6 s at
  // 1,000 nodes and 10,000 groups led at random (after a restart, ~1,000 moves), on every
  // heartbeat the meta leader answered (an audit).
  const targets = new Map<number, readonly string[]>()
  const groupsOn = new Map<string, number[]>()
  for (const group of movable) {
    if (pinned.has(group.groupId)) continue
    targets.set(group.groupId, rotation(group).filter(target))
    for (const r of group.replicas) {
      const on = groupsOn.get(r)
      if (on === undefined) groupsOn.set(r, [group.groupId])
      else on.push(group.groupId)
    }
  }
  const candidates = new Map<number, { gap: number; to: string }>()
  const byGap = new Map<number, Set<number>>()
  let widest = 0
  const consider = (groupId: number): void => {
    const before = candidates.get(groupId)
    if (before !== undefined) byGap.get(before.gap)?.delete(groupId)
    candidates.delete(groupId)
    const from = preferred.get(groupId) as string
    let to: string | undefined
    for (const r of targets.get(groupId) ?? [])
      if (r !== from && (to === undefined || (load.get(r) ?? 0) < (load.get(to) ?? 0))) to = r
    if (to === undefined) return
    const gap = (load.get(from) ?? 0) - (load.get(to) ?? 0)
    if (gap < 2) return
    candidates.set(groupId, { gap, to })
    const level = byGap.get(gap)
    if (level === undefined) byGap.set(gap, new Set([groupId]))
    else level.add(groupId)
    widest = Math.max(widest, gap)
  }
  for (const groupId of targets.keys()) consider(groupId)
  // Each move narrows the gap between two nodes by two, so this ends; the bound is a guard.
  for (let round = 0; round < movable.length * Math.max(alive.size, 1); round++) {
    while (widest >= 2 && (byGap.get(widest)?.size ?? 0) === 0) widest--
    if (widest < 2) break
    let groupId = Number.POSITIVE_INFINITY
    for (const g of byGap.get(widest) ?? []) groupId = Math.min(groupId, g)
    const from = preferred.get(groupId) as string
    const to = candidates.get(groupId)?.to as string
    assign(groupId, to)
    for (const node of [from, to]) for (const g of groupsOn.get(node) ?? []) consider(g)
  }
  return preferred
}

/** The group's replicas starting at its own offset, so that ties spread over nodes. */
function rotation(group: GroupRecord): string[] {
  const n = group.replicas.length
  return Array.from({ length: n }, (_, i) => group.replicas[(group.groupId + i) % n] as string)
}

/** A leadership hand-over to ask of a group's leader. */
export interface LeaderTransfer {
  readonly groupId: number
  readonly toNodeId: string
}

/** The transfers to ask of `nodeId`: groups it leads whose preferred leader is another live node. */
export function transfersFor(
  state: MetaState,
  nodeId: string,
  preferred: ReadonlyMap<number, string>,
): LeaderTransfer[] {
  return transfersByNode(state, preferred).get(nodeId) ?? []
}

/** `transfersFor` of every node at once (in one pass over the groups), by the node asked. */
export function transfersByNode(
  state: MetaState,
  preferred: ReadonlyMap<number, string>,
): Map<string, LeaderTransfer[]> {
  const out = new Map<string, LeaderTransfer[]>()
  for (const group of state.groups()) {
    const want = preferred.get(group.groupId)
    if (group.leaderId === '' || want === undefined || want === group.leaderId) continue
    const transfer = { groupId: group.groupId, toNodeId: want }
    const list = out.get(group.leaderId)
    if (list === undefined) out.set(group.leaderId, [transfer])
    else list.push(transfer)
  }
  return out
}
