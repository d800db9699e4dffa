import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { MetaCommand } from './meta-commands'
import { MetaState, MovePhase } from './meta-state'
import { replicaActions } from './replica-plan'
import { type ControlInput, controlActions, scaleProgress } from './scale-plan'

const NODES = ['n1', 'n2', 'n3', 'n4']

function cluster(groups: number, queues: Record<string, number>): MetaState {
  const s = new MetaState()
  for (const [i, n] of NODES.entries())
    s.apply({ type: 'registerNode', nodeId: n, address: `127.0.0.1:${7001 + i}` }, 1)
  for (let g = 0; g < groups; g++) s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 2)
  for (const [name, partitions] of Object.entries(queues))
    expect(s.apply({ type: 'createQueue', name, config: { partitions } }, 3).ok).toBe(true)
  return s
}

const input: ControlInput = { alive: new Set(NODES), replicas: 3, defaultGroups: 1, movesMax: 2 }

function must(s: MetaState, command: MetaCommand): void {
  const r = s.apply(command, 10)
  if (!r.ok) throw new Error(`${command.type}: ${r.message}`)
}

/**
 * Runs the controller against the state as the server does (each action proposed, each move
 * carried through its two phases a round later) until it has nothing left to do. Returns
 * the number of rounds.
 */
function runController(s: MetaState, roundsMax = 500): number {
  for (let round = 1; round <= roundsMax; round++) {
    for (const m of s.moves()) {
      must(
        s,
        m.phase === MovePhase.Copy
          ? { type: 'completeMove', moveId: m.moveId }
          : { type: 'finishMove', moveId: m.moveId },
      )
    }
    const actions = controlActions(s, input)
    if (actions.length === 0 && s.moves().length === 0) return round
    for (const a of actions) must(s, a)
    expect(s.moves().length).toBeLessThanOrEqual(input.movesMax)
  }
  throw new Error('the controller did not finish')
}

function spread(s: MetaState): number[] {
  return [...s.partitionCounts().values()]
}

