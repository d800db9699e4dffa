import { FRESH_STORE_GRACE_MS, type MetaCommand, MetaState, storeReplacedMessage } from '@mq/meta-service'
import {
  belowClusterLevelMessage,
  type ChangeReplicasRequest,
  type ChangeReplicasResponse,
  type FencePartitionsRequest,
  FORMAT_LEVEL,
  FORMAT_LEVEL_ABANDON_CHANGE,
  FORMAT_LEVEL_CREATE_GROUP_ID,
  FORMAT_LEVEL_MOVE_ABORT,
  FORMAT_LEVEL_STORE_ID,
  type HeartbeatRequest,
  type MovePartitionRequest,
  type MovePartitionResponse,
  saysBelowClusterLevel,
} from '@mq/protocol'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { Logger } from '../log'
import { capturedLog } from '../log-capture'
import { Controller, type ControllerHost } from './controller'
import type { PeerCalls } from './peer-calls'

const NODES = ['n1', 'n2', 'n3']

/**
 * A meta leader's controller over an in-memory meta state: 3 nodes (and `extra` more without
 * replicas), `groups` data groups (6) all led by n1; the meta group's voters are n1-n3. `metaSteps` answers
 * each meta membership step in turn (then: done); `dataSteps` each data group's (Peer.ChangeReplicas).
 */
function leading(
  options: {
    extra?: string[]
    /** Data groups, each on n1-n3 (default 6). */
    groups?: number
    /** The node's own "dataGroups" setting (default `groups`). */
    dataGroups?: number
    metaSteps?: ChangeReplicasResponse[]
    dataSteps?: ChangeReplicasResponse[]
    /** Awaited before each Peer.ChangeReplicas call is answered (a slow group leader). */
    beforeDataAnswer?: (req: ChangeReplicasRequest) => Promise<void>
    unregistered?: string[]
    /** The format level each node is registered at (default FORMAT_LEVEL). */
    levels?: Record<string, number>
    /** Data groups whose leader does not answer FencePartitions (hangs: never calls back). */
    fenceHangs?: number[]
    /** Commands the meta state refuses (as it would one that no longer fits its state). */
    refuse?: (command: MetaCommand) => boolean
    /** The controller's clock (ControllerHost.nowMs); default the (fake) wall clock. */
    nowMs?: () => number
    /** ControllerHost.replicas (default 3) and replicationFactor (default none). */
    replicas?: number
    replicationFactor?: number
    /** Awaited before each proposal is applied (a slow commit). */
    beforePropose?: (command: MetaCommand) => Promise<void>
    /** ControllerHost.log. */
    log?: Logger
    /** Peer.MovePartition's answer (an Error: the call fails); undefined: it never answers. */
    moveAnswer?: (req: MovePartitionRequest) => MovePartitionResponse | Error | undefined
  } = {},
) {
  const state = new MetaState()
  const apply = (command: MetaCommand) => state.apply(command, Date.now())
  /** Entries committed before this leader's term that it has not applied yet (see `committed`). */
  const unapplied: MetaCommand[] = []
  const applyCommitted = () => {
    for (let c = unapplied.shift(); c; c = unapplied.shift()) apply(c)
  }
  const metaCalls: [string, string, boolean][] = []
  const dataCalls: ChangeReplicasRequest[] = []
  const fenceCalls: FencePartitionsRequest[] = []
  const done = { done: true, step: '', voters: NODES }
  const moveCalls: { request: MovePartitionRequest; stillWanted: (() => boolean) | undefined }[] = []
  /** Each ChangeReplicas call's `stillWanted` (in the order of `dataCalls`). */
  const dataCallsWanted: ((() => boolean) | undefined)[] = []
  const calls = {
    callLeader: async (
      _replicas: unknown,
      fn: (...args: unknown[]) => void,
      _timeoutMs: number,
      callOptions: { stillWanted?: () => boolean } = {},
    ) =>
      new Promise((resolve, reject) => {
        const peer = {
          // By default never answers (a copy under way): the test looks at what the controller asked.
          movePartition: (
            request: MovePartitionRequest,
            _md: unknown,
            _opts: unknown,
            cb: (...a: unknown[]) => void,
          ) => {
            moveCalls.push({ request, stillWanted: callOptions.stillWanted })
            const answer = options.moveAnswer?.(request)
            if (answer instanceof Error) cb(answer)
            else if (answer) cb(null, answer)
          },
          changeReplicas: (
            req: ChangeReplicasRequest,
            _md: unknown,
            _opts: unknown,
            cb: (...a: unknown[]) => void,
          ) => {
            dataCalls.push(req)
            dataCallsWanted.push(callOptions.stillWanted)
            const answer = options.dataSteps?.[dataCalls.length - 1] ?? done
            if (!options.beforeDataAnswer) cb(null, answer)
            else void options.beforeDataAnswer(req).then(() => cb(null, answer))
          },
          fencePartitions: (
            req: FencePartitionsRequest,
            _md: unknown,
            _opts: unknown,
            cb: (...a: unknown[]) => void,
          ) => {
            fenceCalls.push(req)
            if (!options.fenceHangs?.includes(req.groupId)) cb(null, {})
          },
        }
        fn({ peer }, undefined, {}, (e: unknown, r: unknown) => (e ? reject(e) : resolve(r)))
      }),
  } as unknown as PeerCalls
  const registered = [...NODES, ...(options.extra ?? [])].filter((n) => !options.unregistered?.includes(n))
  for (const n of registered)
    apply({
      type: 'registerNode',
      nodeId: n,
      address: `${n}:1`,
      formatLevel: options.levels?.[n] ?? FORMAT_LEVEL,
    })
  const groupReplicas = NODES.filter((n) => registered.includes(n))
  const groups = options.groups ?? 6
  for (let g = 0; g < groups; g++) apply({ type: 'createGroup', replicas: groupReplicas })
  apply({ type: 'createQueue', name: 'q', config: { partitions: groups } })
  for (const g of state.groups()) apply({ type: 'reportLeader', groupId: g.groupId, leaderId: 'n1', term: 2 })
  let metaTerm = 1
  const host: ControllerHost = {
    nodeId: 'n1',
    replicas: options.replicas ?? 3,
    ...(options.replicationFactor ? { replicationFactor: options.replicationFactor } : {}),
    dataGroups: options.dataGroups ?? groups,
    replaceDeadAfterMs: 10_000,
    calls,
    leaderState: () => state,
    barrier: async () => applyCommitted(),
    // A proposal is applied after every entry committed before it.
    propose: async (command) => {
      await options.beforePropose?.(command)
      applyCommitted()
      return options.refuse?.(command)
        ? { ok: false, code: 'INVALID_ARGUMENT', message: 'refused' }
        : apply(command)
    },
    notLeader: () => new Error('not the leader'),
    transferMetaLeader: () => {},
    metaMembership: () => ({ voters: NODES, learners: [] }),
    metaTerm: () => metaTerm,
    ...(options.nowMs ? { nowMs: options.nowMs } : {}),
    ...(options.log ? { log: options.log } : {}),
    changeMetaMembers: async ({ add, remove, removeFirst, replicas }) => {
      expect(replicas).toEqual(state.metaMembers())
      metaCalls.push([add, remove, removeFirst])
      return options.metaSteps?.[metaCalls.length - 1] ?? done
    },
  }
  let controller = new Controller(host)
  /** Another controller over the same meta state takes over (a new meta leader). */
  const takeOver = () => {
    controller = new Controller(host)
    return controller
  }
  /**
   * One heartbeat of `nodeId` (the groups it leads, whether it hosts a meta replica, the format
   * level of its version): the answer.
   */
  const answer = async (
    nodeId: string,
    hostsMeta = false,
    formatLevel = FORMAT_LEVEL,
    store: {
      storeId?: string
      freshStore?: boolean
      groups?: HeartbeatRequest['groups']
      nodesFingerprint?: string
    } = {},
  ) => {
    const groups =
      store.groups ??
      state
        .groups()
        .filter((g) => g.leaderId === nodeId)
        .map((g) => ({ groupId: g.groupId, leaderId: nodeId, term: 2, commitIndex: 10, appliedIndex: 10 }))
    return controller.onHeartbeat({
      nodeId,
      address: `${nodeId}:1`,
      groups,
      tokensFingerprint: '',
      hostsMeta,
      formatLevel,
      storeId: store.storeId ?? '',
      freshStore: store.freshStore ?? false,
      nodesFingerprint: store.nodesFingerprint ?? '',
    })
  }
  /**
   * `nodes` beat every 500 ms for `ms` (n1-n3 with their meta replica, each at the format level
   * `level` picks), with a controller round after each beat when `rounds`.
   */
  const beatNodes = async (
    nodes: readonly string[],
    ms: number,
    options: { rounds?: boolean; level?: (nodeId: string) => number } = {},
  ) => {
    for (let t = 0; t < ms; t += 500) {
      vi.advanceTimersByTime(500)
      for (const n of nodes) await answer(n, NODES.includes(n), options.level?.(n) ?? FORMAT_LEVEL)
      if (options.rounds) await controller.round()
    }
  }
  /** The transfers asked of `nodeId` at a heartbeat. */
  const beat = async (nodeId: string) => (await answer(nodeId)).transfers
  /** Every node beats every 500 ms for `ms`; the transfers asked of n1 at the last beat. */
  const beatFor = async (ms: number) => {
    let transfers: Awaited<ReturnType<typeof beat>> = []
    for (let t = 0; t < ms; t += 500) {
      vi.advanceTimersByTime(500)
      for (const n of NODES) {
        const asked = await beat(n)
        if (n === 'n1') transfers = asked
      }
    }
    return transfers
  }
  return {
    state,
    apply,
    answer,
    beat,
    beatFor,
    beatNodes,
    get controller() {
      return controller
    },
    takeOver,
    /**
     * Entries a predecessor committed that this leader applies only past a barrier (or before
     * its own proposal): what a new meta leader's state lacks at first.
     */
    committed: (...commands: MetaCommand[]) => {
      unapplied.push(...commands)
    },
    /** This node is elected meta leader again, in a new term (no round saw it follow). */
    elect: () => {
      metaTerm++
    },
    metaCalls,
    dataCalls,
    fenceCalls,
    moveCalls,
    dataCallsWanted,
  }
}

