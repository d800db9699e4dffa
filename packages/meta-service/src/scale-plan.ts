import { lostMajority } from './majority'
import { type MetaState, MovePhase } from './meta-state'
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
  /**
   * A new group's create names the id it is to take (format level 29), so that a create
   * decided again after one of unknown outcome committed is refused instead of making one more.
   */
  readonly namesGroupIds?: boolean
  /**
   * The nodes counted as dead (silent past the replacement timeout). A group they leave without
   * a majority takes no partition, and a move still copying into one is given up
   * (`abortMove`, only with `abortsMoves`: format level 37): it could never end, and its source
   * keeps the partition fenced meanwhile (unavailable).
   */
  readonly lost?: ReadonlySet<string>
  readonly abortsMoves?: boolean
  /**
   * A group being removed whose replica change can never end (`lost` left it without a
   * majority) has that change given up and closed (`abandonReplicaChange`, then
   * `finishReplicaChange`: format level 36), so that it can be removed: the change held the
   * removal, and the plan, for good. The group goes with its replicas, so what the change did
   * in its Raft membership no longer matters.
   */
  readonly closesHopelessChanges?: boolean
}

/** One step the controller proposes to the meta group. */
export type ControlAction =
  | { readonly type: 'createGroup'; readonly replicas: readonly string[]; readonly groupId?: number }
  | {
      readonly type: 'startMove'
      readonly queue: string
      readonly partition: number
      readonly toGroup: number
    }
  | { readonly type: 'removeGroup'; readonly groupId: number }
  | { readonly type: 'abortMove'; readonly moveId: number }
  | { readonly type: 'abandonReplicaChange' | 'finishReplicaChange'; readonly groupId: number }
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
 * 0. give up each move still copying into a group that lost its majority (`lost`, `abortsMoves`);
 * 1. fewer groups than wanted (the last scale plan's target, else `defaultGroups`): create one on
 *    the least loaded live nodes (one per round; nothing else until there are enough);
 * 2. with a running scale plan: start moves (up to `movesMax` under way, not counting those
 *    whose source lost its majority: they wait for it) that take every
 *    partition off the groups being removed, then that even out the partitions per group
 *    (until the fullest and the emptiest group differ by at most one), each partition to the
 *    emptiest group (the one with the fewest partitions of the same queue on a tie, then the
 *    lowest id) that has a majority, each taken from the fullest group (its queue with the most
 *    partitions there);
 * 3. remove the groups being removed once they hold nothing and take part in no move (one
 *    changing its replicas that lost its majority has its change given up and closed first);
 * 4. finish the plan once nothing is left to do (not while a move waits for a group without a
 *    majority).
 */
export function controlActions(state: MetaState, input: ControlInput): ControlAction[] {
  const scale = state.scale?.running ? state.scale : undefined
  const removing = new Set(scale?.removing ?? [])
  const groups = state.groups()
  const active = groups.filter((g) => !removing.has(g.groupId))
  const wanted = state.scale ? state.scale.targetGroups : input.defaultGroups
  const lost = input.lost ?? new Set<string>()
  const cutOff = new Set(groups.filter((g) => lostMajority(g.replicas, lost)).map((g) => g.groupId))
  const aborts: ControlAction[] = input.abortsMoves
    ? state
        .moves()
        .filter((m) => m.phase === MovePhase.Copy && cutOff.has(m.toGroup))
        .map((m) => ({ type: 'abortMove', moveId: m.moveId }))
    : []
  if (active.length < wanted) {
    if (input.alive.size < input.replicas) return aborts
    const chosen = chooseReplicaNodes(state, input.replicas, input.alive)
    if (chosen.length !== input.replicas) return aborts
    return [
      ...aborts,
      {
        type: 'createGroup',
        replicas: chosen,
        ...(input.namesGroupIds ? { groupId: state.nextGroupId() } : {}),
      },
    ]
  }
  if (!scale) return aborts
  const actions: ControlAction[] = [...aborts]
  // A move whose source lost its majority waits for it (no leader there can copy, drop, or lift
  // a fence): it holds no slot, or two such moves stopped every other move for good.
  const underWay = state.moves().filter((m) => !cutOff.has(m.fromGroup)).length
  const moves = planMoves(state, removing, cutOff).slice(0, Math.max(0, input.movesMax - underWay))
  for (const m of moves)
    actions.push({ type: 'startMove', queue: m.queue, partition: m.partition, toGroup: m.to })
  // Not one changing its replicas: the meta state refuses to remove it until the change ends.
  // One that lost its majority can end no change: its change is given up, then closed (until
  // 2026-12-07, a meta-service audit, such a group was never removed and the plan never ended).
  for (const groupId of emptiedGroups(state)) {
    const change = state.replicaChange(groupId)
    if (!change) actions.push({ type: 'removeGroup', groupId })
    else if (input.closesHopelessChanges && cutOff.has(groupId))
      actions.push({ type: change.add === '' ? 'finishReplicaChange' : 'abandonReplicaChange', groupId })
  }
  const removingLeft = groups.some((g) => removing.has(g.groupId))
  // Not while moves wait for a group to get its majority back: the plan would end unbalanced.
  const waiting = () => cutOff.size > 0 && planMoves(state, removing).length > 0
  if (actions.length === 0 && state.moves().length === 0 && !removingLeft && !waiting())
    actions.push({ type: 'finishScale' })
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

/** A partition where it is, or where it is going. */
interface Placed {
  readonly queue: string
  readonly partition: number
}

/**
 * The partitions of one group, per queue, with the queues bucketed by how many of their
 * partitions the group holds: the planner asks "how many of queue q here" and "which queue
 * has the most here" in O(1) (it re-filtered every list per candidate before: cubic in the
 * partition count, 93 s for one plan of 8,000 one-partition queues, on the meta leader).
 */
class GroupLoad {
  count = 0
  readonly byQueue = new Map<string, Placed[]>()
  readonly byCount = new Map<number, Set<string>>()
  max = 0

  of(queue: string): number {
    return this.byQueue.get(queue)?.length ?? 0
  }

  add(item: Placed): void {
    const list = this.byQueue.get(item.queue) ?? []
    if (list.length === 0) this.byQueue.set(item.queue, list)
    this.#bucket(list.length)?.delete(item.queue)
    list.push(item)
    this.#bucket(list.length, true)?.add(item.queue)
    this.max = Math.max(this.max, list.length)
    this.count++
  }

  remove(item: Placed): void {
    const list = this.byQueue.get(item.queue)
    const at = list?.indexOf(item) ?? -1
    if (!list || at < 0) return
    this.#bucket(list.length)?.delete(item.queue)
    list.splice(at, 1)
    if (list.length === 0) this.byQueue.delete(item.queue)
    else this.#bucket(list.length, true)?.add(item.queue)
    while (this.max > 0 && !this.byCount.get(this.max)?.size) this.max--
    this.count--
  }

  /** Every partition here, queue by queue. */
  items(): Placed[] {
    return [...this.byQueue.values()].flat()
  }

  /** A partition not under way of a queue with the most partitions here; undefined when none. */
  candidate(moving: ReadonlySet<string>): Placed | undefined {
    for (let c = this.max; c > 0; c--) {
      for (const queue of this.byCount.get(c) ?? []) {
        const item = this.byQueue.get(queue)?.find((x) => !moving.has(`${x.queue}/${x.partition}`))
        if (item) return item
      }
    }
    return undefined
  }

  #bucket(n: number, create = false): Set<string> | undefined {
    if (n === 0) return undefined
    let set = this.byCount.get(n)
    if (!set && create) {
      set = new Set()
      this.byCount.set(n, set)
    }
    return set
  }
}

/**
 * Every move still needed to carry out the plan, given the moves under way (counted at
 * their target; an aborted one at its source): first off the groups in `removing`, then from
 * the fullest group to the emptiest until they differ by at most one. Partitions under way are
 * not moved again; the groups in `cutOff` (without a majority) neither take nor give any. About
 * O(moves × groups) (GroupLoad).
 */
export function planMoves(
  state: MetaState,
  removing: ReadonlySet<number>,
  cutOff: ReadonlySet<number> = new Set(),
): PlannedMove[] {
  const active = state.groups().filter((g) => !removing.has(g.groupId))
  if (active.length === 0) return []
  const moving = new Set(state.moves().map((m) => `${m.queue}/${m.partition}`))
  // Where each partition is (or is going), by group.
  const loads = new Map<number, GroupLoad>()
  for (const g of state.groups()) loads.set(g.groupId, new GroupLoad())
  const destination = new Map(
    state
      .moves()
      .filter((m) => m.phase !== MovePhase.Abort)
      .map((m) => [`${m.queue}/${m.partition}`, m.toGroup]),
  )
  let total = 0
  for (const q of state.queues()) {
    for (const p of q.partitions) {
      const at = destination.get(`${q.name}/${p.partition}`) ?? p.groupId
      loads.get(at)?.add({ queue: q.name, partition: p.partition })
      total++
    }
  }
  const load = (g: number) => loads.get(g) as GroupLoad
  const count = (g: number) => loads.get(g)?.count ?? 0
  /** The group to take a partition of `queue` (-1: none can). */
  const emptiest = (queue: string): number => {
    let best = -1
    for (const g of active) {
      const id = g.groupId
      if (cutOff.has(id)) continue
      if (
        best < 0 ||
        count(id) < count(best) ||
        (count(id) === count(best) && load(id).of(queue) < load(best).of(queue))
      )
        best = id
    }
    return best
  }
  const planned: PlannedMove[] = []
  const take = (from: number, item: Placed, to: number) => {
    load(from).remove(item)
    loads.get(to)?.add(item)
    planned.push({ queue: item.queue, partition: item.partition, from, to })
  }
  for (const g of removing) {
    if (cutOff.has(g)) continue
    for (const item of loads.get(g)?.items() ?? []) {
      const to = emptiest(item.queue)
      if (to >= 0 && !moving.has(`${item.queue}/${item.partition}`)) take(g, item, to)
    }
  }
  // Bounded: each move lowers the spread's sum of squares, and there are finitely many partitions.
  for (let i = 0; i <= total; i++) {
    let fullest = -1
    for (const g of active)
      if (!cutOff.has(g.groupId) && (fullest < 0 || count(g.groupId) > count(fullest))) fullest = g.groupId
    if (fullest < 0) break
    // The queue with the most partitions in the fullest group gives one up.
    const item = load(fullest).candidate(moving)
    if (!item) break
    const to = emptiest(item.queue)
    if (to < 0 || count(fullest) - count(to) <= 1) break
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
  const groups = state.groups()
  const active = groups.filter((g) => !removing.has(g.groupId)).length
  const left = planMoves(state, removing).length + state.moves().length
  // Nothing left to grow, move or remove (a plan for the count there was, say): done, though
  // the controller has yet to mark it so (it said "removing" until 2026-12-06).
  const removingLeft = groups.some((g) => removing.has(g.groupId))
  const phase =
    active < scale.targetGroups ? 'growing' : left > 0 ? 'moving' : removingLeft ? 'removing' : 'done'
  return {
    targetGroups: scale.targetGroups,
    movesTotal: scale.movesDone + left,
    movesDone: scale.movesDone,
    state: phase,
  }
}
