import {
  FORMAT_LEVEL,
  FORMAT_LEVEL_CREATE_GROUP_ID,
  FORMAT_LEVEL_CREATE_PARTITIONS_EPOCH,
  FORMAT_LEVEL_META_APPLY_CHECKS,
  FORMAT_LEVEL_PLACE_LIVE_REMOVING,
} from '@mq/protocol'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { decodeMetaCommand, encodeMetaCommand, type MetaCommand } from './meta-commands'
import { META_LIMITS, MetaState, type QueueRecord, removedNodeMessage, saysNodeRemoved } from './meta-state'
import { FRESH_STORE_GRACE_MS, saysStoreReplaced, storeReplacedMessage } from './node-store'
import { chooseReplicaNodes } from './placement'
import { routeOf } from './routes'
import { stateWith } from './test-state'

function cluster(nodes = 3, groups = 2): MetaState {
  const s = new MetaState()
  for (let i = 1; i <= nodes; i++)
    s.apply({ type: 'registerNode', nodeId: `n${i}`, address: `127.0.0.1:700${i}` }, 1)
  for (let g = 0; g < groups; g++)
    s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'].slice(0, nodes) }, 2)
  return s
}

/** Arbitrary move commands: of partitions 0-3 of queues `name` to groups `group`, moves 1 to `moveIds`. */
function moveCommands(
  name: fc.Arbitrary<string>,
  group: fc.Arbitrary<number>,
  moveIds: number,
): fc.Arbitrary<MetaCommand>[] {
  const moveId = fc.integer({ min: 1, max: moveIds })
  return [
    fc.record({
      type: fc.constant('startMove' as const),
      queue: name,
      partition: fc.integer({ min: 0, max: 3 }),
      toGroup: group,
    }),
    fc.record({ type: fc.constant('completeMove' as const), moveId }),
    fc.record({ type: fc.constant('abortMove' as const), moveId }),
    fc.record({ type: fc.constant('finishMove' as const), moveId }),
  ]
}

/** Queue pages as a sort of every queue answers them, as queues() must. */
function pagesAgree(s: MetaState): void {
  // The property tests' queue names, sorted; the ones that exist, looked up one by one.
  const all = ['q1', 'q2', 'q3'].filter((n) => s.queue(n) !== undefined)
  expect(s.queues().map((q) => q.name)).toEqual(all)
  for (const [prefix, after, limit] of [
    ['', '', 10],
    ['q', 'q1', 1],
    ['q', 'q1', 5],
    ['', 'q2', 5],
    ['q3', '', 5],
    ['x', '', 5],
  ] as const) {
    const want = all.filter((n) => n.startsWith(prefix) && n > after).slice(0, limit)
    expect(s.queues(prefix, after, limit).map((q) => q.name)).toEqual(want)
  }
}

/** Partitions per data group counted afresh, as partitionCounts() must always answer. */
/**
 * `groups()` and `groupsOf()` (kept until the next apply or restore) against the groups read
 * one by one: a cached answer that outlived a change fails it.
 */
function groupsAgree(s: MetaState): void {
  const groups = Array.from({ length: s.nextGroupId() - 1 }, (_, i) => s.group(i + 1)).filter(
    (g) => g !== undefined,
  )
  expect(s.groups()).toEqual(groups)
  for (const n of ['n1', 'n2', 'n3', 'n4'])
    expect(s.groupsOf(n)).toEqual(
      groups.filter((g) => g.replicas.includes(n) || s.replicaChange(g.groupId)?.add === n),
    )
}

function recount(s: MetaState): Map<number, number> {
  const counts = new Map(s.groups().map((g) => [g.groupId, 0]))
  for (const q of s.queues())
    for (const p of q.partitions) counts.set(p.groupId, (counts.get(p.groupId) ?? 0) + 1)
  return counts
}

