import {
  CreateQueueRequest,
  FORMAT_LEVEL,
  FORMAT_LEVEL_DELIVERY_RATE,
  FORMAT_LEVEL_GROW_PARTITIONS,
  FORMAT_LEVEL_MESSAGE_TTL,
  FORMAT_LEVEL_ORDERED_KEYS,
  FORMAT_LEVEL_PAUSE,
  FORMAT_LEVEL_RETRY_BACKOFF,
  FORMAT_LEVEL_TOKEN_TTL,
  FORMAT_LEVEL_VIEWER_ROLE,
  type MetaServer,
  NotLeaderError,
  QueueRoute,
} from '@mq/protocol'
import { describe, expect, it, vi } from 'vitest'
import { type ControllerPort, type MetaGroupPort, metaHandlers } from './meta-handlers'
import { META_LIMITS, MetaState, narrowedPrefixes, type QueueRecord, ReplicaChangeReason } from './meta-state'
import { routeOf } from './routes'

/** A meta group of one replica that applies at once (the handlers' contract, not Raft's). */
function singleReplica(leader = true): MetaGroupPort & { state: MetaState } {
  const state = new MetaState()
  let now = 0
  return {
    state,
    propose: async (c) => {
      if (!leader)
        throw new NotLeaderError('not the meta leader', { leaderId: 'n2', leaderAddress: '127.0.0.1:7002' })
      return state.apply(c, ++now)
    },
    read: async () => state,
    term: () => 7,
    leaderId: () => (leader ? 'n1' : 'n2'),
    membership: () => ({ voters: ['n2', 'n1'], learners: ['n4'] }),
    liveness: () => ({
      alive: (id) => id !== 'n3',
      lastHeartbeatMs: () => 5,
      // n2 leads group 1 and reported its indexes; n1 reported others (not the leader's).
      groupIndexes: (id, groupId) =>
        groupId === 1 && id === 'n2'
          ? { commitIndex: 40, appliedIndex: 38 }
          : { commitIndex: 1, appliedIndex: 1 },
    }),
  }
}

const controller: ControllerPort = {
  scaleDataGroups: async (groups) => ({ targetGroups: groups, movesTotal: 0, movesDone: 0, state: 'done' }),
  transferLeader: async () => {},
  drainNode: async () => 0,
  undrainNode: async () => false,
  removeNode: async () => {},
  setMetaVoters: async (voters) => ({ voters: ['n1', 'n2', 'n3'], votersWanted: voters }),
  setReplicationFactor: async () => 3,
  fenceDeletedQueue: async () => {},
}

/** Calls `method` with `request`; `who` stands for the caller's credentials (metadata key `who`). */
function call<K extends keyof MetaServer>(
  h: MetaServer,
  method: K,
  request: unknown,
  who?: string,
): Promise<unknown> {
  const metadata = { get: (key: string) => (key === 'who' && who !== undefined ? [who] : []) }
  return new Promise((resolve, reject) =>
    (h[method] as (c: unknown, cb: (e: unknown, r: unknown) => void) => void)(
      { request, metadata },
      (e, r) => (e ? reject(e) : resolve(r)),
    ),
  )
}