/** Lets the controller's fire-and-forget steps (a resolved call, then a proposal) finish. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve()
}

// Every test runs on fake timers from the same instant (heartbeat gaps and timeouts are timed).
beforeEach(() => {
  vi.useFakeTimers()
  vi.setSystemTime(1_000_000)
})
afterEach(() => vi.useRealTimers())

/**
 * A leading controller over groups 1-2 on n1-n3 (holding q) and group 3 on n1, n4, n5, every
 * node at format level `level`; its log captured.
 */
function withGroupThree(level: number, options: Parameters<typeof leading>[0] = {}) {
  const log = capturedLog()
  const c = leading({
    groups: 2,
    extra: ['n4', 'n5'],
    levels: { n1: level, n2: level, n3: level, n4: level, n5: level },
    log: log.log,
    ...options,
  })
  expect(c.apply({ type: 'createGroup', replicas: ['n1', 'n4', 'n5'] }).ok).toBe(true)
  return { c, log }
}

describe('Controller: a move into a group that lost its majority', () => {
  /**
   * Groups 1-2 on n1-n3 and group 3 on n1, n4, n5; q/0 moving into group 3, whose copy fails
   * (the target has no leader) while the source lifts its fence at once; n4 and n5 go silent.
   */
  const intoGroupThree = (level: number) => {
    const { c, log } = withGroupThree(level, {
      moveAnswer: (r) => (r.phase === 'abort' ? { chunks: 0, bytes: 0 } : new Error('group 3 has no leader')),
    })
    const from = c.state.queue('q')?.partitions[0]?.groupId
    expect(c.apply({ type: 'startMove', queue: 'q', partition: 0, toGroup: 3 }).ok).toBe(true)
    return { c, from, log }
  }

  it(`aborts it from format level ${FORMAT_LEVEL_MOVE_ABORT}: the source lifts its fence, the move ends, the partition stays`, async () => {
    const { c, from, log } = intoGroupThree(FORMAT_LEVEL_MOVE_ABORT)
    await c.beatNodes(['n1', 'n2', 'n3'], 13_000, { rounds: true, level: () => FORMAT_LEVEL_MOVE_ABORT })
    await settle()
    const phases = c.moveCalls.map((m) => m.request.phase)
    expect(phases).toContain('copy')
    expect(phases.filter((p) => p === 'abort')).toHaveLength(1)
    const abort = c.moveCalls.find((m) => m.request.phase === 'abort')?.request
    expect(abort).toMatchObject({ moveId: 1, fromGroup: from, toGroup: 3, partition: 0 })
    expect(c.state.moves()).toEqual([])
    expect(c.state.queue('q')?.partitions[0]?.groupId).toBe(from)
    const text = log.lines.map((l) => l.msg).join('\n')
    expect(text).toMatch(
      /move 1 \(q\/0 from group \d to group 3\) aborted: its target group lost its majority/,
    )
    expect(text).toMatch(/move 1 of q\/0 ended aborted/)
    // No new move into group 3 while it has no majority.
    await c.beatNodes(['n1', 'n2', 'n3'], 5_000, { rounds: true, level: () => FORMAT_LEVEL_MOVE_ABORT })
    expect(c.state.moves()).toEqual([])
  })

  it('a new meta leader does not plan the aborted move into that group again before it has heard every node', async () => {
    const { c } = intoGroupThree(FORMAT_LEVEL_MOVE_ABORT)
    // A plan for 3 groups that wants partitions of r in group 3 (3, 3 and 0 of them).
    expect(c.apply({ type: 'finishMove', moveId: 1 }).ok).toBe(false)
    expect(c.apply({ type: 'createQueue', name: 'r', config: { partitions: 4 } }).ok).toBe(true)
    expect(c.apply({ type: 'scaleDataGroups', groups: 3 }).ok).toBe(true)
    const level = { rounds: true, level: () => FORMAT_LEVEL_MOVE_ABORT }
    await c.beatNodes(['n1', 'n2', 'n3'], 13_000, level)
    await settle()
    // n4 and n5 are lost (recorded silent): every move into group 3 was aborted, none is left.
    expect(c.state.node('n4')?.silentSinceMs).toBeDefined()
    expect(c.state.moves().filter((m) => m.toGroup === 3)).toEqual([])
    const aborts = c.moveCalls.filter((m) => m.request.phase === 'abort').length
    expect(aborts).toBeGreaterThan(0)
    // Another meta leader takes over: group 3 still has no majority.
    c.elect()
    c.takeOver()
    await c.beatNodes(['n1', 'n2', 'n3'], 3_000, level)
    expect(c.state.moves().filter((m) => m.toGroup === 3)).toEqual([])
    await c.beatNodes(['n1', 'n2', 'n3'], 5_000, level)
    await settle()
    expect(c.moveCalls.filter((m) => m.request.phase === 'abort').length).toBe(aborts)
  })

  it(`waits below format level ${FORMAT_LEVEL_MOVE_ABORT} (replicas of older versions would not read it)`, async () => {
    const level = FORMAT_LEVEL_MOVE_ABORT - 1
    const { c } = intoGroupThree(level)
    await c.beatNodes(['n1', 'n2', 'n3'], 13_000, { rounds: true, level: () => level })
    await settle()
    expect(c.moveCalls.map((m) => m.request.phase)).not.toContain('abort')
    expect(c.state.moves()).toMatchObject([{ moveId: 1, phase: 'copy' }])
  })

  it('logs the move retried every round at most once per 10 s, counting the failures between', async () => {
    const level = FORMAT_LEVEL_MOVE_ABORT - 1
    const { c, log } = intoGroupThree(level)
    await c.beatNodes(['n1', 'n2', 'n3'], 25_000, { rounds: true, level: () => level })
    await settle()
    const retried = log.lines.map((l) => l.msg).filter((m) => m.includes('will be retried'))
    // A line every round (500 ms) before: ~50 of them.
    expect(c.moveCalls.filter((m) => m.request.phase === 'copy').length).toBeGreaterThan(10)
    expect(retried.length).toBeGreaterThanOrEqual(2)
    expect(retried.length).toBeLessThanOrEqual(3)
    expect(retried[0]).toMatch(/^mq-server: move 1 \(q\/0\) will be retried: .*group 3 has no leader$/)
    expect(retried[1]).toMatch(/will be retried: .* \(failed \d+ times since the last such line\)$/)
  })
})

describe('Controller: a group being removed that lost its majority while changing its replicas', () => {
  /**
   * Groups 1-2 on n1-n3 hold q; group 3 on n1, n4, n5 holds nothing and is adding n2 in place
   * of n5 (its leader never answers); a plan for 2 groups removes it; n4 and n5 go silent.
   */
  const run = async (level: number) => {
    const { c, log } = withGroupThree(level, { beforeDataAnswer: () => new Promise<void>(() => {}) })
    expect(
      c.apply({ type: 'startReplicaChange', groupId: 3, add: 'n2', remove: 'n5', reason: 'balance' }).ok,
    ).toBe(true)
    expect(c.apply({ type: 'scaleDataGroups', groups: 2 }).ok).toBe(true)
    await c.beatNodes(['n1', 'n2', 'n3'], 13_000, { rounds: true, level: () => level })
    await settle()
    return { c, log }
  }

  // Until 2026-12-07 (a meta-service audit) the change could never end, the meta state refused
  // to remove a group while it was recorded, and the plan never ended.
  it(`gives the change up and closes it, then removes the group and ends the plan (format level ${FORMAT_LEVEL_ABANDON_CHANGE})`, async () => {
    const { c, log } = await run(FORMAT_LEVEL_ABANDON_CHANGE)
    expect(c.state.group(3)).toBeUndefined()
    expect(c.state.replicaChange(3)).toBeUndefined()
    expect(c.state.scale?.running).toBe(false)
    expect(log.lines.map((l) => l.msg).join('\n')).toMatch(
      /group 3: gave up adding a replica on n2: the group is being removed/,
    )
  })

  it('waits below that level', async () => {
    const { c } = await run(FORMAT_LEVEL_ABANDON_CHANGE - 1)
    expect(c.state.group(3)).toBeDefined()
    expect(c.state.replicaChange(3)).toMatchObject({ add: 'n2', remove: 'n5' })
    expect(c.state.scale?.running).toBe(true)
  })
})

describe('Controller: a deleted queue', () => {
  it("has each data group's leader fence the queue's partitions, and waits at most 2 s for them", async () => {
    const c = leading({ groups: 3, fenceHangs: [3] })
    c.apply({ type: 'createQueue', name: 'gone', config: { partitions: 5 } })
    const r = c.apply({ type: 'deleteQueue', name: 'gone' })
    if (!r.ok) throw new Error(r.message)
    const deleted = r.value as Parameters<ReturnType<Controller['port']>['fenceDeletedQueue']>[0]
    let done = false
    const fencing = c.controller
      .port()
      .fenceDeletedQueue(deleted)
      .then(() => {
        done = true
      })
    await settle()
    // One call per group, naming the queue's incarnation and the group's partitions.
    expect(c.fenceCalls.map((f) => [f.groupId, f.storedAs, f.partitions])).toEqual([
      [1, `gone#${deleted.queueId}`, [0, 3]],
      [2, `gone#${deleted.queueId}`, [1, 4]],
      [3, `gone#${deleted.queueId}`, [2]],
    ])
    // Group 3 does not answer: the deletion is answered after 2 s anyway.
    expect(done).toBe(false)
    vi.advanceTimersByTime(1_900)
    await settle()
    expect(done).toBe(false)
    vi.advanceTimersByTime(200)
    await fencing
    expect(done).toBe(true)
  })

  it('stops sending a move to new source leaders once its queue is deleted (no copy of a deleted queue)', async () => {
    const c = leading({ groups: 2 })
    c.apply({ type: 'createQueue', name: 'gone', config: { partitions: 1 } })
    const from = c.state.queue('gone')?.partitions[0]?.groupId
    const to = c.state.groups().find((g) => g.groupId !== from)?.groupId as number
    expect(c.apply({ type: 'startMove', queue: 'gone', partition: 0, toGroup: to }).ok).toBe(true)
    await c.controller.round()
    await settle()
    const [call] = c.moveCalls
    expect(call?.request).toMatchObject({ partition: 0, fromGroup: from, toGroup: to })
    // While the move is under way, a failed call may go to the next replica; once the queue
    // (and its move) is gone, not.
    expect(call?.stillWanted?.()).toBe(true)
    expect(c.apply({ type: 'deleteQueue', name: 'gone' }).ok).toBe(true)
    expect(call?.stillWanted?.()).toBe(false)
  })
})

