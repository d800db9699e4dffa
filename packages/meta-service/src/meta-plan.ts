import type { MetaCommand } from './meta-commands'
import { type MetaState, ReplicaChangeReason } from './meta-state'
import type { ReplicaInput } from './replica-plan'

export type MetaChange = Extract<MetaCommand, { type: 'startMetaChange' }>

/**
 * The change of the meta group's membership to start, if any (pure, deterministic). One at a
 * time: a voter on a draining node, or on a node lost for longer than the replacement
 * timeout, is replaced by the live, non-draining node outside the meta group that holds the
 * fewest data-group replicas (node id order on a tie). Nothing while the members are not
 * recorded yet or a change is under way, and nothing when no such node exists (the voter
 * stays: a meta group one voter short still has a majority, a smaller one may not).
 */
export function metaChangeAction(
  state: MetaState,
  input: Pick<ReplicaInput, 'alive' | 'lost'>,
): MetaChange | undefined {
  const members = state.metaMembers()
  if (!members || state.metaChange()) return undefined
  const bad = members.find((m) => state.draining(m) || input.lost.has(m))
  if (bad === undefined) return undefined
  const load = (id: string) => state.groupsOf(id).length
  const add = state
    .nodes()
    .map((n) => n.nodeId)
    .filter(
      (id) => input.alive.has(id) && !input.lost.has(id) && !state.draining(id) && !members.includes(id),
    )
    .sort((a, b) => load(a) - load(b) || (a < b ? -1 : a > b ? 1 : 0))[0]
  if (add === undefined) return undefined
  return {
    type: 'startMetaChange',
    add,
    remove: bad,
    reason: state.draining(bad) ? ReplicaChangeReason.Drain : ReplicaChangeReason.Dead,
  }
}