describe('meta handlers', () => {
  it('gives a queue created without a dedup window the default one, and none when asked for 0', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const h = metaHandlers(meta, controller)
    // Through the wire's codec, as a client sends it: the field unset, or set to 0.
    const wire = (name: string, dedupWindowMs?: number) => {
      const config = {
        partitions: 1,
        visibilityTimeoutMs: 0,
        maxDeliveries: 0,
        deadLetterQueue: '',
        messageBytesMax: 0,
        queueLengthMax: 0,
        strictPriority: false,
        engine: '',
        messageTtlMs: 0,
        paused: false,
        orderedKeys: false,
        deliveryRate: 0,
        retryBackoffMinMs: 0,
        retryBackoffMaxMs: 0,
        ...(dedupWindowMs !== undefined ? { dedupWindowMs } : {}),
      }
      return CreateQueueRequest.decode(CreateQueueRequest.encode({ name, config }).finish())
    }
    const created = (await call(h, 'createQueue', wire('plain'))) as QueueRoute
    expect(created.config?.dedupWindowMs).toBe(5 * 60_000)
    const off = (await call(h, 'createQueue', wire('off', 0))) as QueueRoute
    expect(off.config?.dedupWindowMs).toBe(0)
    const set = (await call(h, 'createQueue', wire('set', 90_000))) as QueueRoute
    expect(set.config?.dedupWindowMs).toBe(90_000)
  })

  it('answers an update that changes nothing without proposing it (the route epoch stays)', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1', formatLevel: FORMAT_LEVEL })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const h = metaHandlers(meta, controller)
    const created = (await call(h, 'createQueue', {
      name: 'jobs',
      config: { partitions: 2, maxDeliveries: 4 },
    })) as QueueRoute
    for (const update of [{}, { partitions: 2 }, { maxDeliveries: 4, paused: false }]) {
      const same = (await call(h, 'updateQueue', { name: 'jobs', update })) as QueueRoute
      expect(same.routeEpoch).toBe(created.routeEpoch)
      expect(same.config).toEqual(created.config)
      expect(meta.state.routeEpoch).toBe(created.routeEpoch)
    }
    const changed = (await call(h, 'updateQueue', {
      name: 'jobs',
      update: { maxDeliveries: 5 },
    })) as QueueRoute
    expect(changed.routeEpoch).toBe(created.routeEpoch + 1)
    // Still refused as before: fewer partitions, and an unknown queue.
    await expect(call(h, 'updateQueue', { name: 'jobs', update: { partitions: 1 } })).rejects.toMatchObject({
      code: 3,
    })
    await expect(call(h, 'updateQueue', { name: 'nope', update: {} })).rejects.toMatchObject({ code: 5 })
  })

  it("refuses partitions past the cluster's bound, and a token whose roles take too many bytes, before proposing", async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1', formatLevel: FORMAT_LEVEL })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const h = metaHandlers(meta, controller)
    await call(h, 'createQueue', { name: 'small', config: { partitions: 2 } })
    // The other queues hold all but 5 of the bound.
    vi.spyOn(meta.state, 'partitionCounts').mockImplementation(
      () => new Map([[1, META_LIMITS.partitionsMax - 5]]),
    )
    const refused = {
      code: 8,
      details: expect.stringMatching(/past the limit of 1000000 \(all queues together\)/),
    }
    await expect(call(h, 'createQueue', { name: 'big', config: { partitions: 8 } })).rejects.toMatchObject(
      refused,
    )
    await expect(call(h, 'updateQueue', { name: 'small', update: { partitions: 8 } })).rejects.toMatchObject(
      refused,
    )
    expect(meta.state.queue('big')).toBeUndefined()
    expect(meta.state.queue('small')?.partitions).toHaveLength(2)
    await call(h, 'createQueue', { name: 'fits', config: { partitions: 5 } })
    await call(h, 'updateQueue', { name: 'small', update: { partitions: 7 } })
    // A token's roles: 4,096 bytes at most, together.
    const roles = Array.from({ length: 20 }, (_, i) => `consumer:${String(i).padStart(250, 'q')}`)
    await expect(call(h, 'createToken', { name: 'wide', roles, ttlMs: 0 })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/roles take 5\d{3} bytes, over the 4096/),
    })
    expect(meta.state.tokens.list()).toEqual([])
  })

  it("refuses a partition count past a queue's bound as INVALID_ARGUMENT, not as the cluster's limit", async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1', formatLevel: FORMAT_LEVEL })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const h = metaHandlers(meta, controller)
    await call(h, 'createQueue', { name: 'small', config: { partitions: 2 } })
    // Past the cluster's 1,000,000 too: LIMIT_EXCEEDED is retriable, and the SDK retried it
    // until its deadline, for a count no queue may have.
    const refused = { code: 3, details: 'partitions must be an integer from 1 to 256, got 4294967295' }
    await expect(
      call(h, 'createQueue', { name: 'big', config: { partitions: 4294967295 } }),
    ).rejects.toMatchObject(refused)
    await expect(
      call(h, 'updateQueue', { name: 'small', update: { partitions: 4294967295 } }),
    ).rejects.toMatchObject(refused)
    expect(meta.state.queue('big')).toBeUndefined()
    expect(meta.state.queue('small')?.partitions).toHaveLength(2)
  })

  it('refuses a token name the host says is taken (its token file has it), proposing nothing', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1', formatLevel: FORMAT_LEVEL })
    const h = metaHandlers(meta, controller, {
      tokenNameTaken: (name) => (name === 'ops' ? 'ops is taken' : undefined),
    })
    await expect(call(h, 'createToken', { name: 'ops', roles: ['admin'], ttlMs: 0 })).rejects.toMatchObject({
      code: 3,
      details: 'ops is taken',
    })
    expect(meta.state.tokens.list()).toEqual([])
    expect(await call(h, 'createToken', { name: 'app', roles: ['admin'], ttlMs: 0 })).toMatchObject({
      name: 'app',
    })
  })

  it('refuses a queue or token name no queue or token can have before proposing anything', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const proposed: string[] = []
    const propose = meta.propose
    meta.propose = (c) => {
      proposed.push(c.type)
      return propose(c)
    }
    const h = metaHandlers(meta, controller)
    const huge = 'q'.repeat(1 << 20)
    for (const [method, request] of [
      ['createQueue', { name: 'bad name!', config: {} }],
      ['updateQueue', { name: huge, update: {} }],
      ['deleteQueue', { name: '' }],
      ['createToken', { name: 'no spaces please', roles: ['admin'], ttlMs: 0 }],
      ['deleteToken', { name: huge }],
    ] as const) {
      await expect(call(h, method, request)).rejects.toMatchObject({ code: 3 })
    }
    await expect(call(h, 'createQueue', { name: 'bad name!', config: {} })).rejects.toMatchObject({
      details: `queue name "bad name!" may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit`,
    })
    await expect(call(h, 'deleteToken', { name: huge })).rejects.toMatchObject({
      details: expect.stringMatching(/^token name "q+… \(1048635 chars\)$/),
    })
    expect(proposed).toEqual([])
  })

  it('creates a queue and routes it to its groups leaders', async () => {
    const meta = singleReplica()
    for (const n of ['n1', 'n2', 'n3'])
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1` })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] })
    await meta.propose({ type: 'reportLeader', groupId: 1, leaderId: 'n2', term: 3 })
    const h = metaHandlers(meta, controller)
    const route = (await call(h, 'createQueue', { name: 'jobs', config: { partitions: 2 } })) as QueueRoute
    expect(route.partitions).toHaveLength(2)
    expect(route.partitions[0]).toMatchObject({
      groupId: 1,
      leaderId: 'n2',
      leaderAddress: 'n2:1',
      engine: 'leveldb',
    })
    expect(route.partitions[0]?.replicas.map((r) => r.nodeId)).toEqual(['n1', 'n2', 'n3'])
    const routes = (await call(h, 'getRoutes', { queues: ['jobs', 'missing'] })) as {
      routes: QueueRoute[]
      metaTerm: number
    }
    expect(routes.routes.map((r) => r.queue)).toEqual(['jobs'])
    // The meta term as of the read: data group leaders fence replica change steps with it.
    expect(routes.metaTerm).toBe(7)
    const status = (await call(h, 'clusterStatus', {})) as {
      nodes: { nodeId: string; alive: boolean }[]
      groups: {
        groupId: number
        commitIndex: number
        appliedIndex: number
        replicas: { nodeId: string; appliedIndex: number }[]
      }[]
    }
    // The indexes of a group are its leader's report; each replica's applied index its own.
    expect(status.groups).toMatchObject([{ groupId: 1, commitIndex: 40, appliedIndex: 38 }])
    expect(status.groups[0]?.replicas.map((r) => [r.nodeId, r.appliedIndex])).toEqual([
      ['n1', 1],
      ['n2', 38],
      ['n3', 1],
    ])
    // The meta group's membership from the replica's Raft configuration, sorted.
    expect(status).toMatchObject({ metaVoters: ['n1', 'n2'], metaLearners: ['n4'] })
    expect(status.groups[0]).not.toHaveProperty('change')
    meta.state.apply({ type: 'initMetaMembers', voters: ['n1', 'n2'] }, 9)
    const again = (await call(h, 'clusterStatus', {})) as { nodes: { nodeId: string; groupIds: number[] }[] }
    // A meta voter's groups list group 0 first.
    expect(again.nodes.map((n) => [n.nodeId, n.groupIds])).toEqual([
      ['n1', [0, 1]],
      ['n2', [0, 1]],
      ['n3', [1]],
    ])
    // A replica change under way shows in its group's status, with when it started.
    meta.state.apply({ type: 'registerNode', nodeId: 'n4', address: 'n4:1' }, 7_000)
    meta.state.apply(
      { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: ReplicaChangeReason.Drain },
      8_000,
    )
    const changing = (await call(h, 'clusterStatus', {})) as { groups: { state: string; change?: object }[] }
    expect(changing.groups[0]).toMatchObject({
      state: 'changing',
      change: { add: 'n4', remove: 'n3', reason: 'drain', startedAtMs: 8_000 },
    })
    // The node being added holds the group (its copy), and a meta vote being given holds group 0:
    // `mq node list` showed n4 holding nothing while DrainNode counted both and RemoveNode
    // refused it for them.
    meta.state.apply({ type: 'startMetaChange', add: 'n4', remove: 'n2', reason: 'drain' }, 9_000)
    const holding = (await call(h, 'clusterStatus', {})) as {
      nodes: { nodeId: string; groupIds: number[] }[]
    }
    expect(holding.nodes.map((n) => [n.nodeId, n.groupIds])).toEqual([
      ['n1', [0, 1]],
      ['n2', [0, 1]],
      ['n3', [1]],
      ['n4', [0, 1]],
    ])
    expect(meta.state.apply({ type: 'drainNode', nodeId: 'n4' }, 10_000)).toMatchObject({ value: 2 })
    expect(status.nodes.map((n) => [n.nodeId, n.alive])).toEqual([
      ['n1', true],
      ['n2', true],
      ['n3', false],
    ])
  })

  it('sets a message TTL only once every replica reads it (format level 8), and says why not', async () => {
    const meta = singleReplica()
    for (const [n, level] of [
      ['n1', FORMAT_LEVEL_MESSAGE_TTL],
      ['n2', FORMAT_LEVEL_MESSAGE_TTL],
      ['n3', FORMAT_LEVEL_MESSAGE_TTL - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1`, formatLevel: level })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createQueue', { name: 'short', config: { partitions: 1, messageTtlMs: 60_000 } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(/format level 7: a message TTL can be set from level 8/),
    })
    expect(meta.state.queue('short')).toBeUndefined()
    // Without a TTL (or with 0) the queue is made; its update to a TTL is refused the same way.
    await call(h, 'createQueue', { name: 'short', config: { partitions: 1, messageTtlMs: 0 } })
    await expect(
      call(h, 'updateQueue', { name: 'short', update: { messageTtlMs: 1_000 } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(/format level 7/),
    })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n3',
      address: 'n3:1',
      formatLevel: FORMAT_LEVEL_MESSAGE_TTL,
    })
    const route = (await call(h, 'updateQueue', {
      name: 'short',
      update: { messageTtlMs: 1_000 },
    })) as QueueRoute
    expect(route.config?.messageTtlMs).toBe(1_000)
  })

  it('adds partitions only once every meta replica places them (format level 9), and says why not', async () => {
    const meta = singleReplica()
    for (const [n, level] of [
      ['n1', FORMAT_LEVEL_GROW_PARTITIONS],
      ['n2', FORMAT_LEVEL_GROW_PARTITIONS - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1`, formatLevel: level })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2'] })
    const h = metaHandlers(meta, controller)
    await call(h, 'createQueue', { name: 'jobs', config: { partitions: 2 } })
    await expect(call(h, 'updateQueue', { name: 'jobs', update: { partitions: 4 } })).rejects.toMatchObject({
      details: expect.stringMatching(/format level 8: partitions can be added from level 9/),
    })
    expect(meta.state.queue('jobs')?.partitions).toHaveLength(2)
    // The count the queue has already is no change: other settings go through.
    await call(h, 'updateQueue', { name: 'jobs', update: { partitions: 2, maxDeliveries: 3 } })
    expect(meta.state.queue('jobs')?.config.maxDeliveries).toBe(3)
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_GROW_PARTITIONS,
    })
    const route = (await call(h, 'updateQueue', { name: 'jobs', update: { partitions: 4 } })) as QueueRoute
    expect(route.partitions.map((p) => p.partition)).toEqual([0, 1, 2, 3])
    expect(route.partitionsEpoch).toBe(route.routeEpoch)
    // Fewer is refused, whatever the level.
    await expect(call(h, 'updateQueue', { name: 'jobs', update: { partitions: 3 } })).rejects.toMatchObject({
      details: expect.stringMatching(/partitions can only be added: the queue has 4, asked for 3/),
    })
  })

  it('pauses a queue only once every node heeds it (format level 12); resumes at any level', async () => {
    const meta = singleReplica()
    for (const [n, level] of [
      ['n1', FORMAT_LEVEL_PAUSE],
      ['n2', FORMAT_LEVEL_PAUSE - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1`, formatLevel: level })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2'] })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createQueue', { name: 'held', config: { partitions: 1, paused: true } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(/format level 11: a queue can be paused from level 12/),
    })
    expect(meta.state.queue('held')).toBeUndefined()
    const created = (await call(h, 'createQueue', { name: 'jobs', config: { partitions: 1 } })) as QueueRoute
    expect(created.config?.paused).toBe(false)
    await expect(call(h, 'updateQueue', { name: 'jobs', update: { paused: true } })).rejects.toMatchObject({
      details: expect.stringMatching(/a queue can be paused from level 12/),
    })
    expect(meta.state.queue('jobs')?.config.paused).toBe(false)
    // Resuming a queue that is not paused changes nothing an older replica would miss.
    await call(h, 'updateQueue', { name: 'jobs', update: { paused: false } })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_PAUSE,
    })
    const paused = (await call(h, 'updateQueue', { name: 'jobs', update: { paused: true } })) as QueueRoute
    expect(paused.config?.paused).toBe(true)
    expect(meta.state.changedEpoch()).toBe(paused.routeEpoch)
    // Other settings leave it paused; resuming clears it.
    await call(h, 'updateQueue', { name: 'jobs', update: { maxDeliveries: 3 } })
    expect(meta.state.queue('jobs')?.config).toMatchObject({ paused: true, maxDeliveries: 3 })
    const resumed = (await call(h, 'updateQueue', { name: 'jobs', update: { paused: false } })) as QueueRoute
    expect(resumed.config?.paused).toBe(false)
    // A queue may be created paused (filled first, delivered once resumed).
    const held = (await call(h, 'createQueue', {
      name: 'held',
      config: { partitions: 1, paused: true },
    })) as QueueRoute
    expect(held.config?.paused).toBe(true)
  })

  it('creates a queue with ordered keys only once every node reads them (format level 14)', async () => {
    const meta = singleReplica()
    // Before any node registered (a new cluster's first moments), the level is not known yet.
    await expect(
      call(metaHandlers(meta, controller), 'createQueue', {
        name: 'orders',
        config: { partitions: 2, orderedKeys: true },
      }),
    ).rejects.toMatchObject({
      code: 14,
      details: expect.stringMatching(/format level is not known yet \(no node registered yet\)/),
    })
    for (const [n, level] of [
      ['n1', FORMAT_LEVEL_ORDERED_KEYS],
      ['n2', FORMAT_LEVEL_ORDERED_KEYS - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1`, formatLevel: level })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2'] })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createQueue', { name: 'orders', config: { partitions: 2, orderedKeys: true } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(/format level 13: a queue can order its keys from level 14/),
    })
    expect(meta.state.queue('orders')).toBeUndefined()
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_ORDERED_KEYS,
    })
    const created = (await call(h, 'createQueue', {
      name: 'orders',
      config: { partitions: 2, orderedKeys: true },
    })) as QueueRoute
    expect(created.config?.orderedKeys).toBe(true)
    // A holder not registered yet (a founder before its first heartbeat): not known, retriable.
    await meta.propose({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n9'] })
    await expect(
      call(h, 'createQueue', { name: 'early', config: { partitions: 1, orderedKeys: true } }),
    ).rejects.toMatchObject({
      code: 14, // UNAVAILABLE: retriable
      details: expect.stringMatching(/the cluster's format level is not known yet \(n9 not registered\)/),
    })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n9',
      address: 'n9:1',
      formatLevel: FORMAT_LEVEL_ORDERED_KEYS,
    })
    await call(h, 'createQueue', { name: 'early', config: { partitions: 1, orderedKeys: true } })
    await expect(call(h, 'updateQueue', { name: 'orders', update: { partitions: 4 } })).rejects.toMatchObject(
      {
        details: expect.stringMatching(/the queue orders its keys, so its partition count stays 2/),
      },
    )
    expect(meta.state.queue('orders')?.partitions).toHaveLength(2)
  })

  it("backs a queue's failed deliveries off only once every node heeds it (format level 16); turns it off at any level", async () => {
    const meta = singleReplica()
    for (const [n, level] of [
      ['n1', FORMAT_LEVEL_RETRY_BACKOFF],
      ['n2', FORMAT_LEVEL_RETRY_BACKOFF - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1`, formatLevel: level })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2'] })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createQueue', { name: 'retry', config: { partitions: 1, retryBackoffMinMs: 1_000 } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(
        /format level 15: a queue's failed deliveries can be backed off from level 16/,
      ),
    })
    await call(h, 'createQueue', { name: 'jobs', config: { partitions: 2 } })
    await expect(
      call(h, 'updateQueue', { name: 'jobs', update: { retryBackoffMinMs: 1_000 } }),
    ).rejects.toMatchObject({ details: expect.stringMatching(/backed off from level 16/) })
    // The maximum alone too: a meta replica of level 15 would drop it.
    await expect(
      call(h, 'updateQueue', { name: 'jobs', update: { retryBackoffMaxMs: 60_000 } }),
    ).rejects.toMatchObject({ details: expect.stringMatching(/backed off from level 16/) })
    await call(h, 'updateQueue', { name: 'jobs', update: { retryBackoffMinMs: 0 } })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_RETRY_BACKOFF,
    })
    const backedOff = (await call(h, 'updateQueue', {
      name: 'jobs',
      update: { retryBackoffMinMs: 1_000 },
    })) as QueueRoute
    expect(backedOff.config).toMatchObject({ retryBackoffMinMs: 1_000, retryBackoffMaxMs: 600_000 })
    await expect(
      call(h, 'updateQueue', { name: 'jobs', update: { retryBackoffMaxMs: 500 } }),
    ).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/retryBackoffMaxMs \(500\) is below retryBackoffMinMs \(1000\)/),
    })
  })

  it("limits a queue's delivery rate only once every node heeds it (format level 15); lifts it at any level", async () => {
    const meta = singleReplica()
    for (const [n, level] of [
      ['n1', FORMAT_LEVEL_DELIVERY_RATE],
      ['n2', FORMAT_LEVEL_DELIVERY_RATE - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId: n, address: `${n}:1`, formatLevel: level })
    await meta.propose({ type: 'createGroup', replicas: ['n1', 'n2'] })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createQueue', { name: 'slow', config: { partitions: 1, deliveryRate: 10 } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(
        /format level 14: a queue's deliveries can be rate limited from level 15/,
      ),
    })
    await call(h, 'createQueue', { name: 'jobs', config: { partitions: 2 } })
    await expect(
      call(h, 'updateQueue', { name: 'jobs', update: { deliveryRate: 10 } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(/rate limited from level 15/),
    })
    await call(h, 'updateQueue', { name: 'jobs', update: { deliveryRate: 0 } })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_DELIVERY_RATE,
    })
    const limited = (await call(h, 'updateQueue', {
      name: 'jobs',
      update: { deliveryRate: 10 },
    })) as QueueRoute
    expect(limited.config?.deliveryRate).toBe(10)
    expect(meta.state.changedEpoch()).toBe(limited.routeEpoch)
  })

  it('gives a token a lifetime only once every node keeps it (format level 22); a lasting one at any level', async () => {
    const meta = singleReplica()
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n1',
      address: 'n1:1',
      formatLevel: FORMAT_LEVEL_TOKEN_TTL,
    })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_TOKEN_TTL - 1,
    })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createToken', { name: 'ci', roles: ['admin'], ttlMs: 60_000 }),
    ).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/format level 21: a token can expire from level 22/),
    })
    expect(meta.state.tokens.list()).toEqual([])
    expect(await call(h, 'createToken', { name: 'app', roles: ['admin'], ttlMs: 0 })).toMatchObject({
      name: 'app',
      expiresAtMs: 0,
    })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_TOKEN_TTL,
    })
    const made = (await call(h, 'createToken', { name: 'ci', roles: ['admin'], ttlMs: 60_000 })) as {
      expiresAtMs: number
    }
    expect(made.expiresAtMs).toBe(
      (meta.state.tokens.list().find((t) => t.name === 'ci')?.createdAtMs ?? 0) + 60_000,
    )
  })

  it('gives a token a viewer role only once every meta replica reads it (format level 23)', async () => {
    const meta = singleReplica()
    for (const [nodeId, formatLevel] of [
      ['n1', FORMAT_LEVEL_VIEWER_ROLE],
      ['n2', FORMAT_LEVEL_VIEWER_ROLE - 1],
    ] as const)
      await meta.propose({ type: 'registerNode', nodeId, address: `${nodeId}:1`, formatLevel })
    const h = metaHandlers(meta, controller)
    const dash = { name: 'dash', roles: ['viewer:orders.*'], ttlMs: 0 }
    await expect(call(h, 'createToken', dash)).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/format level 22: a token can have a viewer role from level 23/),
    })
    expect(meta.state.tokens.list()).toEqual([])
    // Other roles at any level.
    expect(
      await call(h, 'createToken', { name: 'app', roles: ['consumer:orders.*'], ttlMs: 0 }),
    ).toMatchObject({
      name: 'app',
    })
    await meta.propose({
      type: 'registerNode',
      nodeId: 'n2',
      address: 'n2:1',
      formatLevel: FORMAT_LEVEL_VIEWER_ROLE,
    })
    expect(await call(h, 'createToken', dash)).toMatchObject({ name: 'dash' })
    expect(meta.state.tokens.list().find((t) => t.name === 'dash')?.roles).toEqual(['viewer:orders.*'])
  })

  it('deletes a queue, then has its partitions fenced before answering', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const fenced: QueueRecord[] = []
    let release = () => {}
    let asked = () => {}
    const fenceAsked = new Promise<void>((r) => {
      asked = r
    })
    const h = metaHandlers(meta, {
      ...controller,
      fenceDeletedQueue: async (q) => {
        expect(meta.state.queue(q.name)).toBeUndefined()
        fenced.push(q)
        asked()
        await new Promise<void>((r) => {
          release = r
        })
      },
    })
    const created = (await call(h, 'createQueue', { name: 'jobs', config: { partitions: 2 } })) as QueueRoute
    let answered = false
    const deleting = call(h, 'deleteQueue', { name: 'jobs' }).then(() => {
      answered = true
    })
    await fenceAsked
    // Every microtask the answer would need runs before this.
    await new Promise((r) => setImmediate(r))
    // Deleted, its fences asked for, and not answered until they are done.
    expect(fenced).toHaveLength(1)
    expect(answered).toBe(false)
    release()
    await deleting
    expect(answered).toBe(true)
    expect(fenced[0]).toMatchObject({ name: 'jobs', queueId: created.queueId })
    expect(fenced[0]?.partitions.map((p) => p.partition)).toEqual([0, 1])
    // Not found: refused before anything is fenced.
    await expect(call(h, 'deleteQueue', { name: 'jobs' })).rejects.toMatchObject({
      details: expect.stringMatching(/queue jobs does not exist/),
    })
    expect(fenced).toHaveLength(1)
  })

  it('refuses a dead-letter queue that is the queue itself or not a valid name', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const h = metaHandlers(meta, controller)
    await expect(
      call(h, 'createQueue', { name: 'jobs', config: { partitions: 1, deadLetterQueue: 'jobs' } }),
    ).rejects.toMatchObject({ details: expect.stringMatching(/cannot be its own dead-letter queue/) })
    await call(h, 'createQueue', { name: 'jobs', config: { partitions: 1, deadLetterQueue: 'jobs-dead' } })
    await expect(
      call(h, 'updateQueue', { name: 'jobs', update: { deadLetterQueue: 'jobs' } }),
    ).rejects.toMatchObject({
      details: expect.stringMatching(/cannot be its own dead-letter queue/),
    })
    await expect(
      call(h, 'updateQueue', { name: 'jobs', update: { deadLetterQueue: 'bad name' } }),
    ).rejects.toMatchObject({ details: expect.stringMatching(/dead-letter queue name/) })
    expect(meta.state.queue('jobs')?.config.deadLetterQueue).toBe('jobs-dead')
    // "" goes back to the queue's own dead-letter list.
    await call(h, 'updateQueue', { name: 'jobs', update: { deadLetterQueue: '' } })
    expect(meta.state.queue('jobs')?.config.deadLetterQueue).toBe('')
  })

  it('pages through queues', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    for (const q of ['a', 'b', 'c'])
      await meta.propose({ type: 'createQueue', name: q, config: { partitions: 1 } })
    const h = metaHandlers(meta, controller)
    const first = (await call(h, 'listQueues', { prefix: '', limit: 2, pageToken: '' })) as {
      queues: QueueRoute[]
      nextPageToken: string
    }
    expect(first.queues.map((q) => q.queue)).toEqual(['a', 'b'])
    const second = (await call(h, 'listQueues', {
      prefix: '',
      limit: 2,
      pageToken: first.nextPageToken,
    })) as {
      queues: QueueRoute[]
      nextPageToken: string
    }
    expect(second).toMatchObject({ nextPageToken: '' })
    expect(second.queues.map((q) => q.queue)).toEqual(['c'])
  })

  it('ends a ListQueues page at its byte budget (one route at least) and refuses a GetRoutes past it', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    for (const q of ['a', 'b', 'c', 'd', 'e'])
      await meta.propose({ type: 'createQueue', name: q, config: { partitions: 8 } })
    const one = QueueRoute.encode(routeOf(meta.state, meta.state.queue('a') as QueueRecord)).finish().length
    const h = metaHandlers(meta, controller, { routesBytesMax: one + 1 }) // a page holds one route, a GetRoutes three
    const pages: string[][] = []
    let pageToken = ''
    do {
      const page = (await call(h, 'listQueues', { prefix: '', limit: 1000, pageToken })) as {
        queues: QueueRoute[]
        nextPageToken: string
      }
      pages.push(page.queues.map((q) => q.queue))
      pageToken = page.nextPageToken
    } while (pageToken !== '')
    expect(pages).toEqual([['a'], ['b'], ['c'], ['d'], ['e']])
    expect(await call(h, 'getRoutes', { queues: ['a', 'b', 'c'] })).toMatchObject({ routes: [{}, {}, {}] })
    await expect(call(h, 'getRoutes', { queues: ['a', 'b', 'c', 'd'] })).rejects.toMatchObject({
      details: expect.stringMatching(/ask for fewer queues at once/),
    })
    // A route larger than the whole budget still comes, alone on its page.
    const tiny = metaHandlers(meta, controller, { routesBytesMax: 1 })
    expect(await call(tiny, 'listQueues', { prefix: '', limit: 1000, pageToken: '' })).toMatchObject({
      queues: [{ queue: 'a' }],
      nextPageToken: 'a',
    })
  })

  it('bounds GetRoutes: each named queue once, at most 100 routes for no name, at most as many names as queues', async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const names = Array.from({ length: 150 }, (_, i) => `q${String(i).padStart(3, '0')}`)
    for (const name of names) await meta.propose({ type: 'createQueue', name, config: { partitions: 1 } })
    const h = metaHandlers(meta, controller)
    const routes = async (queues: string[]) =>
      ((await call(h, 'getRoutes', { queues })) as { routes: QueueRoute[] }).routes.map((r) => r.queue)
    // A name sent many times is answered once (not one copy of its route per time).
    expect(await routes([...Array.from({ length: 5_000 }, () => 'q007'), 'missing', 'q149'])).toEqual([
      'q007',
      'q149',
    ])
    // No name (an earlier SDK's connect): the first 100 queues by name, not every queue.
    expect(await routes([])).toEqual(names.slice(0, 100))
    // More names than the cluster may have queues: refused before the state is read.
    const many = Array.from({ length: 100_001 }, (_, i) => `n${i}`)
    await expect(routes(many)).rejects.toMatchObject({
      code: 3,
      details: 'GetRoutes names 100001 queues; the limit is 100000: ask in parts',
    })
    expect(await routes(many.slice(1))).toEqual([])
  })

  it("shows a scoped caller only its queues: ListQueues pages, an unnamed GetRoutes, ClusterStatus's moves", async () => {
    const meta = singleReplica()
    await meta.propose({ type: 'registerNode', nodeId: 'n1', address: 'n1:1' })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    await meta.propose({ type: 'createGroup', replicas: ['n1'] })
    const names = ['billing', 'jobs', 'orders.a', 'orders.b', 'ordersx', 'orders.c', 'zeta']
    for (const name of names) await meta.propose({ type: 'createQueue', name, config: { partitions: 1 } })
    for (const queue of ['billing', 'orders.b']) {
      const from = meta.state.queue(queue)?.partitions[0]?.groupId
      await meta.propose({ type: 'startMove', queue, partition: 0, toGroup: from === 1 ? 2 : 1 })
    }
    // The caller "orders" sees orders.*; any other caller (no scope) sees every queue.
    const asked: string[] = [] // the names the scope was asked about
    const orders = {
      sees: (q: string) => {
        asked.push(q)
        return q.startsWith('orders.')
      },
      prefixes: ['orders.'],
    }
    const h = metaHandlers(meta, controller, {
      queueScope: (ctx) => (ctx.metadata.get('who')[0] === 'orders' ? orders : undefined),
    })
    type Page = { queues: QueueRoute[]; nextPageToken: string }
    const pages: [string[], string][] = []
    let pageToken = ''
    do {
      const page = (await call(h, 'listQueues', { prefix: '', limit: 2, pageToken }, 'orders')) as Page
      pages.push([page.queues.map((q) => q.queue), page.nextPageToken])
      pageToken = page.nextPageToken
    } while (pageToken !== '')
    // Each page is filled from further on, and its token is a name the caller sees.
    expect(pages).toEqual([
      [['orders.a', 'orders.b'], 'orders.b'],
      [['orders.c'], ''],
    ])
    // Read under the scope's prefix alone: never asked about billing, jobs, ordersx or zeta.
    expect(new Set(asked)).toEqual(new Set(['orders.a', 'orders.b', 'orders.c']))
    // A request's prefix narrows it further; a page token the caller cannot see (or that names
    // no queue) only says where to start.
    const list = async (prefix: string, token: string) =>
      ((await call(h, 'listQueues', { prefix, limit: 10, pageToken: token }, 'orders')) as Page).queues.map(
        (q) => q.queue,
      )
    expect(await list('orders.b', '')).toEqual(['orders.b'])
    expect(await list('', 'billing')).toEqual(['orders.a', 'orders.b', 'orders.c'])
    expect(await list('', 'orders.aa')).toEqual(['orders.b', 'orders.c'])
    expect(await list('jobs', '')).toEqual([])
    await expect(call(h, 'describeQueue', { name: 'billing' }, 'orders')).rejects.toMatchObject({ code: 7 })
    expect(await call(h, 'describeQueue', { name: 'orders.c' }, 'orders')).toMatchObject({
      queue: 'orders.c',
    })
    const all = (await call(h, 'listQueues', { prefix: '', limit: 100, pageToken: '' }, 'ops')) as Page
    expect(all.queues.map((q) => q.queue)).toEqual([...names].sort())
    const routes = async (queues: string[], who: string) =>
      ((await call(h, 'getRoutes', { queues }, who)) as { routes: QueueRoute[] }).routes.map((r) => r.queue)
    expect(await routes([], 'orders')).toEqual(['orders.a', 'orders.b', 'orders.c'])
    expect(await routes(['billing', 'orders.c'], 'orders')).toEqual(['orders.c'])
    expect(await routes(['billing'], 'ops')).toEqual(['billing'])
    const moves = async (who: string) =>
      ((await call(h, 'clusterStatus', {}, who)) as { moves: { queue: string }[] }).moves.map((m) => m.queue)
    expect(await moves('orders')).toEqual(['orders.b'])
    expect(await moves('ops')).toEqual(['billing', 'orders.b'])
  })

  it('narrows a scope to the prefixes to read under: disjoint, ascending, within the request', () => {
    expect(narrowedPrefixes(['orders.', 'jobs', 'orders.eu'], '')).toEqual(['jobs', 'orders.'])
    expect(narrowedPrefixes(['orders.', 'jobs', ''], '')).toEqual([''])
    expect(narrowedPrefixes(['orders.', 'jobs'], 'orders.e')).toEqual(['orders.e'])
    expect(narrowedPrefixes(['orders.', 'jobs'], 'o')).toEqual(['orders.'])
    expect(narrowedPrefixes(['orders.'], 'x')).toEqual([])
    expect(narrowedPrefixes([], '')).toEqual([])
  })

  it('answers a DescribeQueue of a name no queue can have INVALID_ARGUMENT, naming what is wrong', async () => {
    const h = metaHandlers(singleReplica(), controller)
    // As CreateQueue, UpdateQueue, DeleteQueue and every Queue call answer it; NOT_FOUND ("queue
    // does not exist") sent its caller looking for a queue to create under a name none can have.
    await expect(call(h, 'describeQueue', { name: '' })).rejects.toMatchObject({
      code: 3,
      details: 'queue name is empty',
    })
    await expect(call(h, 'describeQueue', { name: 'bad name' })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/^queue name "bad name" may hold only/),
    })
    await expect(call(h, 'describeQueue', { name: 'nope' })).rejects.toMatchObject({ code: 5 })
  })

  it('answers errors with their typed status', async () => {
    const h = metaHandlers(singleReplica(), controller)
    await expect(call(h, 'describeQueue', { name: 'nope' })).rejects.toMatchObject({ code: 5 })
    await expect(call(h, 'createQueue', { name: 'bad name', config: {} })).rejects.toMatchObject({
      code: 3,
      details: expect.stringMatching(/may hold only/),
    })
    await expect(call(h, 'scaleDataGroups', { groups: 0 })).rejects.toMatchObject({ code: 3 })
    const follower = metaHandlers(singleReplica(false), controller)
    await expect(call(follower, 'deleteQueue', { name: 'x' })).rejects.toMatchObject({ code: 14 })
  })
})