describe('Controller leader balancing', () => {
  it('gives leaderships to nodes only once their heartbeats have been regular for 10 s', async () => {
    const c = leading()
    expect(await c.beatFor(9_000)).toEqual([])
    const transfers = await c.beatFor(2_000)
    expect(transfers).toHaveLength(4)
    expect(new Set(transfers.map((t) => t.toNodeId))).toEqual(new Set(['n2', 'n3']))
    // n3 goes quiet for 3 s (restarted, say): only n2 may be given leaderships for 10 s more.
    for (let t = 0; t < 5_000; t += 500) {
      vi.advanceTimersByTime(500)
      await c.beat('n1')
      await c.beat('n2')
      if (t >= 3_000) await c.beat('n3')
    }
    const meanwhile = await c.beat('n1')
    expect(meanwhile.every((t) => t.toNodeId === 'n2')).toBe(true)
    expect(meanwhile.length).toBeGreaterThan(0)
  })

  it('keeps the leader of a group a partition is being copied from or into', async () => {
    const c = leading()
    const route = c.state.queue('q')?.partitions[0]
    const groups = c.state.groups().map((g) => g.groupId)
    const to = groups.find((g) => g !== route?.groupId) as number
    expect(c.apply({ type: 'startMove', queue: 'q', partition: 0, toGroup: to }).ok).toBe(true)
    const transfers = await c.beatFor(11_000)
    expect(transfers.length).toBeGreaterThan(0)
    expect(transfers.map((t) => t.groupId)).not.toContain(route?.groupId)
    expect(transfers.map((t) => t.groupId)).not.toContain(to)
  })

  it("carries out an operator's TransferLeader of a group being copied from or into at once (it does not wait)", async () => {
    const c = leading()
    const from = c.state.queue('q')?.partitions[0]?.groupId as number
    const to = c.state.groups().find((g) => g.groupId !== from)?.groupId as number
    expect(c.apply({ type: 'startMove', queue: 'q', partition: 0, toGroup: to }).ok).toBe(true)
    await c.beatFor(1_000)
    await c.controller.port().transferLeader(from, 'n2')
    await c.controller.port().transferLeader(to, 'n3')
    const transfers = await c.beat('n1')
    expect(transfers).toContainEqual({ groupId: from, toNodeId: 'n2' })
    expect(transfers).toContainEqual({ groupId: to, toNodeId: 'n3' })
  })
})

describe('Controller format level', () => {
  it('leaves the node list out of the answer to a node that holds it, and sends it again once it changed', async () => {
    const c = leading()
    const first = await c.answer('n1')
    expect(first.nodes.map((n) => n.nodeId)).toEqual(['n1', 'n2', 'n3'])
    expect(first.nodesFingerprint).not.toBe('')
    const again = await c.answer('n1', false, FORMAT_LEVEL, { nodesFingerprint: first.nodesFingerprint })
    expect(again.nodes).toEqual([])
    expect(again.nodesFingerprint).toBe(first.nodesFingerprint)
    // n2 comes back at another address: every node gets the list again.
    c.state.apply({ type: 'registerNode', nodeId: 'n2', address: 'n2:2', formatLevel: FORMAT_LEVEL }, 5)
    const changed = await c.answer('n1', false, FORMAT_LEVEL, { nodesFingerprint: first.nodesFingerprint })
    expect(changed.nodes).toContainEqual({ nodeId: 'n2', address: 'n2:2' })
    expect(changed.nodesFingerprint).not.toBe(first.nodesFingerprint)
  })

  it('answers the lowest level of the nodes holding replicas, as each node last reported it', async () => {
    const c = leading({ levels: { n3: 1 } })
    // n3 runs a version without levels (it sends 0): level 1 until it is upgraded.
    await c.answer('n1')
    await c.answer('n2')
    await c.answer('n3', false, 0)
    expect(c.state.node('n3')?.formatLevel).toBeUndefined()
    expect((await c.answer('n1')).formatLevel).toBe(1)
    // Nor are the meta group's members recorded: a meta replica of that version could not read it.
    await c.controller.round()
    expect(c.state.metaMembers()).toBeUndefined()
    await c.answer('n3')
    expect((await c.answer('n1')).formatLevel).toBe(FORMAT_LEVEL)
    await c.controller.round()
    expect(c.state.metaMembers()).toEqual(['n1', 'n2', 'n3'])
  })

  it('refuses a node below the cluster level, registered or new, before it counts: the level never goes down', async () => {
    const c = leading({ extra: ['n4'] })
    for (const n of ['n1', 'n2', 'n3', 'n4']) await c.answer(n)
    expect((await c.answer('n1')).formatLevel).toBe(FORMAT_LEVEL)
    const seen = c.controller.liveness().lastHeartbeatMs('n3')
    vi.advanceTimersByTime(1_000)
    // n3 goes back to the previous version (or is pinned lower) after the level rose.
    await expect(c.answer('n3', true, FORMAT_LEVEL - 1)).rejects.toThrow(
      belowClusterLevelMessage('n3', FORMAT_LEVEL - 1, FORMAT_LEVEL),
    )
    expect(saysBelowClusterLevel(belowClusterLevelMessage('n3', 1, 2))).toBe(true)
    expect(c.state.node('n3')?.formatLevel).toBe(FORMAT_LEVEL)
    expect(c.controller.liveness().lastHeartbeatMs('n3')).toBe(seen)
    // A version without levels, and a new node of an older version, alike.
    await expect(c.answer('n3', true, 0)).rejects.toThrow(/reports format level 1, which is below/)
    await expect(c.answer('n5', false, FORMAT_LEVEL - 1)).rejects.toThrow(/is below the cluster format level/)
    expect(c.state.node('n5')).toBeUndefined()
    expect((await c.answer('n1')).formatLevel).toBe(FORMAT_LEVEL)
  })

  it('places no replica on a live node registered below the level the cluster rose to: the level never goes down', async () => {
    // n3 (holding replicas) and n4 (holding none) run the previous version; a scale plan wants
    // a 7th group.
    const old = FORMAT_LEVEL - 1
    const c = leading({ extra: ['n4'], levels: { n3: old, n4: old } })
    c.apply({ type: 'initMetaMembers', voters: NODES })
    c.apply({ type: 'scaleDataGroups', groups: 7 })
    await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 5_000, {
      level: (n) => (n === 'n3' || n === 'n4' ? old : FORMAT_LEVEL),
    })
    expect((await c.answer('n1')).formatLevel).toBe(old)
    // n3 is upgraded: every holder runs the new version, and the level rises (entries of it are
    // written from now on). n4, heard a moment ago, is still alive to the controller.
    await c.answer('n3', true, FORMAT_LEVEL)
    expect(c.state.formatLevel()).toBe(FORMAT_LEVEL)
    await c.controller.round()
    await settle()
    await c.controller.round()
    await settle()
    expect(c.state.groups()).toHaveLength(7)
    // A replica on n4 would make it a holder of level `old` again: the level would go down
    // after entries of FORMAT_LEVEL were written, which n4's replicas cannot read.
    expect(c.state.groupsOf('n4')).toEqual([])
    expect(c.state.formatLevel()).toBe(FORMAT_LEVEL)
  })
})

describe('Controller store ids', () => {
  const a = 'a'.repeat(32)
  const b = 'b'.repeat(32)

  it("records a node's store and refuses its id from another store before counting the heartbeat", async () => {
    const c = leading()
    await c.answer('n2', true, FORMAT_LEVEL, { storeId: a })
    expect(c.state.node('n2')?.storeId).toBe(a)
    // A second process under n2 (or n2 with a wiped data dir) says it leads group 1 in term 9:
    // refused, and the report is not taken as n2's.
    const groups = [{ groupId: 1, leaderId: 'n2', term: 9, commitIndex: 1, appliedIndex: 1 }]
    await expect(c.answer('n2', true, FORMAT_LEVEL, { storeId: b, groups })).rejects.toThrow(
      storeReplacedMessage('n2'),
    )
    await expect(c.answer('n2', true, FORMAT_LEVEL, { storeId: b, freshStore: true })).rejects.toThrow(
      /is registered with another data dir/,
    )
    expect(c.state.group(1)?.leaderId).toBe('n1')
    expect(c.state.node('n2')?.storeId).toBe(a)
    await c.answer('n2', true, FORMAT_LEVEL, { storeId: a, freshStore: true }) // its own: fine
    // Registered over a minute ago, before store ids, and now with a data dir made at this
    // start: it lost its data.
    vi.advanceTimersByTime(FRESH_STORE_GRACE_MS + 1)
    await expect(c.answer('n3', true, FORMAT_LEVEL, { storeId: b, freshStore: true })).rejects.toThrow(
      storeReplacedMessage('n3'),
    )
    expect(c.state.node('n3')?.storeId).toBeUndefined()
  })

  it('neither records nor checks stores below their format level', async () => {
    const c = leading({ levels: { n3: FORMAT_LEVEL_STORE_ID - 1 } })
    await c.answer('n3', false, FORMAT_LEVEL_STORE_ID - 1, { storeId: a })
    expect((await c.answer('n1')).formatLevel).toBe(FORMAT_LEVEL_STORE_ID - 1)
    await c.answer('n2', true, FORMAT_LEVEL, { storeId: b, freshStore: true })
    expect(c.state.node('n2')?.storeId).toBeUndefined()
  })
})

describe('Controller format level, a new cluster', () => {
  it('counts a founder that has not registered yet as level 1 (no meta members recorded before it did)', async () => {
    const c = leading({ unregistered: ['n3'] })
    await c.controller.round()
    expect(c.state.metaMembers()).toBeUndefined()
    expect((await c.answer('n1')).formatLevel).toBe(1)
    await c.answer('n3', false, 1) // a founder of an older version (or pinned)
    await c.controller.round()
    expect(c.state.metaMembers()).toBeUndefined()
    await c.answer('n3')
    await c.controller.round()
    expect(c.state.metaMembers()).toEqual(['n1', 'n2', 'n3'])
  })
})

