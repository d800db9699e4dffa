import type { MetaState } from './meta-state'
import { chooseReplicaNodes } from './placement'

/** What the controller needs besides the meta state to decide its next steps. */
export interface ControlInput {
  /** The nodes the meta leader heard from recently. */
  readonly alive: ReadonlySet<string>
  /** Replicas of a new data group. */
  readonly replicas: number
  /** Data groups wanted when no scale plan was ever asked for (config, or one per live node). */
  readonly defaultGroups: number
  /** Partition moves to keep under way at once. */
  readonly movesMax: number
}

/** One step the controller proposes to the meta group. */
export type ControlAction =
  | { readonly type: 'createGroup'; readonly replicas: readonly string[] }
  | {
      readonly type: 'startMove'
      readonly queue: string
      readonly partition: number
      readonly toGroup: number
    }
  | { readonly type: 'removeGroup'; readonly groupId: number }
  | { readonly type: 'finishScale' }

interface PlannedMove {
  readonly queue: string
  readonly partition: number
  readonly from: number
  readonly to: number
}

/**
 * The controller's next steps, decided from the meta state alone (pure, deterministic):
 *
 * 1. fewer groups than wanted (the last scale plan's target, else `defaultGroups`): create one on
 *    the least loaded live nodes (one per round; nothing else until there are enough);
 * 2. with a running scale plan: start moves (up to `movesMax` under way) that take every
 *    partition off the groups being removed, then that even out the partitions per group
 *    (until the fullest and the emptiest group differ by at most one), each partition to the
 *    emptiest group (the one with the fewest partitions of the same queue on a tie, then the
 *    lowest id), each taken from the fullest group (its queue with the most partitions there);
 * 3. remove the groups being removed once they hold nothing and take part in no move;
 * 4. finish the plan once nothing is left to do.
 */
export function controlActions(state: MetaState, input: ControlInput): ControlAction[] {
  const scale = state.scale?.running ? state.scale : undefined
  const removing = new Set(scale?.removing ?? [])
  const groups = state.groups()
  const active = groups.filter((g) => !removing.has(g.groupId))
  const wanted = state.scale ? state.scale.targetGroups : input.defaultGroups
  if (active.length < wanted) {
    if (input.alive.size < input.replicas) return []
    const chosen = chooseReplicaNodes(state, input.replicas, input.alive)
    return chosen.length === input.replicas ? [{ type: 'createGroup', replicas: chosen }] : []
  }
  if (!scale) return []
  const actions: ControlAction[] = []
  const underWay = state.moves().length
  const moves = planMoves(state, removing).slice(0, Math.max(0, input.movesMax - underWay))
  for (const m of moves)
    actions.push({ type: 'startMove', queue: m.queue, partition: m.partition, toGroup: m.to })
  // Not one changing its replicas: the meta state refuses to remove it until the change ends.
  for (const groupId of emptiedGroups(state)) {
    if (!state.replicaChange(groupId)) actions.push({ type: 'removeGroup', groupId })
  }
  const removingLeft = groups.some((g) => removing.has(g.groupId))
  if (actions.length === 0 && underWay === 0 && !removingLeft) actions.push({ type: 'finishScale' })
  return actions
}

/**
 * The groups a running scale plan removes that hold no partition and take part in no move:
 * they are removed next (and get no new replicas meanwhile).
 */
export function emptiedGroups(state: MetaState): number[] {
  const scale = state.scale?.running ? state.scale : undefined
  if (!scale) return []
  const counts = state.partitionCounts()
  const busy = new Set(state.moves().flatMap((m) => [m.fromGroup, m.toGroup]))
  return scale.removing.filter(
    (groupId) => state.group(groupId) !== undefined && (counts.get(groupId) ?? 0) === 0 && !busy.has(groupId),
  )
}

/**
 * Every move still needed to carry out the plan, given the moves under way (counted at
 * their target): first off the groups in `removing`, then from the fullest group to the
 * emptiest until they differ by at most one. Partitions under way are not moved again.
 */