describe('MetaState', () => {
  it('creates a queue spread evenly over the data groups and bumps the route epoch', () => {
    const s = cluster(3, 2)
    const epoch = s.routeEpoch
    const r = s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 5 } }, 10)
    expect(r.ok).toBe(true)
    expect(s.queue('jobs')?.partitions.map((p) => p.groupId)).toEqual([1, 2, 1, 2, 1])
    expect(s.queue('jobs')?.partitions.every((p) => p.engine === 'leveldb')).toBe(true)
    expect(s.routeEpoch).toBe(epoch + 1)
    expect(s.apply({ type: 'createQueue', name: 'more', config: { partitions: 1 } }, 11).ok).toBe(true)
    expect(s.queue('more')?.partitions[0]?.groupId).toBe(2)
  })

  it("updates a queue's settings and bumps the route epoch (routes carry them)", () => {
    const s = cluster(3, 2)
    s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 2 } }, 10)
    const epoch = s.routeEpoch
    expect(s.apply({ type: 'updateQueue', name: 'jobs', update: { maxDeliveries: 9 } }, 11).ok).toBe(true)
    expect(s.queue('jobs')?.config.maxDeliveries).toBe(9)
    expect(s.routeEpoch).toBe(epoch + 1)
  })

  it('adds partitions to a queue, placed on the emptiest groups, routed from a new epoch', () => {
    const s = cluster(3, 3)
    s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 2 } }, 10)
    s.apply({ type: 'createQueue', name: 'other', config: { partitions: 1 } }, 10)
    const before = s.queue('jobs')
    expect(before?.partitions.map((p) => p.groupId)).toEqual([1, 2])
    expect(before?.partitionsEpoch).toBeUndefined()
    const epoch = s.routeEpoch
    const r = s.apply({ type: 'updateQueue', name: 'jobs', update: { partitions: 5, maxDeliveries: 7 } }, 11)
    expect(r.ok).toBe(true)
    const q = s.queue('jobs')
    // The old partitions stay where they are; the new ones go to the groups holding fewest.
    expect(q?.partitions.map((p) => [p.partition, p.groupId])).toEqual([
      [0, 1],
      [1, 2],
      [2, 1],
      [3, 2],
      [4, 3],
    ])
    expect(q?.config.partitions).toBe(5)
    expect(q?.config.maxDeliveries).toBe(7)
    expect(s.routeEpoch).toBe(epoch + 1)
    expect(q?.partitionsEpoch).toBe(s.routeEpoch)
    expect(s.partitionCounts()).toEqual(recount(s))
    // The same count again changes the settings only: the partitions' epoch stays.
    s.apply({ type: 'updateQueue', name: 'jobs', update: { partitions: 5, maxDeliveries: 8 } }, 12)
    expect(s.queue('jobs')?.partitionsEpoch).toBe(epoch + 1)
    expect(s.queue('jobs')?.partitions).toHaveLength(5)
    // It survives a snapshot.
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.queue('jobs')).toEqual(s.queue('jobs'))
    expect(copy.partitionCounts()).toEqual(recount(s))
  })

  it('keeps the epoch of the latest settings change or deletion, across a snapshot', () => {
    const s = cluster(3, 3)
    s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 1 } }, 10)
    s.apply({ type: 'createQueue', name: 'other', config: { partitions: 1 } }, 10)
    expect(s.changedEpoch()).toBe(0)
    expect(s.apply({ type: 'updateQueue', name: 'jobs', update: { paused: true } }, 11).ok).toBe(true)
    expect(s.queue('jobs')?.config.paused).toBe(true)
    expect(s.changedEpoch()).toBe(s.routeEpoch)
    // A creation changes no cached route: the epoch stays.
    const paused = s.routeEpoch
    s.apply({ type: 'createQueue', name: 'third', config: { partitions: 1 } }, 12)
    expect(s.changedEpoch()).toBe(paused)
    // A deletion does (a cached route would serve the queue that is gone), and it survives
    // a snapshot, where no queue is left to tell of it.
    s.apply({ type: 'deleteQueue', name: 'other' }, 12)
    const deleted = s.routeEpoch
    expect(s.changedEpoch()).toBe(deleted)
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.changedEpoch()).toBe(deleted)
    expect(copy.queue('jobs')).toEqual(s.queue('jobs'))
    // Not a boolean: refused, nothing changes.
    const r = s.apply(
      { type: 'updateQueue', name: 'jobs', update: { paused: 'yes' as unknown as boolean } },
      13,
    )
    expect(r).toMatchObject({ ok: false, message: 'paused must be true or false, got yes' })
    expect(s.queue('jobs')?.config.paused).toBe(true)
    expect(s.changedEpoch()).toBe(deleted)
  })

  it('restores a snapshot written before later settings existed with their defaults', () => {
    const s = cluster(3, 3)
    s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 1, maxDeliveries: 7 } }, 10)
    const image = JSON.parse(new TextDecoder().decode(s.snapshot()))
    for (const q of image.queues) {
      delete q.config.paused
      delete q.config.messageTtlMs
      delete q.config.orderedKeys
      delete q.config.deliveryRate
      delete q.config.retryBackoffMinMs
      delete q.config.retryBackoffMaxMs
    }
    const old = new MetaState()
    old.restore(new TextEncoder().encode(JSON.stringify(image)))
    expect(old.queue('jobs')?.config).toEqual(s.queue('jobs')?.config)
    expect(old.queue('jobs')?.config).toMatchObject({
      paused: false,
      messageTtlMs: 0,
      orderedKeys: false,
      deliveryRate: 0,
      retryBackoffMinMs: 0,
      retryBackoffMaxMs: 0,
      maxDeliveries: 7,
    })
    expect(old.snapshot()).toEqual(s.snapshot())
  })

  it('restores the changed epoch of an image that names it settingsEpoch (before the rename)', () => {
    const s = cluster(3, 3)
    s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 1 } }, 10)
    s.apply({ type: 'updateQueue', name: 'jobs', update: { maxDeliveries: 7 } }, 20)
    expect(s.changedEpoch()).toBeGreaterThan(0)
    const image = JSON.parse(new TextDecoder().decode(s.snapshot()))
    image.settingsEpoch = image.changedEpoch
    delete image.changedEpoch
    const old = new MetaState()
    old.restore(new TextEncoder().encode(JSON.stringify(image)))
    expect(old.changedEpoch()).toBe(s.changedEpoch())
    expect(old.snapshot()).toEqual(s.snapshot())
  })

  it('rejects bad commands with a clear error and no state change', () => {
    const s = cluster()
    s.apply({ type: 'createQueue', name: 'jobs', config: {} }, 10)
    const before = s.snapshot()
    const cases: [MetaCommand, string, RegExp][] = [
      [{ type: 'createQueue', name: 'jobs', config: {} }, 'QUEUE_EXISTS', /already exists/],
      [{ type: 'createQueue', name: 'bad name', config: {} }, 'INVALID_ARGUMENT', /may hold only/],
      [
        { type: 'createQueue', name: 'x', config: { partitions: 999 } },
        'INVALID_ARGUMENT',
        /partitions must be/,
      ],
      [{ type: 'updateQueue', name: 'nope', update: {} }, 'QUEUE_NOT_FOUND', /does not exist/],
      [
        { type: 'updateQueue', name: 'jobs', update: { maxDeliveries: 0 } },
        'INVALID_ARGUMENT',
        /maxDeliveries/,
      ],
      [
        { type: 'updateQueue', name: 'jobs', update: { partitions: 3, maxDeliveries: 9 } },
        'INVALID_ARGUMENT',
        /partitions can only be added: the queue has 4, asked for 3/,
      ],
      [
        { type: 'updateQueue', name: 'jobs', update: { partitions: 257 } },
        'INVALID_ARGUMENT',
        /partitions must be an integer from 1 to 256, got 257/,
      ],
      [
        { type: 'updateQueue', name: 'jobs', update: { partitions: 4.5 } },
        'INVALID_ARGUMENT',
        /partitions must be an integer/,
      ],
      [{ type: 'deleteQueue', name: 'nope' }, 'QUEUE_NOT_FOUND', /does not exist/],
      [{ type: 'createGroup', replicas: ['n1', 'n1'] }, 'INVALID_ARGUMENT', /twice/],
      [{ type: 'createGroup', replicas: ['n9'] }, 'INVALID_ARGUMENT', /not registered/],
      [{ type: 'removeGroup', groupId: 1 }, 'INVALID_ARGUMENT', /still holds/],
      [{ type: 'reportLeader', groupId: 1, leaderId: 'n9', term: 2 }, 'INVALID_ARGUMENT', /not a replica/],
      [
        { type: 'registerNode', nodeId: 'n4', address: '127.0.0.1:7001' },
        'INVALID_ARGUMENT',
        /already belongs/,
      ],
    ]
    for (const [command, code, message] of cases) {
      const r = s.apply(command, 20)
      expect(r, JSON.stringify(command)).toMatchObject({ ok: false, code })
      if (!r.ok) expect(r.message).toMatch(message)
    }
    expect(s.snapshot()).toEqual(before)
  })

  it('needs data groups before it can place a queue', () => {
    const s = cluster(3, 0)
    expect(s.apply({ type: 'createQueue', name: 'q', config: {} }, 1)).toMatchObject({
      ok: false,
      code: 'UNAVAILABLE',
    })
  })

  it('keeps the newest leader report', () => {
    const s = cluster()
    s.apply({ type: 'reportLeader', groupId: 1, leaderId: 'n2', term: 5 }, 1)
    s.apply({ type: 'reportLeader', groupId: 1, leaderId: 'n3', term: 4 }, 2)
    expect(s.group(1)).toMatchObject({ leaderId: 'n2', leaderTerm: 5 })
    s.apply({ type: 'reportLeader', groupId: 1, leaderId: 'n3', term: 6 }, 3)
    expect(s.group(1)).toMatchObject({ leaderId: 'n3', leaderTerm: 6 })
  })

  it('removes an empty group and lists queues by prefix and page', () => {
    const s = cluster(3, 3)
    for (const name of ['a1', 'a2', 'b1'])
      s.apply({ type: 'createQueue', name, config: { partitions: 1 } }, 1)
    expect(s.queues('a').map((q) => q.name)).toEqual(['a1', 'a2'])
    expect(s.queues('', 'a1', 1).map((q) => q.name)).toEqual(['a2'])
    expect(s.apply({ type: 'removeGroup', groupId: 3 }, 2).ok).toBe(false)
    s.apply({ type: 'deleteQueue', name: 'b1' }, 3)
    expect(s.apply({ type: 'removeGroup', groupId: 3 }, 4).ok).toBe(true)
    expect(s.groups().map((g) => g.groupId)).toEqual([1, 2])
  })

  it('places no partition on a group being removed once some of those removed are gone', () => {
    // Four empty groups scaled down to one: 2, 3 and 4 go; 3 and 4 are removed first.
    const run = (formatLevel?: number) => {
      const s = new MetaState()
      for (let i = 1; i <= 3; i++) {
        const level = formatLevel ? { formatLevel } : {}
        s.apply({ type: 'registerNode', nodeId: `n${i}`, address: `n${i}:1`, ...level }, 1)
      }
      for (let g = 0; g < 4; g++) s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 2)
      expect(s.apply({ type: 'scaleDataGroups', groups: 1 }, 3)).toMatchObject({
        ok: true,
        value: { removing: [2, 3, 4] },
      })
      for (const groupId of [3, 4]) expect(s.apply({ type: 'removeGroup', groupId }, 4).ok).toBe(true)
      s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 4 } }, 5)
      return s.queue('jobs')?.partitions.map((p) => p.groupId)
    }
    expect(run(FORMAT_LEVEL_PLACE_LIVE_REMOVING)).toEqual([1, 1, 1, 1])
    // Below level 18 (a meta replica of an earlier version applies the same entries so): the
    // groups removed were still counted, and group 2, being removed, took half.
    expect(run()).toEqual([1, 2, 1, 2])
  })

  it('places as its level says while a meta change given up adds nobody (not as a shrink)', () => {
    // As above, at level 36, while the meta group's change adding n4 is given up: its empty
    // `add` is no shrink's (no version that counted that id as a node of level 1 applies it),
    // so group 2, being removed, takes none.
    const s = new MetaState()
    for (let i = 1; i <= 4; i++)
      s.apply({ type: 'registerNode', nodeId: `n${i}`, address: `n${i}:1`, formatLevel: FORMAT_LEVEL }, 1)
    for (let g = 0; g < 4; g++) s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 2)
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 2)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'dead' }, 2)
    expect(s.apply({ type: 'abandonMetaChange' }, 2).ok).toBe(true)
    expect(s.apply({ type: 'scaleDataGroups', groups: 1 }, 3)).toMatchObject({ ok: true })
    for (const groupId of [3, 4]) expect(s.apply({ type: 'removeGroup', groupId }, 4).ok).toBe(true)
    s.apply({ type: 'createQueue', name: 'jobs', config: { partitions: 4 } }, 5)
    expect(s.queue('jobs')?.partitions.map((p) => p.groupId)).toEqual([1, 1, 1, 1])
  })

  it('places new group replicas on the least loaded live nodes', () => {
    const s = cluster(3, 1)
    s.apply({ type: 'registerNode', nodeId: 'n4', address: '127.0.0.1:7004' }, 5)
    s.apply({ type: 'registerNode', nodeId: 'n5', address: '127.0.0.1:7005' }, 5)
    expect(chooseReplicaNodes(s, 3, new Set(['n1', 'n2', 'n3', 'n4', 'n5']))).toEqual(['n4', 'n5', 'n1'])
    expect(chooseReplicaNodes(s, 3, new Set(['n1', 'n4']))).toEqual(['n4', 'n1'])
  })

  // Any sequence of commands, split at any point by snapshot + restore into a second
  // replica, gives both replicas the same results and the same state.
  it('is deterministic and survives snapshot/restore at any point (property)', () => {
    const name = fc.constantFrom('q1', 'q2', 'q3', 'bad name')
    const node = fc.constantFrom('n1', 'n2', 'n3', 'n4')
    const command: fc.Arbitrary<MetaCommand> = fc.oneof(
      fc.record({
        type: fc.constant('registerNode' as const),
        nodeId: node,
        address: fc.constantFrom('a:1', 'a:2', 'a:3'),
        formatLevel: fc.constantFrom(0, 1, 2, 3),
      }),
      // Later levels (placement, apply checks, named group ids) and store ids.
      fc.record(
        {
          type: fc.constant('registerNode' as const),
          nodeId: node,
          address: fc.constantFrom('a:1', 'a:2', 'a:3'),
          formatLevel: fc.constantFrom(
            FORMAT_LEVEL_PLACE_LIVE_REMOVING,
            FORMAT_LEVEL_META_APPLY_CHECKS,
            FORMAT_LEVEL_CREATE_GROUP_ID,
          ),
          storeId: fc.constantFrom('0'.repeat(32), 'f'.repeat(32)),
          freshStore: fc.boolean(),
        },
        { requiredKeys: ['type', 'nodeId', 'address', 'formatLevel'] },
      ),
      fc.record({
        type: fc.constant('createGroup' as const),
        replicas: fc.uniqueArray(node, { minLength: 1, maxLength: 3 }),
      }),
      fc.record({
        type: fc.constant('createGroup' as const),
        replicas: fc.uniqueArray(node, { minLength: 1, maxLength: 3 }),
        groupId: fc.integer({ min: 1, max: 5 }),
      }),
      fc.record({
        type: fc.constant('putToken' as const),
        name: fc.constantFrom('t1', 't2'),
        sha256: fc.constantFrom('a'.repeat(64), 'b'.repeat(64)),
        roles: fc.constantFrom(['admin'], ['viewer:q*']),
        ttlMs: fc.integer({ min: 0, max: 50 }),
      }),
      fc.record({ type: fc.constant('deleteToken' as const), name: fc.constantFrom('t1', 't2') }),
      fc.record({ type: fc.constant('finishScale' as const) }),
      fc.record({ type: fc.constant('removeGroup' as const), groupId: fc.integer({ min: 1, max: 4 }) }),
      fc.record({
        type: fc.constant('reportLeader' as const),
        groupId: fc.integer({ min: 1, max: 4 }),
        leaderId: node,
        term: fc.integer({ min: 1, max: 5 }),
      }),
      fc.record({
        type: fc.constant('createQueue' as const),
        name,
        config: fc.record({ partitions: fc.integer({ min: 0, max: 6 }) }),
      }),
      fc.record({
        type: fc.constant('updateQueue' as const),
        name,
        update: fc.oneof(
          fc.record({ maxDeliveries: fc.integer({ min: 0, max: 9 }) }),
          fc.record({ partitions: fc.integer({ min: 0, max: 8 }) }),
          fc.record(
            {
              paused: fc.boolean(),
              deadLetterQueue: fc.constantFrom('', 'q2', 'bad name'),
              retryBackoffMinMs: fc.constantFrom(0, 1_000, 700_000),
              retryBackoffMaxMs: fc.constantFrom(0, 5_000),
              messageTtlMs: fc.integer({ min: 0, max: 9 }),
            },
            { requiredKeys: [] },
          ),
        ),
      }),
      fc.record({ type: fc.constant('deleteQueue' as const), name }),
      fc.record({
        type: fc.constant('initMetaMembers' as const),
        voters: fc.uniqueArray(node, { minLength: 0, maxLength: 3 }),
      }),
      fc.record({
        type: fc.constant('startMetaChange' as const),
        add: node,
        remove: node,
        reason: fc.constantFrom('drain' as const, 'dead' as const, 'balance' as const),
      }),
      fc.record({ type: fc.constant('retargetMetaChange' as const), add: node }),
      fc.record({
        type: fc.constant('startReplicaChange' as const),
        groupId: fc.integer({ min: 1, max: 4 }),
        add: node,
        remove: node,
        reason: fc.constantFrom('drain' as const, 'dead' as const, 'balance' as const),
      }),
      fc.record({
        type: fc.constant('startReplicaChange' as const),
        groupId: fc.integer({ min: 1, max: 4 }),
        add: fc.constantFrom('', 'n4'),
        remove: node,
        reason: fc.constant('shrink' as const),
      }),
      fc.record({
        type: fc.constant('retargetReplicaChange' as const),
        groupId: fc.integer({ min: 1, max: 4 }),
        add: node,
      }),
      fc.record({
        type: fc.constant('abandonReplicaChange' as const),
        groupId: fc.integer({ min: 0, max: 4 }),
      }),
      fc.record({
        type: fc.constant('finishReplicaChange' as const),
        groupId: fc.integer({ min: 1, max: 4 }),
      }),
      fc.record({ type: fc.constant('finishMetaChange' as const) }),
      fc.record({ type: fc.constant('finishMetaChange' as const), removed: node }),
      fc.record({ type: fc.constant('abandonMetaChange' as const) }),
      fc.record({ type: fc.constant('setMetaVoters' as const), voters: fc.integer({ min: 0, max: 8 }) }),
      fc.record({
        type: fc.constant('startMetaChange' as const),
        add: fc.constantFrom('', 'n4'),
        remove: fc.constantFrom('', 'n1'),
        reason: fc.constantFrom('grow' as const, 'shrink' as const),
      }),
      fc.record({ type: fc.constant('drainNode' as const), nodeId: node }),
      fc.record({ type: fc.constant('undrainNode' as const), nodeId: node }),
      fc.record({
        type: fc.constant('setReplicationFactor' as const),
        factor: fc.integer({ min: 0, max: 8 }),
        initial: fc.boolean(),
      }),
      fc.record({
        type: fc.constant('recordDataGroups' as const),
        count: fc.integer({ min: -1, max: 10_001 }),
      }),
      fc.record({ type: fc.constant('removeNode' as const), nodeId: node }),
      fc.record({
        type: fc.constant('markSilent' as const),
        nodeId: node,
        sinceMs: fc.integer({ min: -1, max: 45 }),
      }),
      fc.record({ type: fc.constant('markHeard' as const), nodeId: node }),
      ...moveCommands(name, fc.integer({ min: 1, max: 4 }), 4),
      fc.record({ type: fc.constant('scaleDataGroups' as const), groups: fc.integer({ min: 0, max: 4 }) }),
    )
    fc.assert(
      fc.property(fc.array(command, { maxLength: 40 }), fc.nat(40), (commands, cut) => {
        const a = new MetaState()
        const b = new MetaState()
        commands.forEach((c, i) => {
          const decoded = decodeMetaCommand(encodeMetaCommand(c))
          expect(decoded).toEqual(c)
          const ra = a.apply(c, i)
          expect(a.partitionCounts()).toEqual(recount(a))
          groupsAgree(a)
          if (i === cut) b.restore(a.snapshot())
          if (i > cut) {
            expect(b.apply(c, i)).toEqual(ra)
            expect(b.partitionCounts()).toEqual(recount(b))
            groupsAgree(b)
          }
        })
        if (cut < commands.length) expect(b.snapshot()).toEqual(a.snapshot())
      }),
      { numRuns: 300 },
    )
  })

  it('answers groups() and groupsOf() from a restored image, not from what it held before', () => {
    const s = stateWith(3, [['n1', 'n2']])
    expect(s.groupsOf('n3')).toEqual([])
    const other = stateWith(3, [['n1', 'n2'], ['n3']])
    s.restore(other.snapshot())
    expect(s.groups().map((g) => g.groupId)).toEqual([1, 2])
    expect(s.groupsOf('n3').map((g) => g.groupId)).toEqual([2])
  })

  it("keeps each data group's partition count exact as queues come, go and move (property)", () => {
    const name = fc.constantFrom('q1', 'q2', 'q3')
    const group = fc.integer({ min: 1, max: 3 })
    const command: fc.Arbitrary<MetaCommand> = fc.oneof(
      fc.record({
        type: fc.constant('createQueue' as const),
        name,
        config: fc.record({ partitions: fc.integer({ min: 1, max: 4 }) }),
      }),
      fc.record({ type: fc.constant('deleteQueue' as const), name }),
      fc.record({
        type: fc.constant('updateQueue' as const),
        name,
        update: fc.record({ partitions: fc.integer({ min: 1, max: 6 }) }),
      }),
      ...moveCommands(name, group, 3),
      fc.record({ type: fc.constant('createGroup' as const), replicas: fc.constant(['n1', 'n2', 'n3']) }),
      fc.record({ type: fc.constant('removeGroup' as const), groupId: group }),
    )
    let moved = 0
    fc.assert(
      fc.property(fc.array(command, { minLength: 5, maxLength: 40 }), fc.nat(40), (commands, cut) => {
        // Two groups holding q1 and q2 to begin with, so that moves can start at once.
        const a = cluster(3, 2)
        a.apply({ type: 'createQueue', name: 'q1', config: { partitions: 3 } }, 0)
        a.apply({ type: 'createQueue', name: 'q2', config: { partitions: 2 } }, 0)
        const b = new MetaState()
        commands.forEach((c, i) => {
          const r = a.apply(c, i)
          if (c.type === 'completeMove' && r.ok) moved++
          expect(a.partitionCounts()).toEqual(recount(a))
          pagesAgree(a)
          if (i === cut) b.restore(a.snapshot())
          if (i > cut) {
            b.apply(c, i)
            expect(b.partitionCounts()).toEqual(recount(b))
            pagesAgree(b)
          }
        })
      }),
      { numRuns: 300 },
    )
    // The property saw moves complete (it would prove little otherwise).
    expect(moved).toBeGreaterThan(0)
  })

  it.each([
    [FORMAT_LEVEL_CREATE_PARTITIONS_EPOCH, true],
    [FORMAT_LEVEL_CREATE_PARTITIONS_EPOCH - 1, false],
  ])(
    'at format level %i tells a client that routed a deleted queue of the same name to refresh (STALE_ROUTE): %s',
    (level, refused) => {
      const s = new MetaState()
      for (let i = 1; i <= 3; i++)
        s.apply(
          { type: 'registerNode', nodeId: `n${i}`, address: `127.0.0.1:700${i}`, formatLevel: level },
          1,
        )
      for (let g = 0; g < 2; g++) s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 2)
      s.apply({ type: 'createQueue', name: 'q', config: { partitions: 2 } }, 3)
      const old = routeOf(s, s.queue('q') as QueueRecord)
      s.apply({ type: 'deleteQueue', name: 'q' }, 4)
      s.apply({ type: 'createQueue', name: 'q', config: { partitions: 4 } }, 5)
      const now = routeOf(s, s.queue('q') as QueueRecord)
      // Partitions 0 and 1 are where the old queue's were: its client's requests reach them.
      expect(now.partitions.slice(0, 2).map((p) => p.groupId)).toEqual(old.partitions.map((p) => p.groupId))
      // A data request routed at an older epoch than the partitions' is refused (node.ts).
      expect(old.routeEpoch < now.partitionsEpoch).toBe(refused)
      expect(now.routeEpoch).toBeGreaterThanOrEqual(now.partitionsEpoch)
      // Replayed or restored, a replica holds the same.
      const copy = new MetaState()
      copy.restore(s.snapshot())
      expect(copy.snapshot()).toEqual(s.snapshot())
      expect(copy.growEpoch()).toBe(s.growEpoch())
    },
  )

  it.each([
    [FORMAT_LEVEL_CREATE_GROUP_ID, false],
    [FORMAT_LEVEL_CREATE_GROUP_ID - 1, true],
  ])(
    'at format level %i refuses a createGroup naming an id another group took (a create decided again after one committed late): applied %s',
    (level, applied) => {
      const s = new MetaState()
      for (let i = 1; i <= 3; i++)
        s.apply(
          { type: 'registerNode', nodeId: `n${i}`, address: `127.0.0.1:700${i}`, formatLevel: level },
          1,
        )
      const replicas = ['n1', 'n2', 'n3']
      expect(s.nextGroupId()).toBe(1)
      expect(s.apply({ type: 'createGroup', replicas, groupId: 1 }, 2)).toMatchObject({
        ok: true,
        value: { groupId: 1 },
      })
      // Decided while group 1's create had an unknown outcome: it named id 1 again.
      const again = s.apply({ type: 'createGroup', replicas, groupId: 1 }, 3)
      expect(again.ok).toBe(applied)
      if (!applied)
        expect(again).toMatchObject({ message: /data group 1 was to be created, but the next group id is 2/ })
      expect(s.groups()).toHaveLength(applied ? 2 : 1)
      // Named right, or not named (a controller below the level), it is created.
      expect(s.apply({ type: 'createGroup', replicas, groupId: s.nextGroupId() }, 4).ok).toBe(true)
      expect(s.apply({ type: 'createGroup', replicas }, 5).ok).toBe(true)
      // An image keeps the next id.
      const restored = new MetaState()
      restored.restore(s.snapshot())
      expect(restored.nextGroupId()).toBe(s.nextGroupId())
    },
  )

  it.each([
    [FORMAT_LEVEL_META_APPLY_CHECKS, false],
    [FORMAT_LEVEL_META_APPLY_CHECKS - 1, true],
  ])(
    'at format level %i refuses (as its handlers do) a meta group grown past 7 voters and a dead-letter queue that is no name: applied %s',
    (level, applied) => {
      const s = new MetaState()
      for (let i = 1; i <= 8; i++)
        s.apply(
          { type: 'registerNode', nodeId: `n${i}`, address: `127.0.0.1:700${i}`, formatLevel: level },
          1,
        )
      s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 2)
      s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7'] }, 3)
      const grow = s.apply({ type: 'startMetaChange', add: 'n8', remove: '', reason: 'grow' }, 4)
      expect(grow.ok).toBe(applied)
      if (!applied) expect(grow).toMatchObject({ message: /has 7 voters, the most it may have \(7\)/ })
      s.apply({ type: 'createQueue', name: 'q', config: {} }, 5)
      const dlq = s.apply(
        { type: 'updateQueue', name: 'q', update: { deadLetterQueue: 'x'.repeat(1_000) } },
        6,
      )
      expect(dlq.ok).toBe(applied)
      expect(s.queue('q')?.config.deadLetterQueue.length).toBe(applied ? 1_000 : 0)
    },
  )

  it("records the meta group's founders once, then changes its members one at a time", () => {
    const s = cluster(4, 1)
    expect(s.metaMembers()).toBeUndefined()
    // Nothing can change before the founders are recorded.
    expect(s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'dead' }, 3)).toMatchObject({
      ok: false,
      message: 'the meta group members are not recorded yet',
    })
    expect(s.apply({ type: 'initMetaMembers', voters: ['n3', 'n1', 'n2'] }, 3)).toEqual({
      ok: true,
      value: ['n1', 'n2', 'n3'],
    })
    // A second record (a later meta leader) changes nothing.
    expect(s.apply({ type: 'initMetaMembers', voters: ['n4'] }, 3)).toMatchObject({ ok: true })
    expect(s.metaMembers()).toEqual(['n1', 'n2', 'n3'])
    const bad: [MetaCommand, string][] = [
      [
        { type: 'startMetaChange', add: 'n4', remove: 'n4', reason: 'dead' },
        'node n4 is not a meta group member',
      ],
      [{ type: 'startMetaChange', add: 'n9', remove: 'n1', reason: 'dead' }, 'node n9 is not registered'],
      [
        { type: 'startMetaChange', add: 'n2', remove: 'n1', reason: 'dead' },
        'node n2 is a meta group member already',
      ],
      [
        { type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'balance' },
        'unknown meta change reason balance',
      ],
      [{ type: 'finishMetaChange' }, 'the meta group is not changing its members'],
      [{ type: 'retargetMetaChange', add: 'n4' }, 'the meta group is not changing its members'],
    ]
    for (const [c, message] of bad)
      expect(s.apply(c, 4)).toEqual({ ok: false, code: 'INVALID_ARGUMENT', message })
    expect(s.metaChange()).toBeUndefined()
    const started = s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'dead' }, 5)
    expect(started).toEqual({
      ok: true,
      value: { groupId: 0, add: 'n4', remove: 'n1', reason: 'dead', startedAtMs: 5 },
    })
    expect(s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n2', reason: 'dead' }, 6)).toMatchObject({
      ok: false,
      message: 'the meta group is changing its members already',
    })
    // Retargeted (its node lost): another node, not a member, not the same one.
    expect(s.apply({ type: 'retargetMetaChange', add: 'n4' }, 6)).toMatchObject({
      ok: false,
      message: 'node n4 is a meta group member or being added already',
    })
    expect(s.apply({ type: 'retargetMetaChange', add: 'n2' }, 6)).toMatchObject({ ok: false })
    // The change survives a snapshot (a new meta leader resumes it).
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.metaChange()).toEqual(s.metaChange())
    const epoch = s.routeEpoch
    expect(s.apply({ type: 'finishMetaChange' }, 7)).toEqual({ ok: true, value: ['n2', 'n3', 'n4'] })
    expect(s.metaChange()).toBeUndefined()
    expect(s.routeEpoch).toBe(epoch) // routes name no meta members
  })

  it('keeps its format level while the meta group shrinks (the change adds nobody)', () => {
    const s = new MetaState()
    for (let i = 1; i <= 5; i++)
      s.apply({ type: 'registerNode', nodeId: `n${i}`, address: `n${i}:1`, formatLevel: FORMAT_LEVEL }, 1)
    s.apply({ type: 'createGroup', replicas: ['n1', 'n2', 'n3'] }, 2)
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3', 'n4', 'n5'] }, 2)
    expect(s.apply({ type: 'setMetaVoters', voters: 3 }, 3)).toMatchObject({ ok: true })
    expect(s.apply({ type: 'startMetaChange', add: '', remove: 'n5', reason: 'shrink' }, 4)).toMatchObject({
      ok: true,
    })
    expect(s.formatLevel()).toBe(FORMAT_LEVEL) // was 1: the empty id counted as a node of level 1
    expect(s.formatLevelUnknown()).toBeUndefined() // was " not registered"
  })

  it('grows and shrinks the meta group: one side of the change is empty, and the size is checked', () => {
    const s = cluster(4, 1)
    expect(s.apply({ type: 'setMetaVoters', voters: 5 }, 2)).toMatchObject({
      ok: false,
      message: 'the meta group members are not recorded yet',
    })
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    const before = s.snapshot()
    const bad: [MetaCommand, string][] = [
      [{ type: 'setMetaVoters', voters: 4 }, 'the meta group can keep 1, 3, 5, 7 voters, not 4'],
      [{ type: 'setMetaVoters', voters: 9 }, 'the meta group can keep 1, 3, 5, 7 voters, not 9'],
      [
        { type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'grow' },
        'growing the meta group removes no voter',
      ],
      [
        { type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'shrink' },
        'shrinking the meta group adds no voter',
      ],
      [
        { type: 'startMetaChange', add: '', remove: 'n4', reason: 'shrink' },
        'node n4 is not a meta group member',
      ],
      [
        { type: 'startMetaChange', add: 'n2', remove: '', reason: 'grow' },
        'node n2 is a meta group member already',
      ],
      [
        { type: 'startMetaChange', add: 'n4', remove: 'n1', reason: 'balance' },
        'unknown meta change reason balance',
      ],
      [
        { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n1', reason: 'grow' },
        'a change growing data group 1 removes no replica',
      ],
      [
        { type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n1', reason: 'shrink' },
        'a change shrinking data group 1 adds no replica',
      ],
    ]
    for (const [c, message] of bad)
      expect(s.apply(c, 4)).toEqual({ ok: false, code: 'INVALID_ARGUMENT', message })
    expect(s.snapshot()).toEqual(before)
    expect(s.apply({ type: 'setMetaVoters', voters: 5 }, 5)).toEqual({ ok: true, value: 5 })
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.metaVotersWanted()).toBe(5)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: '', reason: 'grow' }, 6)
    expect(s.apply({ type: 'finishMetaChange' }, 7)).toEqual({ ok: true, value: ['n1', 'n2', 'n3', 'n4'] })
    s.apply({ type: 'startMetaChange', add: '', remove: 'n2', reason: 'shrink' }, 8)
    expect(s.apply({ type: 'retargetMetaChange', add: 'n2' }, 8)).toMatchObject({
      ok: false,
      message: 'the meta group is adding no voter',
    })
    expect(s.apply({ type: 'finishMetaChange' }, 9)).toEqual({ ok: true, value: ['n1', 'n3', 'n4'] })
    // Down to one voter, never none.
    s.apply({ type: 'startMetaChange', add: '', remove: 'n1', reason: 'shrink' }, 10)
    s.apply({ type: 'finishMetaChange' }, 10)
    s.apply({ type: 'startMetaChange', add: '', remove: 'n3', reason: 'shrink' }, 10)
    s.apply({ type: 'finishMetaChange' }, 10)
    expect(s.apply({ type: 'startMetaChange', add: '', remove: 'n4', reason: 'shrink' }, 11)).toMatchObject({
      ok: false,
      message: 'the meta group keeps at least one voter',
    })
  })

  it('runs at the lowest format level of the nodes holding replicas', () => {
    const s = new MetaState()
    expect(s.formatLevel()).toBe(1) // no node yet
    const register = (nodeId: string, formatLevel?: number) =>
      s.apply(
        { type: 'registerNode', nodeId, address: `${nodeId}:1`, ...(formatLevel ? { formatLevel } : {}) },
        1,
      )
    register('n1', 2)
    register('n2', 2)
    expect(s.formatLevel()).toBe(2) // no replicas yet: every registered node counts
    register('n3') // a version that reports no level: 1
    expect(s.formatLevel()).toBe(1)
    s.apply({ type: 'createGroup', replicas: ['n1', 'n2'] }, 2)
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2'] }, 2)
    expect(s.formatLevel()).toBe(2) // n3 holds nothing
    s.apply({ type: 'startReplicaChange', groupId: 1, add: 'n3', remove: 'n2', reason: 'balance' }, 3)
    expect(s.formatLevel()).toBe(1) // n3 is being added: it will read the log
    const epoch = s.routeEpoch
    expect(register('n3', 2)).toMatchObject({ ok: true, value: { formatLevel: 2 } })
    expect(s.routeEpoch).toBe(epoch) // a level is no route change
    expect(s.formatLevel()).toBe(2)
    // A node back on an older version lowers the level again.
    register('n1', 1)
    expect(s.formatLevel()).toBe(1)
    expect(s.apply({ type: 'registerNode', nodeId: 'n1', address: 'n1:1', formatLevel: 0 }, 4)).toEqual({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: 'format level 0 is not a positive integer',
    })
  })

  it("records a node's store id and refuses the node id from another store", () => {
    const s = new MetaState()
    const a = 'a'.repeat(32)
    const b = 'b'.repeat(32)
    let nowMs = 1_000
    const register = (storeId?: string, freshStore?: boolean, address = 'n1:1') =>
      s.apply(
        { type: 'registerNode', nodeId: 'n1', address, ...(storeId ? { storeId } : {}), freshStore },
        nowMs,
      )
    // Registered before store ids (no id): a later registration of the same data dir adopts one.
    expect(register()).toMatchObject({ ok: true })
    expect(s.node('n1')?.storeId).toBeUndefined()
    // A data dir created at its process's start, the registration a minute old or less: a new
    // cluster's founder whose first answers were lost (it still says fresh). Not recorded here.
    nowMs += FRESH_STORE_GRACE_MS
    const copy0 = new MetaState()
    copy0.restore(s.snapshot())
    expect(
      copy0.apply(
        { type: 'registerNode', nodeId: 'n1', address: 'n1:1', storeId: a, freshStore: true },
        nowMs,
      ),
    ).toMatchObject({ ok: true, value: { storeId: a } })
    // Older: known from before store ids, with a data dir created at this start: it lost its data.
    nowMs += 1
    expect(register(a, true)).toEqual({
      ok: false,
      code: 'INVALID_ARGUMENT',
      message: storeReplacedMessage('n1'),
    })
    expect(s.node('n1')?.storeId).toBeUndefined()
    expect(register(a, false)).toMatchObject({ ok: true, value: { storeId: a } })
    // Another store (a wiped data dir, or a second process under the id): refused, fresh or not.
    for (const fresh of [true, false]) {
      const refused = register(b, fresh)
      expect(refused).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' })
      expect(saysStoreReplaced((refused as { message: string }).message)).toBe(true)
    }
    // The same store: a new address is taken; no store id (an older version) keeps the recorded one.
    expect(register(a, true, 'n1:2')).toMatchObject({ ok: true, value: { address: 'n1:2', storeId: a } })
    expect(register(undefined, false, 'n1:3')).toMatchObject({
      ok: true,
      value: { address: 'n1:3', storeId: a },
    })
    // A node never registered takes any store, even one created at this start.
    expect(
      s.apply({ type: 'registerNode', nodeId: 'n2', address: 'n2:1', storeId: b, freshStore: true }, 1),
    ).toMatchObject({ ok: true, value: { storeId: b } })
    expect(
      s.apply({ type: 'registerNode', nodeId: 'n3', address: 'n3:1', storeId: 'A'.repeat(32) }, 1),
    ).toMatchObject({ ok: false, message: expect.stringContaining('is not 32 lowercase hex digits') })
    // In the snapshot.
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.node('n1')?.storeId).toBe(a)
    expect(copy.snapshot()).toEqual(s.snapshot())
  })

  it('records since when a node has been silent: the first mark stands, a heartbeat clears it', () => {
    const s = cluster(3, 1)
    expect(s.apply({ type: 'markSilent', nodeId: 'n3', sinceMs: 7 }, 9)).toMatchObject({ ok: true })
    expect(s.node('n3')?.silentSinceMs).toBe(7)
    // A later leader's mark (its own takeover) does not move it.
    s.apply({ type: 'markSilent', nodeId: 'n3', sinceMs: 9 }, 10)
    expect(s.node('n3')?.silentSinceMs).toBe(7)
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.node('n3')?.silentSinceMs).toBe(7)
    const before = s.snapshot()
    const bad: [MetaCommand, string][] = [
      [{ type: 'markSilent', nodeId: 'n9', sinceMs: 1 }, 'node n9 is not registered'],
      [
        { type: 'markSilent', nodeId: 'n2', sinceMs: 12 },
        "silent since 12 is not a time in milliseconds up to the entry's (11)",
      ],
      [
        { type: 'markSilent', nodeId: 'n2', sinceMs: -1 },
        "silent since -1 is not a time in milliseconds up to the entry's (11)",
      ],
      [{ type: 'markHeard', nodeId: 'n9' }, 'node n9 is not registered'],
    ]
    for (const [c, message] of bad)
      expect(s.apply(c, 11)).toEqual({ ok: false, code: 'INVALID_ARGUMENT', message })
    expect(s.snapshot()).toEqual(before)
    expect(s.apply({ type: 'markHeard', nodeId: 'n3' }, 12)).toMatchObject({ ok: true })
    expect(s.node('n3')?.silentSinceMs).toBeUndefined()
    expect(s.node('n3')).toEqual({ nodeId: 'n3', address: '127.0.0.1:7003', registeredAtMs: 1 })
    // A new registration (a changed address) is a node heard from, too.
    s.apply({ type: 'markSilent', nodeId: 'n2', sinceMs: 3 }, 12)
    s.apply({ type: 'registerNode', nodeId: 'n2', address: '127.0.0.1:7102' }, 13)
    expect(s.node('n2')?.silentSinceMs).toBeUndefined()
  })

  it('counts a meta replica among what a drained node still holds', () => {
    const s = cluster(4, 1)
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    expect(s.apply({ type: 'drainNode', nodeId: 'n1' }, 4)).toEqual({ ok: true, value: 2 })
    expect(s.apply({ type: 'drainNode', nodeId: 'n4' }, 4)).toEqual({ ok: true, value: 0 })
    // A node being added to the meta group holds a vote too: not drained yet.
    s.apply({ type: 'registerNode', nodeId: 'n5', address: '127.0.0.1:7005' }, 5)
    s.apply({ type: 'startMetaChange', add: 'n5', remove: '', reason: 'grow' }, 5)
    expect(s.apply({ type: 'drainNode', nodeId: 'n5' }, 6)).toEqual({ ok: true, value: 1 })
    // Only the answer counts it: what is stored is the drain alone.
    const before = s.snapshot()
    expect(s.apply({ type: 'drainNode', nodeId: 'n5' }, 7)).toEqual({ ok: true, value: 1 })
    expect(s.snapshot()).toEqual(before)
    s.apply({ type: 'finishMetaChange' }, 8)
    expect(s.apply({ type: 'drainNode', nodeId: 'n5' }, 9)).toEqual({ ok: true, value: 1 })
  })

  it('undoes a drain: the node is a candidate again, kept through a snapshot; an unknown node is refused', () => {
    const s = cluster(4, 1)
    expect(s.apply({ type: 'drainNode', nodeId: 'n2' }, 4).ok).toBe(true)
    expect(s.draining('n2')).toBe(true)
    expect(s.apply({ type: 'undrainNode', nodeId: 'n2' }, 5)).toEqual({ ok: true, value: true })
    expect(s.draining('n2')).toBe(false)
    expect(s.apply({ type: 'undrainNode', nodeId: 'n2' }, 6)).toEqual({ ok: true, value: false })
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.draining('n2')).toBe(false)
    expect(s.apply({ type: 'undrainNode', nodeId: 'n9' }, 7)).toMatchObject({
      ok: false,
      message: 'node n9 is not registered',
    })
  })

  it('keeps the replication factor, through a snapshot; refuses one out of 1 to 7', () => {
    const s = cluster(3, 1)
    expect(s.replicationFactor()).toBeUndefined()
    expect(s.apply({ type: 'setReplicationFactor', factor: 3 }, 4)).toEqual({ ok: true, value: 0 })
    expect(s.apply({ type: 'setReplicationFactor', factor: 5 }, 5)).toEqual({ ok: true, value: 3 })
    // A first meta leader's record of its own setting, landing late, keeps the operator's.
    expect(s.apply({ type: 'setReplicationFactor', factor: 3, initial: true }, 5)).toEqual({
      ok: true,
      value: 5,
    })
    expect(s.replicationFactor()).toBe(5)
    const before = s.snapshot()
    for (const factor of [0, 8, 2.5, Number.NaN]) {
      expect(s.apply({ type: 'setReplicationFactor', factor }, 6)).toMatchObject({
        ok: false,
        message: `the replication factor must be an integer from 1 to 7, not ${factor}`,
      })
    }
    expect(s.snapshot()).toEqual(before)
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.replicationFactor()).toBe(5)
    expect(copy.snapshot()).toEqual(s.snapshot())
  })

  it('records the data group count once, through a snapshot; refuses one out of 0 to 10,000', () => {
    const s = cluster(3, 1)
    expect(s.dataGroups()).toBeUndefined()
    const before = s.snapshot()
    for (const count of [-1, 10_001, 2.5, Number.NaN]) {
      expect(s.apply({ type: 'recordDataGroups', count }, 4)).toMatchObject({
        ok: false,
        message: `the data group count must be an integer from 0 (as many as live nodes) to 10000, not ${count}`,
      })
    }
    expect(s.snapshot()).toEqual(before)
    expect(s.apply({ type: 'recordDataGroups', count: 0 }, 4)).toEqual({ ok: true, value: 0 })
    // Another meta leader's own setting, recorded later, does not replace the first.
    expect(s.apply({ type: 'recordDataGroups', count: 6 }, 5)).toEqual({ ok: true, value: 0 })
    expect(s.dataGroups()).toBe(0)
    const copy = new MetaState()
    copy.restore(s.snapshot())
    expect(copy.dataGroups()).toBe(0)
    expect(copy.snapshot()).toEqual(s.snapshot())
  })

  it('shrinks a data group by one replica, adding none; refuses a shrink that adds one, and a retarget of it', () => {
    const s = cluster(3, 1)
    const refused = (command: MetaCommand, message: string) => {
      const before = s.snapshot()
      expect(s.apply(command, 5)).toMatchObject({ ok: false, message })
      expect(s.snapshot()).toEqual(before)
    }
    const shrink = (add: string, remove: string): MetaCommand => ({
      type: 'startReplicaChange',
      groupId: 1,
      add,
      remove,
      reason: 'shrink',
    })
    refused(shrink('n3', 'n1'), 'a change shrinking data group 1 adds no replica')
    refused(shrink('', 'n9'), 'node n9 is not a replica of data group 1')
    expect(s.apply(shrink('', 'n2'), 5)).toMatchObject({
      ok: true,
      value: { add: '', remove: 'n2', reason: 'shrink' },
    })
    expect(s.groupsOf('n2').map((g) => g.groupId)).toEqual([1])
    refused(
      { type: 'retargetReplicaChange', groupId: 1, add: 'n2' },
      'data group 1 is shrinking: it adds no replica',
    )
    expect(s.apply({ type: 'finishReplicaChange', groupId: 1 }, 6).ok).toBe(true)
    expect(s.group(1)?.replicas).toEqual(['n1', 'n3'])
    expect(s.groupsOf('n2')).toEqual([])
    expect(s.apply(shrink('', 'n3'), 7).ok).toBe(true)
    expect(s.apply({ type: 'finishReplicaChange', groupId: 1 }, 8).ok).toBe(true)
    refused(shrink('', 'n1'), 'data group 1 has one replica, the fewest a group may have')
  })

  it('finishes a shrink with the voter its leader removed instead; refuses that for any other change', () => {
    const s = cluster(4, 1)
    s.apply({ type: 'reportLeader', groupId: 1, leaderId: 'n2', term: 3 }, 4)
    const refused = (command: MetaCommand, message: string) => {
      const before = s.snapshot()
      expect(s.apply(command, 5)).toMatchObject({ ok: false, message })
      expect(s.snapshot()).toEqual(before)
    }
    expect(
      s.apply({ type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'balance' }, 5).ok,
    ).toBe(true)
    refused(
      { type: 'finishReplicaChange', groupId: 1, removed: 'n2' },
      'data group 1 is not shrinking: it removes n3',
    )
    expect(s.apply({ type: 'finishReplicaChange', groupId: 1 }, 6).ok).toBe(true)
    expect(s.group(1)?.replicas).toEqual(['n1', 'n2', 'n4'])
    expect(
      s.apply({ type: 'startReplicaChange', groupId: 1, add: '', remove: 'n4', reason: 'shrink' }, 7).ok,
    ).toBe(true)
    refused(
      { type: 'finishReplicaChange', groupId: 1, removed: 'n3' },
      'node n3 is not a replica of data group 1',
    )
    expect(s.apply({ type: 'finishReplicaChange', groupId: 1, removed: 'n2' }, 8).ok).toBe(true)
    // n2 is gone, not n4; it led, so the group's leader is not known until the next report.
    expect(s.group(1)).toMatchObject({ replicas: ['n1', 'n4'], leaderId: '' })
    expect(s.replicaChanges()).toEqual([])
  })

  it('removes a node only once it holds nothing, and forgets its drain', () => {
    const s = cluster(4, 1)
    const refused = (nodeId: string, message: RegExp) => {
      const before = s.snapshot()
      const r = s.apply({ type: 'removeNode', nodeId }, 5)
      expect(r).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT' })
      expect((r as { message: string }).message).toMatch(message)
      expect(s.snapshot()).toEqual(before)
    }
    // The meta group's members are not recorded: any node could be one.
    refused('n4', /members are not recorded yet/)
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 3)
    refused('n9', /node n9 is not registered/)
    refused('n1', /n1 still holds replicas of data groups 1 and a meta group vote: drain it first/)
    // Being added to a group is holding it; the replica being replaced still holds it too.
    s.apply({ type: 'startReplicaChange', groupId: 1, add: 'n4', remove: 'n3', reason: 'drain' }, 4)
    refused('n4', /n4 still holds replicas of data groups 1: drain it first/)
    s.apply({ type: 'finishReplicaChange', groupId: 1 }, 4)
    refused('n3', /n3 still holds a meta group vote/)
    // Being added to the meta group is holding a vote.
    s.apply({ type: 'registerNode', nodeId: 'n5', address: '127.0.0.1:7005' }, 4)
    expect(s.apply({ type: 'startMetaChange', add: 'n5', remove: 'n2', reason: 'drain' }, 4)).toMatchObject({
      ok: true,
    })
    refused('n5', /n5 still holds a meta group vote/)
    // n4 took n3's replica; a drained n3 outside the meta group holds nothing.
    s.apply({ type: 'finishMetaChange' }, 4)
    s.apply({ type: 'startMetaChange', add: 'n4', remove: 'n3', reason: 'drain' }, 5)
    s.apply({ type: 'finishMetaChange' }, 5)
    s.apply({ type: 'drainNode', nodeId: 'n3' }, 5)
    expect(s.metaMembers()).toEqual(['n1', 'n4', 'n5'])
    expect(s.apply({ type: 'removeNode', nodeId: 'n3' }, 6)).toMatchObject({ ok: true })
    expect(s.node('n3')).toBeUndefined()
    expect(s.nodes().map((n) => n.nodeId)).toEqual(['n1', 'n2', 'n4', 'n5'])
    // It may not come back under its id (a decommissioned node started again by mistake), also
    // after a snapshot; another id may take its address.
    const again = s.apply({ type: 'registerNode', nodeId: 'n3', address: '127.0.0.1:7003' }, 7)
    expect(again).toEqual({ ok: false, code: 'INVALID_ARGUMENT', message: removedNodeMessage('n3') })
    expect(saysNodeRemoved(`cannot register node n3: ${removedNodeMessage('n3')}`)).toBe(true)
    const restored = new MetaState()
    restored.restore(s.snapshot())
    expect(restored.wasRemovedNode('n3')).toBe(true)
    expect(restored.apply({ type: 'registerNode', nodeId: 'n3', address: 'x:1' }, 8)).toMatchObject({
      ok: false,
    })
    expect(
      restored.apply({ type: 'registerNode', nodeId: 'n9', address: '127.0.0.1:7003' }, 8),
    ).toMatchObject({
      ok: true,
    })
    expect(s.draining('n3')).toBe(false)
  })

  it('remembers the last removedNodesKept removed ids', () => {
    const s = cluster(3, 1)
    s.apply({ type: 'initMetaMembers', voters: ['n1', 'n2', 'n3'] }, 2)
    const n = META_LIMITS.removedNodesKept + 1
    for (let i = 0; i < n; i++) {
      s.apply({ type: 'registerNode', nodeId: `x${i}`, address: `10.0.0.1:${i + 1}` }, 3)
      expect(s.apply({ type: 'removeNode', nodeId: `x${i}` }, 3)).toMatchObject({ ok: true })
    }
    expect(s.wasRemovedNode('x0')).toBe(false) // the oldest, forgotten
    expect(s.wasRemovedNode('x1')).toBe(true)
    expect(s.wasRemovedNode(`x${n - 1}`)).toBe(true)
  })

  it('decodes only known commands', () => {
    expect(decodeMetaCommand(new TextEncoder().encode('{"type":"dropEverything"}'))).toBeUndefined()
    expect(decodeMetaCommand(Uint8Array.of(0xff, 0xfe))).toBeUndefined()
    expect(decodeMetaCommand(new TextEncoder().encode('null'))).toBeUndefined()
    // An object that throws when made a string (as a refusal naming it would): no command.
    for (const json of [
      '{"type":"removeGroup","groupId":{"toString":0}}',
      '{"type":"createQueue","name":"q","config":{"partitions":{"valueOf":1,"toString":2}}}',
    ]) {
      expect(decodeMetaCommand(new TextEncoder().encode(json)), json).toBeUndefined()
    }
  })

  it('refuses queue settings of the wrong type, and a grown group past 7 replicas', () => {
    const s = stateWith(8, [['n1', 'n2', 'n3', 'n4', 'n5', 'n6', 'n7']])
    const before = s.snapshot()
    expect(
      s.apply({ type: 'createQueue', name: 'q', config: { strictPriority: 'yes' as unknown as boolean } }, 2),
    ).toMatchObject({ ok: false, message: 'strictPriority must be true or false, got yes' })
    expect(
      s.apply({ type: 'createQueue', name: 'q', config: { deadLetterQueue: ['x'] as unknown as string } }, 2),
    ).toMatchObject({ ok: false, message: 'deadLetterQueue must be a queue name or empty, got x' })
    expect(
      s.apply({ type: 'startReplicaChange', groupId: 1, add: 'n8', remove: '', reason: 'grow' }, 3),
    ).toMatchObject({ ok: false, message: 'data group 1 has 7 replicas, the most a group may have' })
    expect(s.snapshot()).toEqual(before)
  })
})