describe('controlActions (the scale plan)', () => {
  it('creates groups up to the default when no plan was asked for, and moves nothing', () => {
    const s = cluster(1, { a: 4 })
    expect(controlActions(s, { ...input, defaultGroups: 2 })).toEqual([
      { type: 'createGroup', replicas: ['n4', 'n1', 'n2'] },
    ])
    must(s, { type: 'createGroup', replicas: ['n4', 'n1', 'n2'] })
    expect(controlActions(s, { ...input, defaultGroups: 2 })).toEqual([])
    expect(s.queue('a')?.partitions.every((p) => p.groupId === 1)).toBe(true)
  })

  it('shows a plan for the count there is as done, not removing, before the controller ends it', () => {
    const s = cluster(3, { a: 6 })
    must(s, { type: 'scaleDataGroups', groups: 3 })
    expect(s.scale?.running).toBe(true)
    expect(scaleProgress(s)).toEqual({ targetGroups: 3, movesTotal: 0, movesDone: 0, state: 'done' })
    expect(controlActions(s, input)).toEqual([{ type: 'finishScale' }])
  })

  it('waits for enough live nodes before creating a group', () => {
    const s = cluster(1, {})
    must(s, { type: 'scaleDataGroups', groups: 2 })
    expect(controlActions(s, { ...input, alive: new Set(['n1', 'n2']) })).toEqual([])
  })

  it('grows 3 → 6: creates the groups, then spreads the partitions evenly, queue by queue', () => {
    const s = cluster(3, { a: 6, b: 6 })
    must(s, { type: 'scaleDataGroups', groups: 6 })
    expect(scaleProgress(s)).toMatchObject({ targetGroups: 6, state: 'growing' })
    runController(s)
    expect(s.groups()).toHaveLength(6)
    expect(spread(s)).toEqual([2, 2, 2, 2, 2, 2])
    for (const q of ['a', 'b']) {
      const groups = s.queue(q)?.partitions.map((p) => p.groupId) ?? []
      expect(new Set(groups).size).toBe(6)
    }
    expect(scaleProgress(s)).toEqual({ targetGroups: 6, movesTotal: 6, movesDone: 6, state: 'done' })
  })

  it('shrinks 6 → 2: empties the groups with the fewest partitions, then removes them', () => {
    const s = cluster(6, { a: 5, b: 4 })
    must(s, { type: 'scaleDataGroups', groups: 2 })
    const removing = s.scale?.removing ?? []
    expect(removing).toHaveLength(4)
    expect(scaleProgress(s).state).toBe('moving')
    runController(s)
    expect(s.groups().map((g) => g.groupId)).toEqual([1, 2, 3, 4, 5, 6].filter((g) => !removing.includes(g)))
    expect(spread(s).sort()).toEqual([4, 5])
    expect(scaleProgress(s).state).toBe('done')
  })

  it('waits for a replica change of an emptied group before removing it, and starts none there', () => {
    const s = cluster(3, { a: 2 })
    must(s, { type: 'scaleDataGroups', groups: 2 })
    const [gone] = s.scale?.removing ?? []
    expect(gone).toBeDefined()
    // n3 is lost: every group would replace it (n4-n6 take one each), but the emptied one is
    // removed instead.
    for (const n of ['n5', 'n6']) must(s, { type: 'registerNode', nodeId: n, address: `${n}:1` })
    const lost = { alive: new Set(['n1', 'n2', 'n4', 'n5', 'n6']), lost: new Set(['n3']), changesMax: 3 }
    expect(
      replicaActions(s, lost)
        .map((a) => a.groupId)
        .sort(),
    ).toEqual(
      s
        .groups()
        .map((g) => g.groupId)
        .filter((g) => g !== gone),
    )
    // A change that began before the group was emptied holds its removal up (the meta state
    // would refuse it), and nothing else.
    must(s, { type: 'startReplicaChange', groupId: gone as number, add: 'n4', remove: 'n3', reason: 'dead' })
    expect(controlActions(s, input).filter((a) => a.type === 'removeGroup')).toEqual([])
    expect(scaleProgress(s).state).toBe('removing')
    must(s, { type: 'finishReplicaChange', groupId: gone as number })
    expect(controlActions(s, input)).toEqual([{ type: 'removeGroup', groupId: gone }])
  })

  it('new queues avoid groups being removed', () => {
    const s = cluster(3, { a: 3 })
    must(s, { type: 'scaleDataGroups', groups: 1 })
    const removing = s.scale?.removing ?? []
    must(s, { type: 'createQueue', name: 'late', config: { partitions: 4 } })
    expect(s.queue('late')?.partitions.some((p) => removing.includes(p.groupId))).toBe(false)
  })

  it('a new plan replaces a running one, and a meta leader change (snapshot) resumes it', () => {
    const s = cluster(2, { a: 8 })
    must(s, { type: 'scaleDataGroups', groups: 4 })
    for (let i = 0; i < 3; i++) for (const a of controlActions(s, input)) must(s, a)
    const resumed = new MetaState()
    resumed.restore(s.snapshot())
    expect(resumed.moves()).toEqual(s.moves())
    expect(resumed.scale).toEqual(s.scale)
    must(resumed, { type: 'scaleDataGroups', groups: 3 })
    runController(resumed)
    expect(resumed.groups()).toHaveLength(3)
    expect(spread(resumed).sort()).toEqual([2, 3, 3])
  })

  it('property: any plan ends with the target number of groups, evenly spread, nothing lost', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.integer({ min: 1, max: 12 }), { minLength: 1, maxLength: 4 }),
        (from, to, sizes) => {
          const s = cluster(from, Object.fromEntries(sizes.map((n, i) => [`q${i}`, n])))
          must(s, { type: 'scaleDataGroups', groups: to })
          runController(s)
          const counts = spread(s)
          expect(counts).toHaveLength(to)
          expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1)
          expect(counts.reduce((a, b) => a + b, 0)).toBe(sizes.reduce((a, b) => a + b, 0))
        },
      ),
      { numRuns: 60 },
    )
  })
})

