import { lostMajority } from './majority'
import type { MetaCommand } from './meta-commands'
import { type MetaState, ReplicaChangeReason } from './meta-state'
import { emptiedGroups } from './scale-plan'

/** What the controller knows besides the meta state when it places replicas. */
export interface ReplicaInput {
  /** The nodes the meta leader heard from recently. */
  readonly alive: ReadonlySet<string>
  /** Nodes dead for longer than the replacement timeout: their replicas are replaced. */
  readonly lost: ReadonlySet<string>
  /**
   * Replicas being added on live nodes that made no progress for a while (lately), as group id
   * (0: the meta group) → node: that group's change is retargeted as for a lost node, and those
   * nodes receive no new replica meanwhile; the replicas they hold (and their other changes)
   * stay.
   */
  readonly stalled?: ReadonlyMap<number, string>
  /** Membership changes to keep under way at once. */
  readonly changesMax: number
  /**
   * The voters of data groups with a change under way, as their leaders last answered (a
   * group missing: not known). Without it no change is retargeted (a cluster below format
   * level 4, whose meta replicas may not read `retargetReplicaChange`).
   */
  readonly groupVoters?: ReadonlyMap<number, readonly string[]>
  /**
   * Whether a change whose node being added was lost before it became a voter, with no other
   * node to take its place, is given up (`abandonReplicaChange`). Without
   * it such a change waits for that node (a cluster below format level 36, whose meta replicas
   * may not read the command). With it, a node being drained that is not `alive` counts as lost
   * (here and for a group's majority): the controller passes it only once it has heard from
   * every node, so that `alive` is complete.
   */
  readonly abandon?: boolean
  /**
   * Replicas wanted per data group (the replication factor): a group created with fewer (a
   * cluster founded by fewer nodes) grows as live nodes allow. Without it no group grows (a
   * cluster below format level 25, whose meta replicas refuse a change that removes nobody).
   */
  readonly replicasWanted?: number
  /**
   * Replicas a data group keeps at most (the replication factor, once the meta state records
   * it): a group with more loses one at a time (`shrink`, adding none). Without it no group
   * shrinks (a cluster below format level 34, whose meta replicas refuse such a change).
   */
  readonly replicasMax?: number
}

/**
 * Whether group `groupId`'s change adding `add` waits for nothing: its node lost or being
 * drained (a drained one was waited for until it was lost), or its replica stalled there.
 */
export function stuck(
  state: MetaState,
  input: Pick<ReplicaInput, 'lost' | 'stalled'>,
  groupId: number,
  add: string,
): boolean {
  return input.lost.has(add) || state.draining(add) || input.stalled?.get(groupId) === add
}

/**
 * Whether node `id` counts as gone for good: lost, or (with `abandon`, passed once the meta
 * leader has heard from every node) being drained and not alive — the drain asks for it to hold
 * nothing now; waited for until it was lost, it could be neither emptied nor removed meanwhile.
 */
export function gone(
  state: MetaState,
  input: Pick<ReplicaInput, 'lost' | 'alive' | 'abandon'>,
  id: string,
): boolean {
  return input.lost.has(id) || (input.abandon === true && state.draining(id) && !input.alive.has(id))
}

/** Whether node `id` may receive a new replica: not lost, and no replica being added stalled there lately. */
export function receivable(input: Pick<ReplicaInput, 'lost' | 'stalled'>, id: string): boolean {
  if (input.lost.has(id)) return false
  for (const node of input.stalled?.values() ?? []) if (node === id) return false
  return true
}

export type ReplicaChange = Extract<
  MetaCommand,
  { type: 'startReplicaChange' | 'retargetReplicaChange' | 'abandonReplicaChange' }
>

/**
 * The replicas a data group should have with replication factor `factor` and `nodes` nodes to
 * hold them: the factor, or as many as there are nodes, one fewer when that is an even number
 * below the factor. Two replicas need both for a majority: a group grown from one to two on a
 * cluster of two nodes would stop when either failed, where one replica stopped only with its
 * own node (the even count is only passed through, once a third node can take a replica).
 */