describe('Controller meta membership', () => {
  it('records the founders, replaces a lost meta voter step by step, then tells the old one to leave', async () => {
    const c = leading({
      extra: ['n4'],
      metaSteps: [
        { done: false, step: 'add-learner', voters: NODES },
        { done: false, step: '', voters: NODES },
        { done: false, step: 'promote', voters: NODES },
        { done: false, step: 'remove', voters: [...NODES, 'n4'] },
      ],
    })
    await c.controller.round()
    expect(c.state.metaMembers()).toEqual(['n1', 'n2', 'n3'])
    // Every node beats for 2 s, then n3 falls silent past the replacement timeout (10 s).
    for (let t = 0; t < 13_000; t += 500) {
      vi.advanceTimersByTime(500)
      for (const n of ['n1', 'n2', 'n4', ...(t < 2_000 ? ['n3'] : [])]) await c.answer(n, n !== 'n4')
    }
    expect(c.state.metaChange()).toBeUndefined()
    await c.controller.round()
    expect(c.state.metaChange()).toMatchObject({ groupId: 0, add: 'n4', remove: 'n3', reason: 'dead' })
    // n4 is told to host an empty meta replica; everyone learns the voters' addresses.
    const toN4 = await c.answer('n4')
    expect(toN4).toMatchObject({ hostMeta: true, leaveMeta: false })
    expect(toN4.metaMembers).toEqual([
      { nodeId: 'n1', address: 'n1:1' },
      { nodeId: 'n2', address: 'n2:1' },
      { nodeId: 'n3', address: 'n3:1' },
    ])
    // One step per round; the change finishes on the fifth answer ("done").
    for (let round = 0; round < 5; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    // A dead voter: removed first (see replica-changer).
    expect(c.metaCalls).toEqual(Array.from({ length: 5 }, () => ['n4', 'n3', true]))
    expect(c.state.metaChange()).toBeUndefined()
    expect(c.state.metaMembers()).toEqual(['n1', 'n2', 'n4'])
    // n3 comes back with its old meta replica: it must drop it. n4 keeps its own.
    expect(await c.answer('n3', true)).toMatchObject({ hostMeta: false, leaveMeta: true })
    expect(await c.answer('n4', true)).toMatchObject({ hostMeta: false, leaveMeta: false })
    // A node that hosts no meta replica is told nothing.
    expect(await c.answer('n3', false)).toMatchObject({ leaveMeta: false })
  })

  it('leaves the meta group alone when no node outside it could take a lost voter', async () => {
    const c = leading()
    await c.controller.round()
    await c.beatNodes(['n1', 'n2'], 13_000)
    await c.controller.round()
    await settle()
    expect(c.state.metaChange()).toBeUndefined()
    expect(c.metaCalls).toEqual([])
  })

  it('retargets a meta change whose new node is lost before it became a voter', async () => {
    const waiting = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: NODES }))
    const c = leading({ extra: ['n4', 'n5'], metaSteps: waiting })
    await c.controller.round()
    const beat = c.beatNodes
    await beat(['n1', 'n2', 'n4', 'n5'], 13_000) // n3 silent: lost
    await c.controller.round()
    expect(c.state.metaChange()).toMatchObject({ add: 'n4', remove: 'n3' })
    await beat(['n1', 'n2', 'n5'], 13_000) // n4 silent too, never a voter (metaMembership: n1-n3)
    await settle()
    await c.controller.round()
    expect(c.state.metaChange()).toMatchObject({ add: 'n5', remove: 'n3', reason: 'dead' })
    await settle()
    expect(c.metaCalls.at(-1)).toEqual(['n5', 'n3', true])
  })

  it('gives up a meta change whose new node is lost with none to take it; the voter gone before is dropped', async () => {
    // n3 dead, replaced by n4 (removed first: the leader took n3 out), then n4 dies a learner.
    const run = async (level: number) => {
      const steps = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: ['n1', 'n2'] }))
      const c = leading({ extra: ['n4'], metaSteps: steps, levels: { n1: level } })
      const levelOf = (n: string) => (n === 'n1' ? level : FORMAT_LEVEL)
      await c.controller.round()
      await c.beatNodes(['n1', 'n2', 'n4'], 13_000, { level: levelOf }) // n3 silent: lost
      await c.controller.round()
      expect(c.state.metaChange()).toMatchObject({ add: 'n4', remove: 'n3' })
      await c.beatNodes(['n1', 'n2'], 13_000, { level: levelOf }) // n4 silent too, never a voter
      await settle()
      await c.controller.round()
      return { c, steps }
    }
    // Below format level 36 (n1's version is older) the change waits for n4.
    const old = await run(FORMAT_LEVEL_ABANDON_CHANGE - 1)
    expect(old.c.state.metaChange()).toMatchObject({ add: 'n4', remove: 'n3' })
    const { c, steps } = await run(FORMAT_LEVEL)
    expect(c.state.metaChange()).toMatchObject({ add: '', remove: '', reason: 'dead' })
    // The next step asks for nobody; done, with n3 out of the voters: the members lose it.
    steps.fill({ done: true, step: '', voters: ['n1', 'n2'] }, c.metaCalls.length)
    await settle()
    await c.controller.round()
    await settle()
    expect(c.metaCalls.at(-1)).toEqual(['', '', false])
    expect(c.state.metaChange()).toBeUndefined()
    expect(c.state.metaMembers()).toEqual(['n1', 'n2'])
  })

  it('grows the meta group back to its size once a node can take the voter a change given up had removed', async () => {
    // As above: n3 dead and removed first, n4 lost a learner, the change given up: two voters.
    const steps = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: ['n1', 'n2'] }))
    const c = leading({ extra: ['n4'], metaSteps: steps })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n4'], 13_000)
    await c.controller.round()
    await c.beatNodes(['n1', 'n2'], 13_000)
    await settle()
    await c.controller.round()
    steps.fill({ done: true, step: '', voters: ['n1', 'n2'] }, c.metaCalls.length)
    await settle()
    await c.controller.round()
    await settle()
    expect(c.state.metaMembers()).toEqual(['n1', 'n2'])
    // n5 joins: the meta group, founded with three voters and never set to fewer, gets a third
    // again (left at two, either one's failure stopped the cluster, for good).
    await c.beatNodes(['n1', 'n2', 'n5'], 6_000, { rounds: true })
    await settle()
    expect(c.metaCalls).toContainEqual(['n5', '', false])
    expect(c.state.metaMembers()).toEqual(['n1', 'n2', 'n5'])
    expect(c.state.metaVotersWanted()).toBe(3)
  })
})

describe('Controller meta group size', () => {
  it('grows the meta group to the size set, one voter at a time, and refuses below level 6', async () => {
    const c = leading({ extra: ['n4', 'n5'] })
    await c.controller.round()
    // A new meta leader changes the meta group only once it has heard from everyone (5 s).
    await c.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 5_000)
    expect(await c.controller.port().setMetaVoters(5)).toEqual({
      voters: ['n1', 'n2', 'n3'],
      votersWanted: 5,
    })
    for (let round = 0; round < 6; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    // Each change adds one voter and removes none (the fixture's steps answer done at once).
    expect(c.metaCalls).toEqual([
      ['n4', '', false],
      ['n5', '', false],
    ])
    expect(c.state.metaMembers()).toEqual(['n1', 'n2', 'n3', 'n4', 'n5'])
    // A node of an older version holding a replica (registered so before the level rose: a
    // heartbeat below the cluster's level is refused now): the size cannot be set.
    c.apply({ type: 'registerNode', nodeId: 'n2', address: 'n2:1', formatLevel: 5 })
    await expect(c.controller.port().setMetaVoters(3)).rejects.toThrow(
      "the cluster runs format level 5: the meta group's size can be set from level 6, once every node runs a version of it",
    )
    expect(c.state.metaVotersWanted()).toBe(5)
  })

  it('does not shrink the meta group before a new leader has heard from every node', async () => {
    const c = leading({ extra: ['n4'], groups: 1 })
    c.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3', 'n4'] })
    c.apply({ type: 'setMetaVoters', voters: 3 })
    // n4's first heartbeats reach the new leader 2 s after its takeover: it is no silent voter.
    await c.beatNodes(['n1', 'n2', 'n3'], 2_000, { rounds: true })
    expect(c.metaCalls).toEqual([])
    expect(c.state.metaChange()).toBeUndefined()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 3_500, { rounds: true })
    await settle()
    // The busiest voter goes (n2 and n3 tie: the last id), not n4, which holds nothing.
    expect(c.metaCalls).toEqual([['', 'n3', false]])
  })
})

