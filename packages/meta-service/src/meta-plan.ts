import type { MetaCommand } from './meta-commands'
import { type MetaState, ReplicaChangeReason } from './meta-state'
import { gone, type ReplicaInput, receivable, stuck } from './replica-plan'

export type MetaChange = Extract<
  MetaCommand,
  { type: 'startMetaChange' | 'retargetMetaChange' | 'abandonMetaChange' }
>

/** What the meta plan knows besides the meta state. */
export interface MetaPlanInput extends Pick<ReplicaInput, 'alive' | 'lost' | 'stalled' | 'abandon'> {
  /** The meta group's voters as its Raft configuration names them now. */
  readonly voters: readonly string[]
  /** The meta leader (a voter it would rather keep when shrinking). */
  readonly leaderId?: string
}

/**
 * The change of the meta group's membership to start, if any (pure, deterministic). One at a
 * time: a voter on a draining node, or on a node lost for longer than the replacement
 * timeout, is replaced by the live, non-draining node outside the meta group that holds the
 * fewest data-group replicas (node id order on a tie). Nothing while the members are not
 * recorded yet, and nothing when no such node exists (the voter stays: a meta group one voter
 * short still has a majority, a smaller one may not). While a change is under way, only one
 * thing: when the node being added was lost (or `stalled`) before it became a voter, another takes its place
 * (`retargetMetaChange`; its learner is removed by the next step), so a change never waits
 * forever for a node that is gone; with none, a change on a lost node is given up
 * (`abandon`: `abandonMetaChange`, it adds and removes nobody from then on).
 *
 * With a size wanted (`setMetaVoters`), the group first shrinks to it — removing a voter not
 * heard from first (a lost one before one briefly away), then a draining one, then the one
 * holding the most data-group replicas (the leader last): a live voter removed while others are
 * away could leave those alive short of a majority ({a, b, draining c, away d, away e} without
 * c needs 3 of 4) — and grows to it by the same candidates as a replacement
 * (reasons shrink and grow: one side of the change is ''), but not while a voter is not alive.
 * A group above its size removes a bad voter instead of replacing it.
 *
 * `alive` must be complete: a new meta leader plans nothing here before it has heard from
 * every node (a voter not heard yet would look silent, and be shrunk away first).
 */
export function metaChangeAction(state: MetaState, input: MetaPlanInput): MetaChange | undefined {
  const members = state.metaMembers()
  if (!members) return undefined
  // The data groups each node hosts (`groupsOf`), counted in one pass over the groups when first
  // asked: counted per comparison of a sort over every node, a replacement took up to seconds on the
  // meta leader of 1,000 nodes and 10,000 groups, longer than an election timeout.
  let hosted: Map<string, number> | undefined
  const load = (id: string) => {
    hosted ??= groupsPerNode(state)
    return hosted.get(id) ?? 0
  }
  const candidate = (except: readonly string[]) =>
    state
      .nodes()
      .map((n) => n.nodeId)
      .filter(
        (id) =>
          input.alive.has(id) &&
          receivable(input, id) &&
          !state.draining(id) &&
          !members.includes(id) &&
          !except.includes(id),
      )
      .sort((a, b) => load(a) - load(b) || (a < b ? -1 : a > b ? 1 : 0))[0]
  const change = state.metaChange()
  if (change) {
    if (!stuck(state, input, 0, change.add) || input.voters.includes(change.add)) return undefined
    const add = candidate([change.add, change.remove])
    if (add !== undefined) return { type: 'retargetMetaChange', add }
    // None can take its place: given up when its node is lost, or being drained and not alive
    // (the drain asks for it to hold nothing now; waited for until it was lost, it could be
    // neither emptied nor removed meanwhile); a live one, stalled or being drained, is waited
    // for, as a data group's change (replicaActions).
    return input.abandon && gone(state, input, change.add) ? { type: 'abandonMetaChange' } : undefined
  }
  const isBad = (m: string) => state.draining(m) || input.lost.has(m)
  const wanted = state.metaVotersWanted() ?? members.length
  if (members.length > wanted) {
    const rank = (m: string) => [Number(input.alive.has(m)), Number(!isBad(m)), Number(m === input.leaderId)]
    const remove = [...members].sort((a, b) => {
      const [ra, rb] = [rank(a), rank(b)]
      for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return (ra[i] as number) - (rb[i] as number)
      return load(b) - load(a) || (a < b ? 1 : a > b ? -1 : 0)
    })[0] as string
    return { type: 'startMetaChange', add: '', remove, reason: ReplicaChangeReason.Shrink }
  }
  const bad = members.find(isBad)
  if (bad !== undefined) {
    const add = candidate([])
    if (add === undefined) return undefined
    return {
      type: 'startMetaChange',
      add,
      remove: bad,
      reason: state.draining(bad) ? ReplicaChangeReason.Drain : ReplicaChangeReason.Dead,
    }
  }
  // Not while a voter is away: grown with it gone, the group would need the new voter for a
  // majority ({a, b, away, new} needs 3) until the away one is back or replaced.
  // From an odd size, only when a second node can follow: left at an even size (5 or 7 wanted
  // of 4 nodes), the group needs one more voter for a majority and tolerates no more failures.
  if (members.length < wanted && members.every((m) => input.alive.has(m))) {
    const add = candidate([])
    if (add !== undefined && (members.length % 2 === 0 || candidate([add]) !== undefined))
      return { type: 'startMetaChange', add, remove: '', reason: ReplicaChangeReason.Grow }
  }
  return undefined
}

/** How many data groups each node hosts: is a replica of, or is being added to (`groupsOf`). */
function groupsPerNode(state: MetaState): Map<string, number> {
  const counts = new Map<string, number>()
  for (const g of state.groups()) {
    const add = state.replicaChange(g.groupId)?.add
    for (const id of new Set(add ? [...g.replicas, add] : g.replicas))
      counts.set(id, (counts.get(id) ?? 0) + 1)
  }
  return counts
}