export function replicasFor(factor: number, nodes: number): number {
  if (nodes >= factor) return factor
  return Math.max(1, nodes % 2 === 0 ? nodes - 1 : nodes)
}

/**
 * The data-group membership changes to start (pure, deterministic), at most `changesMax`
 * under way in all:
 *
 * 1. every replica on a draining node, or on a node lost for longer than the timeout, is
 *    replaced by the live, non-draining node holding the fewest replicas that is not in the
 *    group yet (node id order on a tie);
 * 2. a group with fewer replicas than `replicasWanted` allows on the eligible nodes
 *    (`replicasFor`: no even count below it) gets one more (`grow`, removing none),
 *    on the live, non-draining node holding the fewest replicas that is not in the group yet
 *    (not a group a running scale plan removes);
 * 3. a group with more replicas than `replicasMax` loses one (`shrink`, adding none): one on a
 *    node not heard from lately first (removing a live one while another is away could leave
 *    the group without a majority), else a follower on the node holding the most replicas. A
 *    replica of step 1 in a group over `replicasMax` is removed this way, not replaced (one on
 *    a node not heard from lately still first);
 * 4. once nothing is being replaced or changed, replicas are spread evenly over the live,
 *    non-draining nodes: a replica moves from the node holding the most to the one holding
 *    the fewest while they differ by more than one (a joined node fills up this way). Of the
 *    groups that could make that move, the one holding the fewest partitions goes (the
 *    cheapest to copy and to pause), and one where it need not move the leader away first.
 *    Balancing waits for a settled cluster: no scale plan running, no partition moving, and
 *    every node alive or lost (one that is briefly away, killed and restarting or cut off,
 *    would have its replicas moved off and back again; one being drained counts as lost with
 *    `abandon`).
 *
 * Changes run in different groups at once (up to `changesMax`), but a node receives one new
 * replica at a time: each is a copy of a group's state (a snapshot for a group with data).
 *
 * A group with a change under way is left alone, but for one thing: when the node being added
 * was lost (or `stalled`) before it became a voter (by `groupVoters`), the live, non-draining node outside
 * the group holding the fewest replicas (and receiving no other) takes its place (`retargetReplicaChange`; the
 * group's leader removes the lost node's learner at the next step), so a change never waits
 * forever for a node that is gone. With no such node, a change waiting on a lost node is given
 * up (`abandon`: `abandonReplicaChange`, it adds and removes nobody from then on; one on a live
 * node, stalled or being drained, waits). A group whose lost replicas leave no majority can
 * commit no membership change: none is started there, and one under way counts for nothing
 * above (slots, nodes receiving, balancing held up) until a lost replica comes back. The meta
 * group's membership is planned by `metaChangeAction`.
 */