describe('Controller data-group replica changes', () => {
  it('retargets a change whose new node is lost before it became a voter, as its leader answered', async () => {
    // n4 is added as a learner, then never catches up (it died).
    const steps = [
      { done: false, step: 'remove', voters: NODES },
      { done: false, step: 'add-learner', voters: ['n1', 'n2'] },
      ...Array.from({ length: 100 }, () => ({ done: false, step: '', voters: ['n1', 'n2'] })),
    ]
    const c = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: steps })
    const beat = c.beatNodes
    await c.controller.round() // leading from now
    await beat(['n1', 'n2', 'n4', 'n5'], 13_000) // n3 silent: lost
    await c.controller.round()
    const first = c.state.replicaChanges()[0]
    expect(first).toMatchObject({ add: 'n4', remove: 'n3', reason: 'dead' })
    const groupId = first?.groupId as number
    for (let round = 0; round < 3; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    // Each step names the replicas the meta state records, the dead one removed first.
    expect(c.dataCalls.at(-1)).toMatchObject({
      groupId,
      add: 'n4',
      remove: 'n3',
      removeFirst: true,
      metaTerm: 1,
    })
    expect(c.dataCalls.at(-1)?.replicas).toEqual(NODES)
    const toN4 = c.dataCallsWanted.at(-1)
    expect(toN4?.()).toBe(true)
    await beat(['n1', 'n2', 'n5'], 13_000) // n4 silent too: lost, and no voter
    await c.controller.round()
    expect(c.state.replicaChange(groupId)).toMatchObject({ add: 'n5', remove: 'n3', reason: 'dead' })
    // A step of the old change is not sent again to another replica.
    expect(toN4?.()).toBe(false)
    await settle()
    await c.controller.round()
    await settle()
    expect(c.dataCalls.at(-1)).toMatchObject({ groupId, add: 'n5', remove: 'n3', removeFirst: true })
  })

  it('retargets a change whose live learner makes no progress for the replacement timeout; progress keeps it', async () => {
    /** n3 is lost and n4 added; its learner answers `mark(i)` at the i-th wait. */
    const run = async (mark: (i: number) => { addMatch: number; addImagePages: number }) => {
      const steps = [
        { done: false, step: 'remove', voters: NODES },
        { done: false, step: 'add-learner', voters: ['n1', 'n2'] },
        ...Array.from({ length: 200 }, (_, i) => ({
          done: false,
          step: '',
          voters: ['n1', 'n2'],
          ...mark(i),
        })),
      ]
      const { log, lines } = capturedLog()
      const c = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: steps, log })
      await c.controller.round()
      await c.beatNodes(['n1', 'n2', 'n4', 'n5'], 13_000) // n3 silent: lost
      await c.controller.round()
      const groupId = c.state.replicaChanges()[0]?.groupId as number
      expect(c.state.replicaChange(groupId)).toMatchObject({ add: 'n4', remove: 'n3' })
      // n4 stays alive throughout, heartbeats and all.
      await c.beatNodes(['n1', 'n2', 'n4', 'n5'], 16_000, { rounds: true })
      await settle()
      return { c, groupId, lines }
    }
    const stuck = await run(() => ({ addMatch: 0, addImagePages: 3 }))
    expect(stuck.c.state.replicaChange(stuck.groupId)).toMatchObject({ add: 'n5', remove: 'n3' })
    expect(
      stuck.lines.some((l) => /the replica being added on n4 made no progress for 10000 ms/.test(l.msg)),
    ).toBe(true)
    // Its image pages grow (a large image being fetched, the match still 0): it keeps the change.
    const fetching = await run((i) => ({ addMatch: 0, addImagePages: i }))
    expect(fetching.c.state.replicaChange(fetching.groupId)).toMatchObject({ add: 'n4', remove: 'n3' })
    // A leader of an earlier version says nothing of its learner: nothing is found stalled.
    const older = await run(() => ({}) as { addMatch: number; addImagePages: number })
    expect(older.c.state.replicaChange(older.groupId)).toMatchObject({ add: 'n4', remove: 'n3' })
  })

  it("logs each step and the change's end as JSON lines of the node's log, not as plain text on stdout", async () => {
    const { log, lines } = capturedLog()
    const plain = vi.spyOn(console, 'log').mockImplementation(() => {})
    try {
      const steps = [
        { done: false, step: 'remove', voters: NODES },
        { done: true, step: 'add', voters: ['n1', 'n2', 'n4'] },
      ]
      const c = leading({ extra: ['n4'], groups: 1, dataSteps: steps, log })
      await c.controller.round()
      await c.beatNodes(['n1', 'n2', 'n4'], 13_000) // n3 silent: lost
      for (let round = 0; round < 3; round++) {
        await c.controller.round()
        await settle()
      }
      expect(plain).not.toHaveBeenCalled()
    } finally {
      plain.mockRestore()
    }
    expect(lines.find((e) => /group 1: remove \(n3 → n4\)/.test(e.msg))).toMatchObject({
      level: 'info',
      node: 'n1',
      group: 1,
    })
    expect(lines.find((e) => /group 1 replaced replica n3 by n4/.test(e.msg))).toMatchObject({ group: 1 })
  })

  it("steps the change a new meta leader's committed state records, not one its applied state has not seen finish", async () => {
    const c = leading({ extra: ['n4', 'n5'], groups: 1 })
    const groupId = c.state.groups()[0]?.groupId as number
    c.apply({ type: 'initMetaMembers', voters: NODES }) // (else the round proposes it first)
    c.apply({ type: 'startReplicaChange', groupId, add: 'n4', remove: 'n3', reason: 'balance' })
    // The predecessor finished that change and started the next; this leader has not applied it.
    c.committed(
      { type: 'finishReplicaChange', groupId },
      { type: 'startReplicaChange', groupId, add: 'n5', remove: 'n1', reason: 'balance' },
    )
    await c.controller.round()
    await settle()
    // Stepping the finished change again would have the group's leader remove n5, the next
    // change's learner, as a stale member.
    expect(c.dataCalls[0]).toMatchObject({ groupId, add: 'n5', remove: 'n1' })
    expect(c.dataCalls.some((call) => call.add === 'n4')).toBe(false)
  })

  it('takes the barrier of the term a round runs in, not of the one it read before waiting its turn', async () => {
    let fail = (_error: Error) => {}
    const failing = new Promise<void>((_resolve, reject) => {
      fail = reject
    })
    const waiting = Array.from({ length: 10 }, () => ({ done: false, step: '', voters: NODES }))
    const c = leading({
      extra: ['n4', 'n5'],
      groups: 1,
      dataSteps: waiting,
      beforePropose: (command) => (command.type === 'scaleDataGroups' ? failing : Promise.resolve()),
    })
    const groupId = c.state.groups()[0]?.groupId as number
    c.apply({ type: 'initMetaMembers', voters: NODES })
    c.apply({ type: 'startReplicaChange', groupId, add: 'n4', remove: 'n3', reason: 'balance' })
    await c.controller.round() // caught up in term 1
    await settle()
    const before = c.dataCalls.length
    // A round waits its turn behind an operator's scale; meanwhile this node is elected again
    // (another leader finished the change and started the next), and the scale's entry is lost.
    const scaling = c.controller
      .port()
      .scaleDataGroups(1)
      .catch(() => undefined)
    const round = c.controller.round()
    c.elect()
    c.committed(
      { type: 'finishReplicaChange', groupId },
      { type: 'startReplicaChange', groupId, add: 'n5', remove: 'n1', reason: 'balance' },
    )
    fail(new Error('the entry was overwritten by a new leader; retry'))
    await scaling
    await round
    await settle()
    // Stepping the finished change in term 2 would have the group's leader remove n5.
    expect(c.dataCalls.slice(before).some((call) => call.add === 'n4')).toBe(false)
    expect(c.dataCalls.at(-1)).toMatchObject({ groupId, add: 'n5', remove: 'n1', metaTerm: 2 })
  })

  it('finishes only the change it stepped: a late answer does not finish the one a later leader started', async () => {
    let answer = () => {}
    const late = new Promise<void>((r) => {
      answer = r
    })
    const c = leading({ extra: ['n4', 'n5'], groups: 1, beforeDataAnswer: () => late })
    const groupId = c.state.groups()[0]?.groupId as number
    c.apply({ type: 'initMetaMembers', voters: NODES })
    c.apply({ type: 'startReplicaChange', groupId, add: 'n4', remove: 'n3', reason: 'balance' })
    await c.controller.round()
    await settle()
    expect(c.dataCalls).toHaveLength(1) // its answer (done) is late
    // Meanwhile another meta leader finished that change and started the next of the group;
    // this node leads again, and the answer arrives.
    c.apply({ type: 'finishReplicaChange', groupId })
    c.apply({ type: 'startReplicaChange', groupId, add: 'n5', remove: 'n1', reason: 'balance' })
    c.elect()
    answer()
    await settle()
    // Finished, n5 would count as a replica it is not, and n1, still a voter, would delete its own.
    expect(c.state.replicaChange(groupId)).toMatchObject({ add: 'n5', remove: 'n1' })
    expect(c.state.group(groupId)?.replicas).toEqual(['n1', 'n2', 'n4'])
  })

  it("proposes an operator's scale in turn with the rounds: a round's actions never land after it and undo it", async () => {
    // The round reads plan P1 (4 groups, nothing left to do) and proposes its finishScale, which
    // commits slowly; meanwhile the operator asks for 2 groups.
    let release = () => {}
    const slow = new Promise<void>((r) => {
      release = r
    })
    const c = leading({
      groups: 4,
      beforePropose: (command) => (command.type === 'finishScale' ? slow : Promise.resolve()),
    })
    c.apply({ type: 'initMetaMembers', voters: NODES })
    c.apply({ type: 'scaleDataGroups', groups: 4 })
    await c.beatNodes(NODES, 500)
    const round = c.controller.round()
    await vi.advanceTimersByTimeAsync(0)
    const scaling = c.controller.port().scaleDataGroups(2)
    await vi.advanceTimersByTimeAsync(0)
    release()
    await round
    await scaling
    // The finishScale ended P1, before P2 was proposed: P2 runs, to 2 groups.
    expect(c.state.scale).toMatchObject({ targetGroups: 2, running: true })
  })

  it("proposes a round's actions only in the term it decided them: none lands after another leader's plan", async () => {
    // Plan P1 (3 -> 2 groups) has emptied group 3: the round records the founders, then
    // removes group 3. The first proposal commits slowly.
    let release = () => {}
    const slow = new Promise<void>((r) => {
      release = r
    })
    const c = leading({
      groups: 3,
      beforePropose: (command) => (command.type === 'initMetaMembers' ? slow : Promise.resolve()),
    })
    c.apply({ type: 'scaleDataGroups', groups: 2 })
    expect(c.state.scale?.removing).toEqual([3])
    const moved = c.state.queue('q')?.partitions.find((p) => p.groupId === 3)?.partition as number
    const move = c.apply({ type: 'startMove', queue: 'q', partition: moved, toGroup: 1 })
    if (!move.ok) throw new Error(move.message)
    const moveId = (move.value as { moveId: number }).moveId
    c.apply({ type: 'completeMove', moveId })
    c.apply({ type: 'finishMove', moveId })
    const round = c.controller.round()
    await vi.advanceTimersByTimeAsync(0)
    // Meanwhile another node led, and the operator asked it for 3 groups (plan P2 keeps group
    // 3); then this node leads again, and the slow proposal commits.
    c.elect()
    c.apply({ type: 'scaleDataGroups', groups: 3 })
    release()
    await round
    // Removed, group 3 would be made again as a new group, and partitions moved onto it.
    expect(c.state.group(3)).toBeDefined()
    expect(c.state.scale).toMatchObject({ targetGroups: 3, removing: [], running: true })
  })

  it('creates a group with as many replicas as live nodes allow, from the founders count up to the factor', async () => {
    // Founded by one node (replicas 1), a factor of 3.
    const c = leading({ extra: ['n4', 'n5'], groups: 1, replicas: 1, replicationFactor: 3 })
    c.apply({ type: 'initMetaMembers', voters: NODES })
    c.apply({ type: 'scaleDataGroups', groups: 3 })
    const created = () => c.state.groups().slice(1)
    await c.beatNodes(['n1'], 500)
    await c.controller.round() // n1 alone heard of: a group of one
    expect(created().map((g) => g.replicas.length)).toEqual([1])
    await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 1_000)
    await c.controller.round()
    expect(created().map((g) => g.replicas.length)).toEqual([1, 3])
  })

  it("records its own replication factor as the cluster's, then goes by the recorded one: groups grow and shrink to it", async () => {
    const { log, lines } = capturedLog()
    const c = leading({ extra: ['n4', 'n5'], groups: 2, replicationFactor: 3, log })
    c.apply({ type: 'initMetaMembers', voters: NODES })
    await c.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 5_000)
    await c.controller.round()
    expect(c.state.replicationFactor()).toBe(3)
    expect(await c.controller.port().setReplicationFactor(5)).toBe(3)
    const settleRounds = async () => {
      for (let round = 0; round < 12; round++) {
        await c.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 500)
        await settle()
        await c.controller.round()
      }
      await settle()
    }
    await settleRounds()
    expect(c.state.groups().map((g) => g.replicas.length)).toEqual([5, 5])
    // Each grow adds one replica and removes none; the fixture's steps answer done at once.
    expect(c.dataCalls.map((r) => [r.add, r.remove])).toContainEqual(['n4', ''])
    expect(await c.controller.port().setReplicationFactor(3)).toBe(5)
    await settleRounds()
    expect(c.state.groups().map((g) => g.replicas.length)).toEqual([3, 3])
    const shrinks = c.dataCalls.filter((r) => r.add === '')
    expect(shrinks).toHaveLength(4)
    // The leader (n1) keeps its replica.
    for (const g of c.state.groups()) expect(g.replicas).toContain('n1')
    // Each says once that its own setting is not the cluster's: this one (3) once set to 5;
    // another meta leader, started with a factor of 5, goes by the cluster's 3.
    const other = leading({ extra: ['n4', 'n5'], groups: 1, replicationFactor: 5, log })
    other.apply({ type: 'setReplicationFactor', factor: 3 })
    await other.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 5_000)
    await other.controller.round()
    await other.controller.round()
    await settle()
    expect(other.state.replicaChanges()).toEqual([])
    expect(lines.map((l) => l.msg).filter((m) => m.includes('is not used'))).toEqual([
      'the cluster keeps 5 replicas per data group (`mq cluster replication` sets it); this node\'s "replicationFactor" 3 (config file) is not used',
      'the cluster keeps 3 replicas per data group (`mq cluster replication` sets it); this node\'s "replicationFactor" 5 (config file) is not used',
    ])
  })

  it("records its own data group count as the cluster's; a meta leader set to more goes by the recorded one", async () => {
    const { log, lines } = capturedLog()
    const c = leading({ groups: 2, log })
    await c.beatNodes(['n1', 'n2', 'n3'], 5_000)
    await c.controller.round()
    expect(c.state.dataGroups()).toBe(2)
    // Another meta leader whose config file says 4 would create two more groups by its own.
    const other = leading({ groups: 2, dataGroups: 4, log })
    other.apply({ type: 'recordDataGroups', count: 2 })
    await other.beatNodes(['n1', 'n2', 'n3'], 5_000)
    await other.controller.round()
    await other.controller.round()
    await settle()
    expect(other.state.groups()).toHaveLength(2)
    expect(lines.map((l) => l.msg).filter((m) => m.includes('is not used'))).toEqual([
      'the cluster wants 2 data groups until a scale plan (`mq group scale`) sets the count; this node\'s "dataGroups" 4 (config file) is not used',
    ])
    // Below level 35 a meta leader records nothing and goes by its own count.
    const older = leading({ groups: 2, dataGroups: 3, levels: { n2: 34 } })
    await older.beatNodes(['n1', 'n2', 'n3'], 5_000, { level: (n) => (n === 'n2' ? 34 : FORMAT_LEVEL) })
    await older.controller.round()
    expect(older.state.dataGroups()).toBeUndefined()
    expect(older.state.groups()).toHaveLength(3)
  })

  it("finishes a shrink with the voter the group's leader removed instead, by its answer", async () => {
    // Group 1's leader took n2 (away) instead of n3: its done answer's voters lack n2.
    const c = leading({ groups: 1, dataSteps: [{ done: true, step: '', voters: ['n1', 'n3'] }] })
    c.apply({ type: 'startReplicaChange', groupId: 1, add: '', remove: 'n3', reason: 'shrink' })
    await c.controller.round()
    await settle()
    expect(c.dataCalls.map((r) => [r.add, r.remove])).toEqual([['', 'n3']])
    expect(c.state.replicaChanges()).toEqual([])
    expect(c.state.group(1)?.replicas).toEqual(['n1', 'n3'])
  })

  it("tells a shrink's group leader which replicas it has not heard from lately, once it heard from every node", async () => {
    const waiting = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: NODES }))
    const c = leading({ groups: 1, dataSteps: waiting })
    c.apply({ type: 'startReplicaChange', groupId: 1, add: '', remove: 'n3', reason: 'shrink' })
    await c.controller.round()
    await settle()
    expect(c.dataCalls.at(-1)?.away).toEqual([])
    // n2 silent past a new leader's first hearing (5 s).
    await c.beatNodes(['n1', 'n3'], 6_000)
    await c.controller.round()
    await settle()
    expect(c.dataCalls.at(-1)).toMatchObject({ add: '', remove: 'n3', away: ['n2'] })
  })

  it('refuses a replication factor below level 34 and records none, and one out of 1 to 7', async () => {
    const c = leading({ levels: { n2: 33 } })
    await c.beatNodes(['n1', 'n2', 'n3'], 5_000, { level: (n) => (n === 'n2' ? 33 : FORMAT_LEVEL) })
    await c.controller.round()
    expect(c.state.replicationFactor()).toBeUndefined()
    await expect(c.controller.port().setReplicationFactor(5)).rejects.toThrow(
      'the cluster runs format level 33: the replication factor can be set from level 34, once every node runs a version of it (until then each meta leader goes by its own "replicationFactor", config file)',
    )
    const d = leading()
    await expect(d.controller.port().setReplicationFactor(8)).rejects.toThrow(
      'the replication factor must be an integer from 1 to 7, not 8',
    )
  })

  it('gives up a change whose new node was lost with no other node to take it: the group keeps its replicas', async () => {
    // A balance onto n4 (n3 to leave); n4 died a learner, and only n1..n3 are left.
    const run = async (level: number) => {
      const lines: string[] = []
      const log = {
        info: () => {},
        warn: (_fields: unknown, line: string) => lines.push(line),
      } as unknown as Logger
      const waiting = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: NODES }))
      const c = leading({ extra: ['n4'], groups: 1, dataSteps: waiting, levels: { n1: level }, log })
      const levelOf = (n: string) => (n === 'n1' ? level : FORMAT_LEVEL)
      const groupId = c.state.groups()[0]?.groupId as number
      c.apply({ type: 'startReplicaChange', groupId, add: 'n4', remove: 'n3', reason: 'balance' })
      await c.controller.round() // leading from now
      await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 6_000, { level: levelOf })
      await c.controller.round()
      await settle()
      await c.beatNodes(['n1', 'n2', 'n3'], 13_000, { level: levelOf }) // n4 silent: lost
      await c.controller.round()
      await settle()
      return { c, groupId, lines, waiting }
    }
    const { c, groupId, lines, waiting } = await run(FORMAT_LEVEL)
    expect(c.state.replicaChange(groupId)).toMatchObject({ add: '', remove: '', reason: 'balance' })
    expect(lines).toContainEqual(expect.stringContaining(`group ${groupId}: gave up adding a replica on n4`))
    // Its next step asks the group's leader for nobody: once done, the replicas are unchanged.
    waiting.length = c.dataCalls.length // answered done from now on
    await c.controller.round()
    await settle()
    expect(c.dataCalls.at(-1)).toMatchObject({ groupId, add: '', remove: '', removeFirst: false })
    expect(c.state.replicaChange(groupId)).toBeUndefined()
    expect(c.state.group(groupId)?.replicas).toEqual(NODES)
    // Below format level 36 (n1's version is older) the change waits for n4.
    const old = await run(FORMAT_LEVEL_ABANDON_CHANGE - 1)
    expect(old.c.state.replicaChange(old.groupId)).toMatchObject({ add: 'n4', remove: 'n3' })
  })

  it('does not give up a change onto a node being drained that a new leader has not heard yet', async () => {
    // A balance onto n4 (n3 to leave), n4 drained meanwhile and alive: it finishes the change
    // (no other node can take it). A new meta leader has not heard n4 in its first seconds:
    // that is no sign n4 is gone, and the change given up then left n4's copy for nothing.
    const waiting = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: NODES }))
    const c = leading({ extra: ['n4'], groups: 1, dataSteps: waiting })
    const groupId = c.state.groups()[0]?.groupId as number
    c.apply({ type: 'startReplicaChange', groupId, add: 'n4', remove: 'n3', reason: 'balance' })
    c.apply({ type: 'drainNode', nodeId: 'n4' })
    await c.controller.round() // leading from now: the step answers n4 is no voter
    await settle()
    await c.beatNodes(['n1', 'n2', 'n3'], 3_000, { rounds: true }) // n4's beats not here yet
    await settle()
    expect(c.state.replicaChange(groupId)).toMatchObject({ add: 'n4', remove: 'n3' })
    // Heard from every node, n4 still silent (SIGKILLed, say): given up at once (no timeout).
    await c.beatNodes(['n1', 'n2', 'n3'], 3_000, { rounds: true })
    await settle()
    expect(c.state.replicaChange(groupId)).toMatchObject({ add: '', remove: '' })
  })

  it('does not retarget a change whose new node its leader named a voter, or never answered about', async () => {
    // The promotion's answer arrives: n4 counts as a voter from then on.
    const steps = [
      { done: false, step: 'remove', voters: NODES },
      { done: false, step: 'add-learner', voters: ['n1', 'n2'] },
      ...Array.from({ length: 100 }, () => ({ done: false, step: 'promote', voters: ['n1', 'n2'] })),
    ]
    const c = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: steps })
    const beat = c.beatNodes
    await c.controller.round() // leading from now
    await beat(['n1', 'n2', 'n4', 'n5'], 13_000)
    await c.controller.round()
    const groupId = c.state.replicaChanges()[0]?.groupId as number
    for (let round = 0; round < 3; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    await beat(['n1', 'n2', 'n5'], 13_000)
    await c.controller.round()
    await settle()
    expect(c.state.replicaChange(groupId)).toMatchObject({ add: 'n4' })
    // A cluster below format level 4 never retargets (its meta replicas may not read it): n1
    // runs a version of level 3.
    const waiting = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: ['n1', 'n2'] }))
    const old = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: waiting, levels: { n1: 3 } })
    const oldBeat = (nodes: string[], ms: number) =>
      old.beatNodes(nodes, ms, { level: (n) => (n === 'n1' ? 3 : FORMAT_LEVEL) })
    await old.controller.round()
    await oldBeat(['n1', 'n2', 'n4', 'n5'], 13_000)
    await old.controller.round()
    await settle()
    await old.controller.round()
    await settle()
    expect(old.dataCalls.length).toBeGreaterThan(0)
    await oldBeat(['n1', 'n2', 'n5'], 13_000)
    await old.controller.round()
    await settle()
    expect(old.state.replicaChanges()[0]).toMatchObject({ add: 'n4' })
  })
})

