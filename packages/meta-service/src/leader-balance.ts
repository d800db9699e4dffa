import type { MetaState } from './meta-state'

/**
 * The leader each data group should have, so that leaderships spread evenly over the live
 * nodes: groups in id order each take the live replica that is preferred by the fewest groups
 * so far (the group's own rotation of its replicas breaks ties). An operator's choice in
 * `overrides` (group → node) wins while that node is a live replica. Deterministic.
 */
export function preferredLeaders(
  state: MetaState,
  alive: ReadonlySet<string>,
  overrides: ReadonlyMap<number, string> = new Map(),
): Map<number, string> {
  const preferred = new Map<number, string>()
  const load = new Map<string, number>()
  for (const group of state.groups()) {
    const live = group.replicas.filter((r) => alive.has(r))
    if (live.length === 0) continue
    const override = overrides.get(group.groupId)
    let choice: string | undefined = override !== undefined && live.includes(override) ? override : undefined
    if (choice === undefined) {
      const n = live.length
      let best = Number.POSITIVE_INFINITY
      for (let i = 0; i < n; i++) {
        const candidate = live[(group.groupId + i) % n] as string
        const l = load.get(candidate) ?? 0
        if (l < best) {
          best = l
          choice = candidate
        }
      }
    }
    if (choice === undefined) continue
    preferred.set(group.groupId, choice)
    load.set(choice, (load.get(choice) ?? 0) + 1)
  }
  return preferred
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