export function replicaActions(state: MetaState, input: ReplicaInput): ReplicaChange[] {
  // A group whose lost replicas leave no majority commits no membership change until one of
  // them comes back: its change holds no slot, no node, and none is started there (three such
  // groups, after two nodes were lost, held every slot for good: the groups that kept a
  // majority were never repaired, nor was anything balanced again).
  // A node being drained that is not alive counts too (`gone`): its groups without a majority
  // held the slots until it was lost, 5 min later.
  const isGone = (id: string) => gone(state, input, id)
  const hopeless = (groupId: number) => {
    const replicas = state.group(groupId)?.replicas ?? []
    return lostMajority(replicas, new Set(replicas.filter(isGone)))
  }
  const allPending = state.replicaChanges()
  const pending = allPending.filter((c) => !hopeless(c.groupId))
  const eligible = state
    .nodes()
    .map((n) => n.nodeId)
    .filter((id) => input.alive.has(id) && !state.draining(id) && receivable(input, id))
  // Replicas per eligible node as they will be once the changes under way are done.
  const load = new Map(eligible.map((id) => [id, 0]))
  const members = new Map<number, string[]>()
  for (const g of state.groups()) {
    const change = state.replicaChange(g.groupId)
    const after = g.replicas.filter((r) => r !== change?.remove)
    if (change?.add) after.push(change.add)
    members.set(g.groupId, after)
    for (const r of after) if (load.has(r)) load.set(r, (load.get(r) ?? 0) + 1)
  }
  const byLoad = (a: string, b: string) =>
    (load.get(a) ?? 0) - (load.get(b) ?? 0) || (a < b ? -1 : a > b ? 1 : 0)
  // A node receives one new replica at a time (a copy of a group's state each): concurrent
  // changes go to different nodes.
  const receiving = new Set(pending.map((c) => c.add).filter((add) => add !== ''))
  /** The least loaded eligible node outside `replicas` that receives nothing yet. */
  const target = (replicas: readonly string[]) =>
    eligible.filter((id) => !replicas.includes(id) && !receiving.has(id)).sort(byLoad)[0]
  const actions: ReplicaChange[] = []
  // A change whose node being added was lost (or stalled, or is being drained) before it
  // became a voter: another takes its place.
  for (const change of allPending) {
    const known = input.groupVoters?.get(change.groupId)
    if (!known || known.includes(change.add) || !stuck(state, input, change.groupId, change.add)) continue
    const add = target(state.group(change.groupId)?.replicas ?? [])
    if (add === undefined) {
      // None can take its place: a lost node would hold the group's change for as long as it
      // stays away (a balance onto a node killed meanwhile showed its group changing for good),
      // and so would a node being drained that is not alive: the drain asks for it to hold
      // nothing now, and until --replace-dead-after-ms it could be neither emptied nor removed.
      // A live one is waited for: one that only stalled may still catch up, and one being
      // drained finishes the change, the drain then moving its replica once a node can take it
      // (given up, a replacement that had removed its dead replica first left two voters).
      if (input.abandon && isGone(change.add))
        actions.push({ type: 'abandonReplicaChange', groupId: change.groupId })
      continue
    }
    actions.push({ type: 'retargetReplicaChange', groupId: change.groupId, add })
    receiving.add(add)
    load.set(add, (load.get(add) ?? 0) + 1)
  }
  let slots = input.changesMax - pending.length
  const take = (groupId: number, add: string, remove: string, reason: ReplicaChangeReason) => {
    actions.push({ type: 'startReplicaChange', groupId, add, remove, reason })
    // A shrink adds nobody ('').
    if (add !== '') {
      receiving.add(add)
      load.set(add, (load.get(add) ?? 0) + 1)
    }
    if (load.has(remove)) load.set(remove, (load.get(remove) ?? 0) - 1)
    slots--
  }
  // A group about to be removed (emptied by the scale plan) gets no replacement: a change
  // under way would hold its removal up.
  const emptied = new Set(emptiedGroups(state))
  for (const g of state.groups()) {
    if (slots <= 0) return actions
    if (state.replicaChange(g.groupId) || emptied.has(g.groupId) || hopeless(g.groupId)) continue
    const bad = g.replicas.find((r) => state.draining(r) || input.lost.has(r))
    if (bad === undefined) continue
    if (g.replicas.length > (input.replicasMax ?? Number.POSITIVE_INFINITY)) {
      // An away replica before the bad one, as in step 3: removing a live (draining) one
      // while another is away could leave a group that needs the away one, and the group's
      // leader would wait on that shrink for as long as it stays away (never retargeted).
      const gone = input.alive.has(bad) ? (awayReplica(g.replicas, input.alive) ?? bad) : bad
      take(g.groupId, '', gone, ReplicaChangeReason.Shrink)
      continue
    }
    const add = target(g.replicas)
    if (add === undefined) continue
    take(g.groupId, add, bad, state.draining(bad) ? ReplicaChangeReason.Drain : ReplicaChangeReason.Dead)
  }
  const wanted = input.replicasWanted === undefined ? 0 : replicasFor(input.replicasWanted, eligible.length)
  // Nor does a group a running scale plan removes grow (a copy of its state, for nothing).
  const removing = new Set(state.scale?.running ? state.scale.removing : [])
  for (const g of state.groups()) {
    if (slots <= 0) return actions
    if (g.replicas.length >= wanted || state.replicaChange(g.groupId) || removing.has(g.groupId)) continue
    if (hopeless(g.groupId)) continue
    if (actions.some((a) => a.groupId === g.groupId)) continue
    const add = target(g.replicas)
    if (add !== undefined) take(g.groupId, add, '', ReplicaChangeReason.Grow)
  }
  const max = input.replicasMax ?? Number.POSITIVE_INFINITY
  for (const g of state.groups()) {
    if (slots <= 0) return actions
    if (g.replicas.length <= max || state.replicaChange(g.groupId) || removing.has(g.groupId)) continue
    if (hopeless(g.groupId)) continue
    if (actions.some((a) => a.groupId === g.groupId)) continue
    take(g.groupId, '', shrinkVictim(g.replicas, g.leaderId, input.alive, byLoad), ReplicaChangeReason.Shrink)
  }
  if (actions.length > 0 || pending.length > 0) return actions
  if (state.scale?.running || state.moves().length > 0) return actions
  // Not a drained one (gone, above): its replicas move off and never back.
  const away = state.nodes().some((n) => !input.alive.has(n.nodeId) && !isGone(n.nodeId))
  if (away) return actions
  const partitions = state.partitionCounts()
  // Bounded: each step narrows the spread; at most one step per replica.
  const replicasTotal = [...members.values()].reduce((n, m) => n + m.length, 0)
  const touched = new Set<number>()
  for (let i = 0; i < replicasTotal && slots > 0; i++) {
    const sorted = [...eligible].sort(byLoad)
    const least = sorted[0]
    const most = sorted[sorted.length - 1]
    if (least === undefined || most === undefined || receiving.has(least)) break
    if ((load.get(most) ?? 0) - (load.get(least) ?? 0) <= 1) break
    // Cheapest first: fewest partitions, then a group whose leader stays, then group id.
    const group = state
      .groups()
      .filter(
        (g) =>
          !touched.has(g.groupId) &&
          !state.replicaChange(g.groupId) &&
          !hopeless(g.groupId) &&
          (members.get(g.groupId) ?? []).includes(most) &&
          !(members.get(g.groupId) ?? []).includes(least),
      )
      .sort(
        (a, b) =>
          (partitions.get(a.groupId) ?? 0) - (partitions.get(b.groupId) ?? 0) ||
          Number(a.leaderId === most) - Number(b.leaderId === most) ||
          a.groupId - b.groupId,
      )[0]
    if (!group) break
    touched.add(group.groupId)
    const m = members.get(group.groupId) as string[]
    members.set(group.groupId, [...m.filter((r) => r !== most), least])
    take(group.groupId, least, most, ReplicaChangeReason.Balance)
  }
  return actions
}

/**
 * The replica a shrinking group loses: one on a node not heard from lately, else a follower
 * (the leader would hand its leadership over first) on the node holding the most replicas.
 */
function shrinkVictim(
  replicas: readonly string[],
  leaderId: string,
  alive: ReadonlySet<string>,
  byLoad: (a: string, b: string) => number,
): string {
  const away = awayReplica(replicas, alive)
  if (away !== undefined) return away
  const ranked = [...replicas].sort((a, b) => Number(a === leaderId) - Number(b === leaderId) || byLoad(b, a))
  return ranked[0] as string
}

/** The first (by id) of `replicas` on a node not heard from lately, if any. */
function awayReplica(replicas: readonly string[], alive: ReadonlySet<string>): string | undefined {
  return replicas.filter((r) => !alive.has(r)).sort()[0]
}