describe('Controller: creating data groups', () => {
  it.each([
    [FORMAT_LEVEL, 2],
    [FORMAT_LEVEL_CREATE_GROUP_ID - 1, 3],
  ])(
    'at format level %i, a create whose proposal timed out (outcome unknown) and committed late leaves %i groups where 2 are wanted',
    async (level, groups) => {
      let late: ((command: MetaCommand) => void) | undefined
      let first = true
      const c = leading({
        groups: 1,
        levels: { n1: level, n2: level, n3: level },
        beforePropose: async (command) => {
          if (command.type !== 'createGroup' || !first) return
          first = false
          late?.(command) // in the leader's log: it commits after its proposal timed out
          throw new Error('not applied within 100 ticks; outcome unknown')
        },
      })
      late = (command) => c.committed(command)
      c.apply({ type: 'initMetaMembers', voters: NODES })
      c.apply({ type: 'scaleDataGroups', groups: 2 })
      for (let i = 0; i < 3; i++) {
        await c.beatNodes(NODES, 500, { level: () => level })
        await c.controller.round()
      }
      // Below the level a create names no id, and the one decided again made a third group.
      expect(c.state.groups()).toHaveLength(groups)
    },
  )
})

describe('Controller: draining a node', () => {
  it('refuses an unknown node before proposing anything', async () => {
    const proposed: MetaCommand[] = []
    const c = leading({
      refuse: (command) => {
        proposed.push(command)
        return false
      },
    })
    await expect(c.controller.port().drainNode('n9')).rejects.toThrow(/node n9 is not registered/)
    expect(proposed).toEqual([])
    expect(await c.controller.port().drainNode('n3')).toBeGreaterThan(0)
    expect(proposed[0]).toMatchObject({ type: 'drainNode', nodeId: 'n3' })
  })

  it('refuses what is no node id as such, quoted, before proposing anything (found by the request fuzz)', async () => {
    const proposed: MetaCommand[] = []
    const c = leading({
      refuse: (command) => {
        proposed.push(command)
        return false
      },
    })
    const port = c.controller.port()
    // Said "node  is not registered" and "node  n1 is not registered" (as if n1 were not).
    await expect(port.drainNode('')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'the request names no node (node_id)',
    })
    await expect(port.undrainNode(' n1')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: `node_id " n1" is no node id: node ids are 1-64 letters, digits, '_' or '-', starting with a letter or digit`,
    })
    // Control characters are escaped, not sent on to the caller's terminal.
    await expect(port.removeNode('n1\u001b[2J\n')).rejects.toThrow(
      /^node_id "n1\\u001b\[2J\\n" is no node id: /,
    )
    await expect(port.transferLeader(1, 'n1 ')).rejects.toThrow(/^to_node_id "n1 " is no node id: /)
    await expect(port.transferLeader(0, '')).rejects.toThrow('the request names no node (to_node_id)')
    expect(proposed).toEqual([])
    // A node id that no node has is still told as such.
    await expect(port.drainNode('n9')).rejects.toThrow('node n9 is not registered')
  })

  it('undoes a drain: the node takes replicas again; refused for an unknown node and below level 33', async () => {
    const c = leading()
    await expect(c.controller.port().undrainNode('n9')).rejects.toThrow(/node n9 is not registered/)
    await c.controller.port().drainNode('n3')
    expect(c.state.draining('n3')).toBe(true)
    expect(await c.controller.port().undrainNode('n3')).toBe(true)
    expect(c.state.draining('n3')).toBe(false)
    expect(await c.controller.port().undrainNode('n3')).toBe(false)
    // A node of an earlier version holding a replica: its meta replica would not know the command.
    c.apply({ type: 'drainNode', nodeId: 'n3' })
    c.apply({ type: 'registerNode', nodeId: 'n2', address: 'n2:1', formatLevel: 32 })
    await expect(c.controller.port().undrainNode('n3')).rejects.toThrow(
      'the cluster runs format level 32: a drain can be undone from level 33, once every node runs a version of it',
    )
    expect(c.state.draining('n3')).toBe(true)
  })

  it("is proposed in turn with the rounds: never answered drained while a round's placement on it lands after", async () => {
    // A round places a new group on n4 (it holds the fewest replicas); its createGroup commits
    // slowly, and meanwhile the operator drains n4.
    let release = () => {}
    const slow = new Promise<void>((r) => {
      release = r
    })
    const c = leading({
      extra: ['n4'],
      groups: 1,
      beforePropose: (command) => (command.type === 'createGroup' ? slow : Promise.resolve()),
    })
    c.apply({ type: 'initMetaMembers', voters: NODES })
    c.apply({ type: 'scaleDataGroups', groups: 2 })
    await c.beatNodes([...NODES, 'n4'], 500)
    const round = c.controller.round()
    await vi.advanceTimersByTimeAsync(0)
    const draining = c.controller.port().drainNode('n4')
    await vi.advanceTimersByTimeAsync(0)
    release()
    await round
    const left = await draining
    expect(c.state.groupsOf('n4').map((g) => g.replicas)).toEqual([['n4', 'n1', 'n2']])
    // Answered 0 before ("node n4 is drained: it holds no replica"), and the operator stopped it.
    expect(left).toBe(1)
  })

  it('counts a meta vote the meta state does not record yet (below format level 3)', async () => {
    // A cluster in a rolling upgrade from a version before level 3: the meta state never
    // records the members, but n3 is a voter of the meta group's Raft configuration, and its
    // vote does not move. Answered 0 ("drained, it can be shut down"), stopping it leaves the
    // meta group a voter short, and a second such drain without a majority.
    const c = leading({ groups: 0, levels: { n1: 2, n2: 2, n3: 2 } })
    await c.beatNodes(NODES, 1_000, { level: () => 2 })
    expect(c.state.metaMembers()).toBeUndefined()
    expect(c.state.groupsOf('n3')).toEqual([])
    expect(await c.controller.port().drainNode('n3')).toBe(1)
  })
})