export function planMoves(state: MetaState, removing: ReadonlySet<number>): PlannedMove[] {
  const active = state.groups().filter((g) => !removing.has(g.groupId))
  if (active.length === 0) return []
  const moving = new Set(state.moves().map((m) => `${m.queue}/${m.partition}`))
  // Where each partition is (or is going), by group, and per group per queue.
  const held = new Map<number, { queue: string; partition: number }[]>()
  for (const g of state.groups()) held.set(g.groupId, [])
  const destination = new Map(state.moves().map((m) => [`${m.queue}/${m.partition}`, m.toGroup]))
  for (const q of state.queues()) {
    for (const p of q.partitions) {
      const at = destination.get(`${q.name}/${p.partition}`) ?? p.groupId
      held.get(at)?.push({ queue: q.name, partition: p.partition })
    }
  }
  const count = (g: number) => held.get(g)?.length ?? 0
  const sameQueue = (g: number, queue: string) => held.get(g)?.filter((x) => x.queue === queue).length ?? 0
  const emptiest = (queue: string): number => {
    let best = -1
    for (const g of active) {
      const id = g.groupId
      if (
        best < 0 ||
        count(id) < count(best) ||
        (count(id) === count(best) && sameQueue(id, queue) < sameQueue(best, queue))
      )
        best = id
    }
    return best
  }
  const planned: PlannedMove[] = []
  const take = (from: number, item: { queue: string; partition: number }, to: number) => {
    const list = held.get(from) as { queue: string; partition: number }[]
    list.splice(list.indexOf(item), 1)
    held.get(to)?.push(item)
    planned.push({ queue: item.queue, partition: item.partition, from, to })
  }
  for (const g of removing) {
    for (const item of [...(held.get(g) ?? [])]) {
      if (!moving.has(`${item.queue}/${item.partition}`)) take(g, item, emptiest(item.queue))
    }
  }
  // Bounded: each move lowers the spread's sum of squares, and there are finitely many partitions.
  const total = [...held.values()].reduce((n, l) => n + l.length, 0)
  for (let i = 0; i <= total; i++) {
    let fullest = -1
    for (const g of active) if (fullest < 0 || count(g.groupId) > count(fullest)) fullest = g.groupId
    const candidates = (held.get(fullest) ?? []).filter((x) => !moving.has(`${x.queue}/${x.partition}`))
    if (candidates.length === 0) break
    // The queue with the most partitions in the fullest group gives one up.
    const item = candidates.reduce((a, b) =>
      sameQueue(fullest, b.queue) > sameQueue(fullest, a.queue) ? b : a,
    )
    const to = emptiest(item.queue)
    if (count(fullest) - count(to) <= 1) break
    take(fullest, item, to)
  }
  return planned
}

/** The scale plan's progress as `mq cluster status` shows it. */
export interface ScaleProgress {
  readonly targetGroups: number
  readonly movesTotal: number
  readonly movesDone: number
  /** growing | moving | removing | done ('' when no plan was ever asked for). */
  readonly state: string
}

export function scaleProgress(state: MetaState): ScaleProgress {
  const scale = state.scale
  if (!scale) return { targetGroups: 0, movesTotal: 0, movesDone: 0, state: '' }
  if (!scale.running)
    return {
      targetGroups: scale.targetGroups,
      movesTotal: scale.movesDone,
      movesDone: scale.movesDone,
      state: 'done',
    }
  const removing = new Set(scale.removing)
  const active = state.groups().filter((g) => !removing.has(g.groupId)).length
  const left = planMoves(state, removing).length + state.moves().length
  const phase = active < scale.targetGroups ? 'growing' : left > 0 ? 'moving' : 'removing'
  return {
    targetGroups: scale.targetGroups,
    movesTotal: scale.movesDone + left,
    movesDone: scale.movesDone,
    state: phase,
  }
}
