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
  movable.sort((a, b) => a.groupId - b.groupId)
  // Each move narrows the gap between two nodes by two, so this ends; the bound is a guard.
  for (let round = 0; round < movable.length * Math.max(alive.size, 1); round++) {
    let best: { groupId: number; to: string; gap: number } | undefined
    for (const group of movable) {
      if (pinned.has(group.groupId)) continue
      const from = preferred.get(group.groupId) as string
      for (const to of rotation(group)) {
        if (to === from || !target(to)) continue
        const gap = (load.get(from) ?? 0) - (load.get(to) ?? 0)
        if (gap >= 2 && (best === undefined || gap > best.gap)) best = { groupId: group.groupId, to, gap }
      }
    }
    if (best === undefined) break
    assign(best.groupId, best.to)
  }
  return preferred
}

/** The group's replicas starting at its own offset, so that ties spread over nodes. */
function rotation(group: GroupRecord): string[] {
  const n = group.replicas.length
  return Array.from({ length: n }, (_, i) => group.replicas[(group.groupId + i) % n] as string)
}

/** The transfers to ask of `nodeId`: groups it leads whose preferred leader is another live node. */
export function transfersFor(
  state: MetaState,
  nodeId: string,
  preferred: ReadonlyMap<number, string>,
): { groupId: number; toNodeId: string }[] {
  const out: { groupId: number; toNodeId: string }[] = []
  for (const group of state.groups()) {
    const want = preferred.get(group.groupId)
    if (group.leaderId === nodeId && want !== undefined && want !== nodeId)
      out.push({ groupId: group.groupId, toNodeId: want })
  }
  return out
}