describe('Controller: removing a replica first', () => {
  const waiting = Array.from({ length: 100 }, () => ({ done: false, step: '', voters: NODES }))

  it('removes a replica first whenever its node is not alive, whatever the reason (a dead node drained)', async () => {
    const c = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: waiting })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 2_000)
    await c.beatNodes(['n1', 'n2', 'n4', 'n5'], 6_000) // n3 dead (5 s), not lost (10 s)
    expect(await c.controller.port().drainNode('n3')).toBe(2)
    for (let round = 0; round < 2; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    expect(c.state.replicaChanges()[0]).toMatchObject({ remove: 'n3', reason: 'drain' })
    expect(c.dataCalls.at(-1)).toMatchObject({ remove: 'n3', removeFirst: true })
    expect(c.metaCalls[0]).toEqual(['n4', 'n3', true])
  })

  it('adds first while the node is alive, and removes first from the step after it died', async () => {
    const c = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: waiting })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 6_000)
    await c.controller.port().drainNode('n3')
    for (let round = 0; round < 2; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    expect(c.dataCalls.at(-1)).toMatchObject({ remove: 'n3', removeFirst: false })
    await c.beatNodes(['n1', 'n2', 'n4', 'n5'], 6_000)
    await c.controller.round()
    await settle()
    expect(c.dataCalls.at(-1)).toMatchObject({ remove: 'n3', removeFirst: true })
  })

  it('adds first when the replicas left would not be a majority of live nodes', async () => {
    // n3 lost; n2 silent for 6 s: removing n3 first would leave {n1, n2}, which needs n2.
    const c = leading({ extra: ['n4', 'n5'], groups: 1, dataSteps: waiting })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4', 'n5'], 2_000)
    await c.beatNodes(['n1', 'n2', 'n4', 'n5'], 7_000)
    await c.beatNodes(['n1', 'n4', 'n5'], 6_000)
    await c.controller.round()
    for (let round = 0; round < 2; round++) {
      await settle()
      await c.controller.round()
    }
    await settle()
    expect(c.state.replicaChanges()[0]).toMatchObject({ remove: 'n3', reason: 'dead' })
    expect(c.dataCalls.at(-1)).toMatchObject({ remove: 'n3', removeFirst: false })
  })
})

describe('Controller clock', () => {
  it('times liveness on the clock the host gives: a wall clock stepped an hour ahead kills no node', async () => {
    // mq-server gives a steady clock (steady-clock.ts): the fake timers advance it, a step of
    // the wall clock does not.
    let steadyMs = 1_000_000
    const c = leading({ nowMs: () => steadyMs })
    await c.controller.round()
    for (let t = 0; t < 6_000; t += 500) {
      vi.advanceTimersByTime(500)
      steadyMs += 500
      for (const n of ['n1', 'n2', 'n3']) await c.answer(n, true)
      await c.controller.round()
    }
    expect(c.controller.liveness().alive('n2')).toBe(true)
    vi.setSystemTime(Date.now() + 3_600_000) // NTP steps the meta leader's wall clock 1 h ahead
    await c.controller.round()
    expect(c.controller.liveness().alive('n2')).toBe(true)
    expect(c.state.node('n2')?.silentSinceMs).toBeUndefined()
  })
})