describe('controlActions with groups that lost their majority', () => {
  /** Groups 1 and 2 on n1-n3 holding a's 4 partitions, group 3 on n2-n4 (cut off when n3 and n4 are lost), a plan for 3. */
  const withGroupThree = () => {
    const s = cluster(2, { a: 4 })
    must(s, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(s, { type: 'scaleDataGroups', groups: 3 })
    return s
  }
  const lost = new Set(['n3', 'n4'])

  it('moves nothing into (or out of) such a group', () => {
    const s = withGroupThree()
    const moves = (actions: readonly { type: string; toGroup?: number }[]) =>
      actions.filter((a) => a.type === 'startMove').map((a) => a.toGroup)
    expect(moves(controlActions(s, input))).toEqual([3])
    expect(controlActions(s, { ...input, lost })).toEqual([])
    // Group 1 cut off (its nodes lost) on a plan that removes it: nothing can be moved off it.
    const t = cluster(1, { a: 2 })
    must(t, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(t, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(t, { type: 'scaleDataGroups', groups: 2 })
    expect(moves(controlActions(t, input)).length).toBeGreaterThan(0)
    expect(moves(controlActions(t, { ...input, lost: new Set(['n1', 'n3']) }))).toEqual([])
  })

  it('removes such a group, empty, when the plan is scaled down again; then finishes', () => {
    const s = withGroupThree()
    expect(controlActions(s, { ...input, lost, abortsMoves: true })).toEqual([])
    must(s, { type: 'scaleDataGroups', groups: 2 })
    expect(s.scale?.removing).toEqual([3])
    const actions = controlActions(s, { ...input, lost, abortsMoves: true })
    expect(actions).toEqual([{ type: 'removeGroup', groupId: 3 }])
    for (const action of actions) must(s, action)
    expect(controlActions(s, { ...input, lost, abortsMoves: true })).toEqual([{ type: 'finishScale' }])
  })

  // A meta-service audit (2026-12-07): the change could never commit, the meta state refuses to
  // remove a group while it is recorded, and the plan (which holds up replica balancing) never
  // ended.
  it('removes such a group being removed while it changes its replicas: the change is given up and closed first', () => {
    const s = cluster(2, { a: 4 })
    must(s, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(s, { type: 'startReplicaChange', groupId: 3, add: 'n1', remove: 'n4', reason: 'balance' })
    must(s, { type: 'scaleDataGroups', groups: 2 })
    expect(s.scale?.removing).toEqual([3])
    const closes = { ...input, lost, abortsMoves: true, closesHopelessChanges: true }
    // Not below format level 36, nor while the group keeps its majority.
    expect(controlActions(s, { ...input, lost, abortsMoves: true })).toEqual([])
    expect(controlActions(s, { ...closes, lost: new Set(['n4']) })).toEqual([])
    const steps: string[] = []
    for (let round = 0; round < 5 && s.scale?.running; round++) {
      for (const action of controlActions(s, closes)) {
        steps.push(action.type)
        must(s, action)
      }
    }
    expect(steps).toEqual(['abandonReplicaChange', 'finishReplicaChange', 'removeGroup', 'finishScale'])
    expect(s.group(3)).toBeUndefined()
    expect(s.replicaChange(3)).toBeUndefined()
    // A shrink (it adds nobody) is closed at once.
    const t = cluster(2, { a: 4 })
    must(t, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(t, { type: 'startReplicaChange', groupId: 3, add: '', remove: 'n4', reason: 'shrink' })
    must(t, { type: 'scaleDataGroups', groups: 2 })
    expect(controlActions(t, closes)).toEqual([{ type: 'finishReplicaChange', groupId: 3 }])
  })

  it('counts no move whose source lost its majority against the moves under way', () => {
    // Group 1 on n1-n3 holding b's 4 partitions; groups 2 and 3 on n2-n4 (cut off when n3 and n4
    // are lost) holding a's 2; group 4 on n1-n3; a plan for 4.
    const s = new MetaState()
    for (const [i, n] of NODES.entries())
      s.apply({ type: 'registerNode', nodeId: n, address: `127.0.0.1:${7001 + i}` }, 1)
    must(s, { type: 'createGroup', replicas: ['n1', 'n2', 'n3'] })
    must(s, { type: 'createQueue', name: 'b', config: { partitions: 4 } })
    must(s, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(s, { type: 'createGroup', replicas: ['n2', 'n3', 'n4'] })
    must(s, { type: 'createQueue', name: 'a', config: { partitions: 2 } })
    expect(s.queue('a')?.partitions.map((p) => p.groupId)).toEqual([2, 3])
    must(s, { type: 'createGroup', replicas: ['n1', 'n2', 'n3'] })
    must(s, { type: 'scaleDataGroups', groups: 4 })
    // a's two partitions reached group 4, then their sources lost their majority before the drop.
    for (const partition of [0, 1]) {
      must(s, { type: 'startMove', queue: 'a', partition, toGroup: 4 })
      must(s, { type: 'completeMove', moveId: partition + 1 })
    }
    const lost = new Set(['n3', 'n4'])
    const started = controlActions(s, { ...input, lost }).filter((a) => a.type === 'startMove')
    // Group 1 (4 partitions) gives one to group 4 (2), though two moves are recorded.
    expect(started).toEqual([{ type: 'startMove', queue: 'b', partition: expect.any(Number), toGroup: 4 }])
    // While the sources count as alive, the two moves hold both slots.
    expect(controlActions(s, input).filter((a) => a.type === 'startMove')).toEqual([])
  })

  it('gives up a move still copying into such a group, from format level 37 only, and plans it elsewhere after', () => {
    const s = withGroupThree()
    must(s, { type: 'startMove', queue: 'a', partition: 0, toGroup: 3 })
    expect(controlActions(s, { ...input, lost })).toEqual([])
    expect(controlActions(s, { ...input, lost, abortsMoves: true })).toEqual([
      { type: 'abortMove', moveId: 1 },
    ])
    // Not while the group keeps its majority.
    expect(controlActions(s, { ...input, lost: new Set(['n4']), abortsMoves: true })).not.toContainEqual({
      type: 'abortMove',
      moveId: 1,
    })
    must(s, { type: 'abortMove', moveId: 1 })
    // Aborting, it counts at its source: the plan's progress says a move is left.
    expect(controlActions(s, { ...input, lost, abortsMoves: true })).toEqual([])
    must(s, { type: 'finishMove', moveId: 1 })
    // Group 3 back: the plan moves a partition there again.
    expect(controlActions(s, { ...input, abortsMoves: true })).toContainEqual(
      expect.objectContaining({ type: 'startMove', toGroup: 3 }),
    )
    // One past its copy (routed to the target already) is not aborted.
    const t = withGroupThree()
    must(t, { type: 'startMove', queue: 'a', partition: 0, toGroup: 3 })
    must(t, { type: 'completeMove', moveId: 1 })
    expect(controlActions(t, { ...input, lost, abortsMoves: true })).toEqual([])
  })
})

describe('MetaState moves', () => {
  it('routes a partition to its target at completeMove (the route epoch bumps), and not before', () => {
    const s = cluster(2, { a: 2 })
    const from = s.queue('a')?.partitions[0]?.groupId as number
    const to = from === 1 ? 2 : 1
    const epoch = s.routeEpoch
    const r = s.apply({ type: 'startMove', queue: 'a', partition: 0, toGroup: to }, 5)
    expect(r).toMatchObject({ ok: true, value: { moveId: 1, fromGroup: from, toGroup: to, phase: 'copy' } })
    expect(s.routeEpoch).toBe(epoch)
    expect(s.queue('a')?.partitions[0]?.groupId).toBe(from)
    expect(s.apply({ type: 'finishMove', moveId: 1 }, 6)).toMatchObject({ ok: false })
    must(s, { type: 'completeMove', moveId: 1 })
    must(s, { type: 'completeMove', moveId: 1 })
    expect(s.routeEpoch).toBe(epoch + 1)
    expect(s.queue('a')?.partitions[0]?.groupId).toBe(to)
    expect(s.apply({ type: 'removeGroup', groupId: from }, 7)).toMatchObject({ ok: false, message: /move 1/ })
    must(s, { type: 'finishMove', moveId: 1 })
    must(s, { type: 'finishMove', moveId: 1 })
    expect(s.moves()).toEqual([])
  })

  it('an aborted move never routes to its target; it ends without counting as done (FORMAT_LEVEL_MOVE_ABORT)', () => {
    const s = cluster(2, { a: 2 })
    must(s, { type: 'scaleDataGroups', groups: 2 })
    const from = s.queue('a')?.partitions[0]?.groupId as number
    const epoch = s.routeEpoch
    must(s, { type: 'startMove', queue: 'a', partition: 0, toGroup: 3 - from })
    expect(s.apply({ type: 'abortMove', moveId: 1 }, 6)).toMatchObject({
      ok: true,
      value: { phase: 'abort' },
    })
    must(s, { type: 'abortMove', moveId: 1 })
    expect(s.apply({ type: 'completeMove', moveId: 1 }, 7)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/aborted/),
    })
    expect(s.queue('a')?.partitions[0]?.groupId).toBe(from)
    // The partition cannot be moved again until the abort ends.
    expect(s.apply({ type: 'startMove', queue: 'a', partition: 0, toGroup: 3 - from }, 8)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/being moved already/),
    })
    must(s, { type: 'finishMove', moveId: 1 })
    expect(s.moves()).toEqual([])
    expect(s.routeEpoch).toBe(epoch)
    expect(s.scale?.movesDone).toBe(0)
    // One that reached its target cannot be aborted, nor one not under way.
    must(s, { type: 'startMove', queue: 'a', partition: 0, toGroup: 3 - from })
    must(s, { type: 'completeMove', moveId: 2 })
    expect(s.apply({ type: 'abortMove', moveId: 2 }, 9)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/reached its target/),
    })
    expect(s.apply({ type: 'abortMove', moveId: 9 }, 9)).toMatchObject({
      ok: false,
      message: /not under way/,
    })
    must(s, { type: 'finishMove', moveId: 2 })
    expect(s.scale?.movesDone).toBe(1)
  })

  it('refuses bad moves with a clear error and no state change', () => {
    const s = cluster(2, { a: 2 })
    const at = s.queue('a')?.partitions[0]?.groupId as number
    must(s, { type: 'startMove', queue: 'a', partition: 1, toGroup: at })
    const before = s.snapshot()
    const cases: [MetaCommand, RegExp][] = [
      [{ type: 'startMove', queue: 'nope', partition: 0, toGroup: 1 }, /does not exist/],
      [{ type: 'startMove', queue: 'a', partition: 9, toGroup: 1 }, /no partition 9/],
      [{ type: 'startMove', queue: 'a', partition: 0, toGroup: 99 }, /group 99 does not exist/],
      [{ type: 'startMove', queue: 'a', partition: 0, toGroup: at }, /already/],
      [{ type: 'startMove', queue: 'a', partition: 1, toGroup: 3 - at }, /does not exist|already/],
      [{ type: 'completeMove', moveId: 42 }, /not under way/],
      [{ type: 'scaleDataGroups', groups: 0 }, /from 1 to/],
      [{ type: 'scaleDataGroups', groups: 2.5 }, /from 1 to/],
    ]
    for (const [command, message] of cases) {
      const r = s.apply(command, 20)
      expect(r, command.type).toMatchObject({ ok: false, message: expect.stringMatching(message) })
    }
    expect(s.snapshot()).toEqual(before)
  })

  it('deleting a queue abandons its moves', () => {
    const s = cluster(2, { a: 2 })
    const at = s.queue('a')?.partitions[0]?.groupId as number
    must(s, { type: 'startMove', queue: 'a', partition: 0, toGroup: 3 - at })
    must(s, { type: 'deleteQueue', name: 'a' })
    expect(s.moves()).toEqual([])
  })

  it('plans a scale of 20,000 one-partition queues in one go, balanced (the planner is not cubic)', () => {
    const queues = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`q${i}`, 1]))
    const s = cluster(3, queues)
    must(s, { type: 'scaleDataGroups', groups: 4 })
    must(s, { type: 'createGroup', replicas: ['n1', 'n2', 'n3'] })
    const progress = scaleProgress(s)
    // One plan moves a quarter of the partitions onto the new group: 5,000 each.
    expect(progress.movesTotal).toBe(5_000)
  })
})
