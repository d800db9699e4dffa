import type { MetaState } from './meta-state'

/**
 * Chooses the nodes for a new data group's replicas: the `replicas` candidates that hold
 * the fewest replicas already (node id order on a tie), so load spreads evenly. Only
 * `eligible` nodes are considered (e.g. the live ones). Returns fewer than `replicas` ids
 * when there are not enough eligible nodes; the caller decides whether that is enough.
 */
export function chooseReplicaNodes(
  state: MetaState,
  replicas: number,
  eligible: ReadonlySet<string>,
): string[] {
  const load = new Map<string, number>()
  for (const node of state.nodes()) if (eligible.has(node.nodeId)) load.set(node.nodeId, 0)
  for (const group of state.groups()) {
    for (const r of group.replicas) if (load.has(r)) load.set(r, (load.get(r) ?? 0) + 1)
  }
  return [...load.entries()]
    .sort(([a, la], [b, lb]) => la - lb || (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, replicas)
    .map(([id]) => id)
}