describe('Controller soft state', () => {
  it('forgets liveness, its takeover time and leader overrides when the meta term changes', async () => {
    const c = leading({ extra: ['n4'] })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 6_000)
    await c.controller.port().transferLeader(1, 'n2')
    expect(await c.beat('n1')).toContainEqual({ groupId: 1, toNodeId: 'n2' })
    // The meta group's leadership goes only to one of its voters: a typo is bad input, not
    // a transfer that fails (retriably) in raft-core.
    await expect(c.controller.port().transferLeader(0, 'typo')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'node typo is not registered',
    })
    await expect(c.controller.port().transferLeader(1, 'typo')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'node typo is not registered',
    })
    // A registered node that holds no replica of the group: a bad value, said as such.
    await expect(c.controller.port().transferLeader(0, 'n4')).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: 'node n4 is not a voter of the meta group (n1, n2, n3)',
    })
    await expect(c.controller.port().transferLeader(1, 'n4')).rejects.toMatchObject({
      message: /^node n4 is not a replica of data group 1 /,
    })
    // A node being drained is to lead nothing: the drain moves its leaderships away, and a
    // transfer to it was accepted and never carried out.
    c.apply({ type: 'drainNode', nodeId: 'n3' })
    for (const group of [0, 1]) {
      await expect(c.controller.port().transferLeader(group, 'n3')).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: 'node n3 is being drained: it is to lead nothing (mq node undrain n3 first)',
      })
    }
    c.apply({ type: 'undrainNode', nodeId: 'n3' })
    await c.controller.port().transferLeader(0, 'n2')
    await c.beatNodes(['n1', 'n2', 'n3'], 5_500) // n4 stops
    expect(c.controller.liveness().alive('n2')).toBe(true)
    // Re-elected in a new term (another leader may have led in between): what it knew is stale.
    c.elect()
    await c.controller.round()
    expect(c.controller.liveness().alive('n2')).toBe(false)
    await expect(c.controller.port().removeNode('n4')).rejects.toThrow(
      /^node n4 may be alive \(this meta leader took over too recently/,
    )
    expect(await c.beat('n1')).toEqual([])
  })
})

describe('Controller silent nodes', () => {
  it('records a silent node, so a new meta leader goes on counting its replacement timeout', async () => {
    const c = leading({ extra: ['n4'] })
    await c.controller.round()
    const beat = (nodes: string[], ms: number) => c.beatNodes(nodes, ms, { rounds: true })
    await beat(['n1', 'n2', 'n3', 'n4'], 2_000)
    const lastHeard = Date.now()
    await beat(['n1', 'n2', 'n4'], 6_000) // n3 silent: dead after 5 s, recorded
    expect(c.state.node('n3')?.silentSinceMs).toBe(lastHeard)
    expect(c.state.node('n1')?.silentSinceMs).toBeUndefined()
    // Another meta leader takes over 6 s into the silence: n3 is lost 5 s later (11.5 s in all:
    // a new leader first hears who is alive for 5 s), not 10 s after the takeover.
    c.takeOver()
    await beat(['n1', 'n2', 'n4'], 4_500)
    expect(c.metaCalls).toEqual([])
    await beat(['n1', 'n2', 'n4'], 1_000)
    expect(c.metaCalls[0]).toEqual(['n4', 'n3', true])
    // n3 heard again: the mark goes.
    await c.answer('n3', true)
    expect(c.state.node('n3')?.silentSinceMs).toBeUndefined()
    // A node never heard by a new leader counts from its takeover, and is recorded from there.
    c.takeOver()
    const takeover = Date.now() + 500 // its first round, after the first beats
    await beat(['n1', 'n2', 'n3'], 3_000)
    expect(c.state.node('n4')?.silentSinceMs).toBeUndefined()
    await beat(['n1', 'n2', 'n3'], 2_500)
    expect(c.state.node('n4')?.silentSinceMs).toBe(takeover)
  })

  it('goes on with the rest of a round when the meta state refuses one of its actions', async () => {
    // Every silence mark is refused: the data groups' replacements of n3 come after it in the round.
    const c = leading({ extra: ['n4'], groups: 1, refuse: (command) => command.type === 'markSilent' })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 2_000, { rounds: true })
    await c.beatNodes(['n1', 'n2', 'n4'], 13_000, { rounds: true }) // n3 lost
    expect(c.state.node('n3')?.silentSinceMs).toBeUndefined()
    expect(c.state.group(1)?.replicas).toEqual(['n1', 'n2', 'n4'])
  })

  it('does not replace a node back from a long recorded silence that a new leader has not heard yet', async () => {
    const c = leading({ extra: ['n4'] })
    c.apply({ type: 'markSilent', nodeId: 'n3', sinceMs: Date.now() - 60_000 })
    const beat = (nodes: string[], ms: number) => c.beatNodes(nodes, ms, { rounds: true })
    // n3's first heartbeats reach the new leader a few seconds after its takeover.
    await c.controller.round()
    await beat(['n1', 'n2', 'n4'], 3_000)
    await beat(['n1', 'n2', 'n3', 'n4'], 3_000)
    expect(c.state.node('n3')?.silentSinceMs).toBeUndefined()
    expect(c.metaCalls).toEqual([])
    expect(c.state.replicaChanges()).toEqual([])
  })

  it('records no silence below format level 5 (meta replicas of older versions would reject it)', async () => {
    const c = leading({ extra: ['n4'], levels: { n1: 4 } })
    await c.controller.round()
    await c.beatNodes(['n1', 'n2'], 8_000, { rounds: true, level: (n) => (n === 'n1' ? 4 : FORMAT_LEVEL) })
    expect(c.state.nodes().map((n) => n.silentSinceMs)).toEqual([undefined, undefined, undefined, undefined])
  })
})

describe('Controller node removal', () => {
  it('removes a node that holds nothing once it has been silent for 5 s, and refuses below level 11', async () => {
    const c = leading({ extra: ['n4'] })
    const remove = (id: string) => c.controller.port().removeNode(id)
    // Before its first round this leader cannot tell whether a node it never heard is down.
    await expect(remove('n4')).rejects.toThrow(
      'node n4 may be alive (this meta leader took over too recently to tell): stop its process, then remove it once it has been silent for 5 s',
    )
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3', 'n4'], 2_000)
    await expect(remove('n4')).rejects.toThrow(
      /^node n4 is alive \(heard from 0\.0 s ago\): stop its process/,
    )
    await expect(remove('n9')).rejects.toThrow('node n9 is not registered')
    // A meta voter (of the Raft configuration) holds a vote, alive or not.
    await expect(remove('n3')).rejects.toThrow(
      'node n3 still holds a meta group vote: drain it first (mq node drain n3) and wait until it holds nothing',
    )
    // n4 stops; 5 s later it could be removed (and a meta leader records it as silent).
    const stoppedAt = Date.now()
    await c.beatNodes(['n1', 'n2', 'n3'], 4_500)
    await expect(remove('n4')).rejects.toThrow(/^node n4 is alive \(heard from 4\.5 s ago\)/)
    await c.beatNodes(['n1', 'n2', 'n3'], 1_000)
    c.apply({ type: 'markSilent', nodeId: 'n4', sinceMs: stoppedAt })
    // A new meta leader cannot tell yet, whatever silence was recorded: n4 might have come
    // back and not reached it yet.
    c.takeOver()
    await c.controller.round()
    await c.beatNodes(['n1', 'n2', 'n3'], 4_500)
    await expect(remove('n4')).rejects.toThrow(
      /^node n4 may be alive \(this meta leader took over too recently/,
    )
    await c.beatNodes(['n1', 'n2', 'n3'], 500)
    await remove('n4')
    expect(c.state.node('n4')).toBeUndefined()
    expect(c.controller.liveness().alive('n4')).toBe(false)
    // Started again, its heartbeat is refused, changing nothing: it stops on that answer.
    const before = c.state.snapshot()
    await expect(c.answer('n4')).rejects.toThrow(/node n4 was removed from the cluster/)
    expect(c.state.snapshot()).toEqual(before)
    // While a node holding a replica (n2) runs a version of level 10, no node can be removed.
    c.apply({ type: 'registerNode', nodeId: 'n5', address: 'n5:1', formatLevel: FORMAT_LEVEL })
    c.apply({ type: 'registerNode', nodeId: 'n2', address: 'n2:1', formatLevel: 10 })
    await expect(remove('n5')).rejects.toThrow(
      'the cluster runs format level 10: a node can be removed from level 11, once every node runs a version of it',
    )
  })
})

describe('Controller soft state of nodes it refuses', () => {
  it('keeps no liveness or report of a node whose heartbeat it refuses unregistered: removed, or its registration refused', async () => {
    const c = leading({ refuse: (command) => command.type === 'registerNode' })
    await c.controller.round()
    // Nodes that come and go under new ids (the meta state at its bound refuses them), each
    // heard once. Before, each left its liveness and its report for the rest of the term.
    const ids = Array.from({ length: 500 }, (_, i) => `churn-${i}`)
    const groups = [{ groupId: 1, leaderId: 'x', term: 1, commitIndex: 1, appliedIndex: 1 }]
    for (const id of ids)
      await expect(c.answer(id, false, FORMAT_LEVEL, { groups })).rejects.toThrow(/cannot register node/)
    const liveness = c.controller.liveness()
    expect(
      ids.filter((id) => liveness.lastHeartbeatMs?.(id) !== 0 || liveness.groupIndexes?.(id, 1)),
    ).toEqual([])
    // A removed node started again: its heartbeat is refused, and leaves nothing either.
    expect(
      c.apply({ type: 'registerNode', nodeId: 'r1', address: 'r1:1', formatLevel: FORMAT_LEVEL }).ok,
    ).toBe(true)
    expect(c.apply({ type: 'removeNode', nodeId: 'r1' }).ok).toBe(true)
    await expect(c.answer('r1', false, FORMAT_LEVEL, { groups })).rejects.toThrow(/node r1 was removed/)
    expect(liveness.lastHeartbeatMs?.('r1')).toBe(0)
    expect(liveness.groupIndexes?.('r1', 1)).toBeUndefined()
    // A registered node's heartbeat counts as before.
    await expect(c.answer('n2')).resolves.toBeDefined()
    expect(liveness.alive('n2')).toBe(true)
  })

  it('refuses to register an address that is no host:port, and keeps nothing of that node', async () => {
    const proposed: MetaCommand[] = []
    const c = leading({
      refuse: (command) => {
        proposed.push(command)
        return false
      },
    })
    await c.controller.round()
    proposed.length = 0
    const beat = (address: string) =>
      c.controller.onHeartbeat({
        nodeId: 'n9',
        address,
        groups: [],
        tokensFingerprint: '',
        hostsMeta: false,
        formatLevel: FORMAT_LEVEL,
        storeId: '',
        freshStore: false,
        nodesFingerprint: '',
      })
    // Registered, every node dialing it threw in grpc-js ("could not parse target name").
    for (const address of ['n9:1\n', 'n9 :1', 'n9', 'n9:0', '']) {
      await expect(beat(address)).rejects.toMatchObject({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/^cannot register node n9: address .* is not host:port/),
      })
    }
    expect(proposed).toEqual([])
    expect(c.controller.liveness().lastHeartbeatMs?.('n9')).toBe(0)
    await expect(beat('n9:7009')).resolves.toBeDefined()
    expect(proposed).toMatchObject([{ type: 'registerNode', nodeId: 'n9', address: 'n9:7009' }])
  })
})
