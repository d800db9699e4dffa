import { createHash } from 'node:crypto'
import {
  ErrorCode,
  FORMAT_LEVEL_CREATE_GROUP_ID,
  FORMAT_LEVEL_CREATE_PARTITIONS_EPOCH,
  FORMAT_LEVEL_META_APPLY_CHECKS,
  FORMAT_LEVEL_PLACE_LIVE_REMOVING,
  META_VOTER_COUNTS,
  queueNameProblem,
  REPLICAS_PER_GROUP_MAX,
} from '@mq/protocol'
import type { MetaCommand } from './meta-commands'
import { isStoreId, storeConflict } from './node-store'
import {
  applyQueueConfigUpdate,
  QUEUE_DEFAULTS,
  type QueueSettings,
  resolveQueueConfig,
} from './queue-config'
import { type TokenRecord, TokenRegistry } from './token-registry'

export interface NodeRecord {
  readonly nodeId: string
  readonly address: string
  readonly registeredAtMs: number
  /** The format level the node's version reads and writes, as it last reported (absent: 1). */
  readonly formatLevel?: number
  /**
   * Since when a meta leader has not heard from the node (its last heartbeat, or that leader's
   * takeover when it never heard one), recorded once it counted as dead (`markSilent`) and
   * cleared when a meta leader hears from it again (`markHeard`, or a new registration): a
   * new meta leader counts the replacement timeout from here, not from its own takeover.
   */
  readonly silentSinceMs?: number
  /**
   * The id of the node's store (its data dir), recorded from FORMAT_LEVEL_STORE_ID: the node
   * id may then only register again from that store (node-store.ts). Absent: registered
   * before.
   */
  readonly storeId?: string
}

export interface GroupRecord {
  readonly groupId: number
  /** Node ids of the group's replicas. */
  readonly replicas: readonly string[]
  /**
   * The replicas it was created with: its log starts with them as voters (entries 1..n), so
   * only they may bootstrap a replica with that membership; any other node starts empty and
   * learns the membership from the leader. (Absent in images older than replica changes.)
   */
  readonly founders?: readonly string[]
  /** The last leader reported for the group ('' when none yet) and the term it led. */
  readonly leaderId: string
  readonly leaderTerm: number
  readonly createdAtMs: number
}

/** A partition's storage address (claim 5): the data group and the engine that hold it. */
export interface PartitionRecord {
  readonly partition: number
  readonly groupId: number
  readonly engine: string
}

export interface QueueRecord {
  /**
   * Unique for the life of the cluster: a queue deleted and created again under the same
   * name is a new queue, and its partitions are new partitions (nothing of the old one shows).
   */
  readonly queueId: number
  readonly name: string
  readonly config: QueueSettings
  readonly partitions: readonly PartitionRecord[]
  readonly createdAtMs: number
  /**
   * The route epoch from which the queue has its current partitions: its creation's (from
   * format level 30; absent before), then that of partitions added (an update with a larger
   * `partitions`). A data request routed with an older epoch is answered STALE_ROUTE, so
   * clients learn of the new partitions (or of a queue created again under a deleted name).
   */
  readonly partitionsEpoch?: number
}

export const MovePhase = {
  /** The source group fences the partition and ships its state to the target group. */
  Copy: 'copy',
  /** The partition is routed to the target group; the source group drops its copy. */
  Drop: 'drop',
  /**
   * Given up while copying (its target group lost its majority): the partition stays routed
   * to the source group, which lifts the move's fence (FORMAT_LEVEL_MOVE_ABORT).
   */
  Abort: 'abort',
} as const
export type MovePhase = (typeof MovePhase)[keyof typeof MovePhase]

/** A live move of one partition between data groups (persisted: a new meta leader resumes it). */
export interface MoveRecord {
  readonly moveId: number
  readonly queue: string
  readonly queueId: number
  readonly partition: number
  readonly fromGroup: number
  readonly toGroup: number
  readonly phase: MovePhase
  readonly startedAtMs: number
}

export const ReplicaChangeReason = {
  /** The node being replaced is draining. */
  Drain: 'drain',
  /** The node being replaced was dead for longer than the replacement timeout. */
  Dead: 'dead',
  /** Spreads replicas evenly over the nodes (a node joined). */
  Balance: 'balance',
  /**
   * A replica or voter is added and none removed (`remove` is ''): the meta group up to the
   * size wanted; a data group up to the replication factor (from format level 25).
   */
  Grow: 'grow',
  /**
   * A replica or voter is removed and none added (`add` is ''): the meta group down to the size
   * wanted; a data group down to the replication factor (from format level 34).
   */
  Shrink: 'shrink',
} as const

/** The reasons a data group's replica changes for. */
const DATA_CHANGE_REASONS: readonly string[] = [
  ReplicaChangeReason.Drain,
  ReplicaChangeReason.Dead,
  ReplicaChangeReason.Balance,
  ReplicaChangeReason.Grow,
  ReplicaChangeReason.Shrink,
]

export type ReplicaChangeReason = (typeof ReplicaChangeReason)[keyof typeof ReplicaChangeReason]

/**
 * A membership change of one data group under way: the group's leader adds `add` as a
 * learner, promotes it once caught up, then removes `remove` (single-server changes). The
 * group's replica list changes when the change is finished.
 */
export interface ReplicaChangeRecord {
  readonly groupId: number
  readonly add: string
  readonly remove: string
  readonly reason: ReplicaChangeReason
  readonly startedAtMs: number
}

/** The operator's wanted number of data groups and how far the controller got. */
export interface ScaleRecord {
  readonly targetGroups: number
  /** The groups chosen to go (when shrinking): emptied by moves, then removed. */
  readonly removing: readonly number[]
  readonly movesDone: number
  readonly running: boolean
  readonly startedAtMs: number
}

/** The outcome of applying one command: the same on every replica. */
export type MetaResult<T = unknown> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly code: ErrorCode; readonly message: string }

/** Bounds on the metadata, so that the meta state (kept in memory) stays small. */
export const META_LIMITS = {
  nodesMax: 1_000,
  /** Removed node ids remembered (oldest forgotten first): they cannot register again. */
  removedNodesKept: 1_000,
  groupsMax: 10_000,
  queuesMax: 100_000,
  replicasPerGroupMax: REPLICAS_PER_GROUP_MAX,
  /** Partition moves under way at once. */
  movesMax: 64,
  /**
   * Partitions of all queues together (checked by CreateQueue and UpdateQueue before they
   * propose): ~50 bytes of the meta image each, so the image stays far below the storage's
   * 256-MiB snapshot bound (an audit: 22,000 queues of 256 partitions passed it, and the
   * meta log could no longer be compacted; 45,000 overflowed the image's string).
   */
  partitionsMax: 1_000_000,
} as const

/** What is wrong with `factor` as a replication factor, or undefined when it is one. */
export function replicationFactorError(factor: unknown): string | undefined {
  const max = META_LIMITS.replicasPerGroupMax
  if (typeof factor === 'number' && Number.isInteger(factor) && factor >= 1 && factor <= max) return undefined
  return `the replication factor must be an integer from 1 to ${max}, not ${String(factor)}`
}

interface MetaImage {
  readonly version: 1
  readonly routeEpoch: number
  readonly nextGroupId: number
  readonly nextQueueId?: number
  readonly nextMoveId?: number
  readonly moves?: readonly MoveRecord[]
  readonly scale?: ScaleRecord
  readonly draining?: readonly string[]
  readonly replicaChanges?: readonly ReplicaChangeRecord[]
  /** Absent until the first meta leader recorded the founders (and in older images). */
  readonly metaMembers?: readonly string[]
  readonly metaChange?: ReplicaChangeRecord
  /** Absent until an operator set the meta group's size. */
  readonly metaVotersWanted?: number
  /** Absent until the first meta leader of format level 34 recorded it (and in older images). */
  readonly replicationFactor?: number
  /** Absent until the first meta leader of format level 35 recorded it (and in older images). */
  readonly dataGroups?: number
  /** Node ids removed (RemoveNode), oldest first; absent in older images. */
  readonly removedNodes?: readonly string[]
  /**
   * The latest epochs at which a queue got partitions, and at which one got new settings or
   * was deleted; absent while 0 and in older images (the first then derived from the queues
   * still there, the second 0).
   */
  readonly growEpoch?: number
  readonly changedEpoch?: number
  /** `changedEpoch` as images before 2026-12-01 (21e09ca) named it; read when that is absent. */
  readonly settingsEpoch?: number
  readonly nodes: readonly NodeRecord[]
  readonly groups: readonly GroupRecord[]
  readonly queues: readonly QueueRecord[]
  /** Absent in images of versions that kept no tokens. */
  readonly tokens?: readonly TokenRecord[]
}

/**
 * The meta group's state machine (claims 1–3, 5): the nodes, the data groups and their
 * replicas, the queues with their configs and the storage address of every partition, and
 * the route epoch, which grows whenever a partition's placement changes.
 *
 * Deterministic: `apply` depends only on the state, the command and the entry's leader
 * timestamp, so every replica that applies the same log holds the same state. Bad commands
 * return an error result and change nothing.
 */
export class MetaState {
  #routeEpoch = 1
  #growEpoch = 0
  #changedEpoch = 0
  #nextGroupId = 1
  #nextQueueId = 1
  #nextMoveId = 1
  #scale: ScaleRecord | undefined
  readonly #moves = new Map<number, MoveRecord>()
  readonly #draining = new Set<string>()
  /** Removed node ids, oldest first (at most META_LIMITS.removedNodesKept): they may not register again. */
  #removedNodes: string[] = []
  readonly #replicaChanges = new Map<number, ReplicaChangeRecord>()
  #metaMembers: readonly string[] | undefined
  #metaChange: ReplicaChangeRecord | undefined
  #metaVotersWanted: number | undefined
  #replicationFactor: number | undefined
  #dataGroups: number | undefined
  readonly #nodes = new Map<string, NodeRecord>()
  readonly #groups = new Map<number, GroupRecord>()
  readonly #queues = new Map<string, QueueRecord>()
  /**
   * Partitions per data group id, kept as queues come, go and move (counting them on every
   * queue created made a create cost O(queues): 40,000 queues took ~2.5 ms of every meta
   * replica's CPU per create, most of its apply time).
   */
  readonly #held = new Map<number, number>()
  /**
   * The queue names in order, kept as queues come and go, so that a page of ListQueues costs
   * O(log queues + page) (it sorted every queue per page: the console lists them every 2 s).
   */
  #names: string[] = []
  /** The client tokens kept in the meta group. */
  readonly tokens = new TokenRegistry()
  /** Counts applied commands and restores: what anything derived from this state is cached by. */
  #revision = 0
  /**
   * What `groups()`, `groupsOf()`, `nodes()` and `nodesFingerprint()` derive, kept until the
   * next apply or restore: the meta leader answers every node's heartbeat from them, and sorting
   * and filtering 10,000 groups cost ~1–2 ms per heartbeat (an audit), ~2,000 heartbeats a
   * second at 1,000 nodes.
   */
  #derived: {
    groups?: readonly GroupRecord[]
    byNode?: Map<string, GroupRecord[]>
    nodes?: readonly NodeRecord[]
    nodesFingerprint?: string
  } = {}

  get routeEpoch(): number {
    return this.#routeEpoch
  }

  /**
   * The latest route epoch at which a queue got partitions added; 0 when none (routes cached
   * before it may lack partitions). In the snapshot; an older one's is derived from its queues.
   */
  growEpoch(): number {
    return this.#growEpoch
  }

  /**
   * The latest route epoch at which a queue's settings changed (UpdateQueue) or a queue was
   * deleted; 0 when neither. Routes cached before it may carry old settings (a pause) or name a
   * queue, or an incarnation of a name, that is gone. In the snapshot, like `growEpoch`.
   */
  changedEpoch(): number {
    return this.#changedEpoch
  }

  node(nodeId: string): NodeRecord | undefined {
    return this.#nodes.get(nodeId)
  }

  nodes(): readonly NodeRecord[] {
    this.#derived.nodes ??= [...this.#nodes.values()].sort((a, b) => compare(a.nodeId, b.nodeId))
    return this.#derived.nodes
  }

  /**
   * A fingerprint of every node's id and address: the meta leader leaves the node list out of
   * a heartbeat answer to a node that holds it already (Peer.Heartbeat `nodes_fingerprint`).
   */
  nodesFingerprint(): string {
    if (this.#derived.nodesFingerprint === undefined) {
      const hash = createHash('sha256')
      for (const n of this.nodes()) hash.update(`${n.nodeId}\0${n.address}\n`)
      this.#derived.nodesFingerprint = hash.digest('base64url')
    }
    return this.#derived.nodesFingerprint
  }

  group(groupId: number): GroupRecord | undefined {
    return this.#groups.get(groupId)
  }

  /** Whether data group `groupId` existed and was removed (ids are never reused). */
  wasRemoved(groupId: number): boolean {
    return groupId >= 1 && groupId < this.#nextGroupId && !this.#groups.has(groupId)
  }

  groups(): readonly GroupRecord[] {
    this.#derived.groups ??= [...this.#groups.values()].sort((a, b) => a.groupId - b.groupId)
    return this.#derived.groups
  }

  /** Bumped by every apply and restore (results of reads made before may be out of date since). */
  revision(): number {
    return this.#revision
  }

  /** The id the next data group created will take (ids are never reused). */
  nextGroupId(): number {
    return this.#nextGroupId
  }

  queue(name: string): QueueRecord | undefined {
    return this.#queues.get(name)
  }

  /**
   * Queues whose name starts with `prefix`, after `after`, in name order, at most `limit`;
   * with `scope`, only those it sees, read from the names under its prefixes alone (so a
   * caller who sees few queues of many does not scan them all).
   */
  queues(prefix = '', after = '', limit = Number.POSITIVE_INFINITY, scope?: QueueScope): QueueRecord[] {
    const out: QueueRecord[] = []
    // The first name > after.
    let first = firstAtLeast(this.#names, after)
    if (this.#names[first] === after) first++
    for (const start of scope ? narrowedPrefixes(scope.prefixes, prefix) : [prefix]) {
      // The first name ≥ start and > after.
      let i = Math.max(firstAtLeast(this.#names, start), first)
      for (; i < this.#names.length && out.length < limit; i++) {
        const name = this.#names[i] as string
        if (!name.startsWith(start)) break
        if (scope && !scope.sees(name)) continue
        out.push(this.#queues.get(name) as QueueRecord)
      }
    }
    return out
  }

  /** The scale plan (the last one asked for), if any. */
  get scale(): ScaleRecord | undefined {
    return this.#scale
  }

  /** The partition moves under way, in move id order. */
  moves(): MoveRecord[] {
    return [...this.#moves.values()].sort((a, b) => a.moveId - b.moveId)
  }

  move(moveId: number): MoveRecord | undefined {
    return this.#moves.get(moveId)
  }

  /** Whether node `nodeId` was removed (RemoveNode): it may not register again under that id. */
  wasRemovedNode(nodeId: string): boolean {
    return this.#removedNodes.includes(nodeId)
  }

  /** Whether node `nodeId` is being drained (its replicas move elsewhere). */
  draining(nodeId: string): boolean {
    return this.#draining.has(nodeId)
  }

  /** The data-group membership changes under way, in group id order. */
  replicaChanges(): ReplicaChangeRecord[] {
    return [...this.#replicaChanges.values()].sort((a, b) => a.groupId - b.groupId)
  }

  replicaChange(groupId: number): ReplicaChangeRecord | undefined {
    return this.#replicaChanges.get(groupId)
  }

  /**
   * The meta group's voters as the meta state records them: the founders (recorded by the
   * first meta leader, `initMetaMembers`), then as each finished meta change left them.
   * Undefined until recorded. The meta group's Raft configuration is the authority; this is
   * what the controller plans with and what tells a removed node to drop its meta replica.
   */
  metaMembers(): readonly string[] | undefined {
    return this.#metaMembers
  }

  /** How many voters the meta group is to keep (`setMetaVoters`); undefined: as many as it has. */
  metaVotersWanted(): number | undefined {
    return this.#metaVotersWanted
  }

  /**
   * Replicas per data group (`setReplicationFactor`); undefined until recorded (each meta
   * leader then goes by its own setting).
   */
  replicationFactor(): number | undefined {
    return this.#replicationFactor
  }

  /**
   * The data groups wanted before any scale plan, 0 for as many as live nodes
   * (`recordDataGroups`); undefined until recorded (each meta leader then goes by its own).
   */
  dataGroups(): number | undefined {
    return this.#dataGroups
  }

  /** The change of the meta group's membership under way (group id 0), if any. */
  metaChange(): ReplicaChangeRecord | undefined {
    return this.#metaChange
  }

  /**
   * The cluster's format level: the lowest level reported by the nodes that hold a replica
   * (of a data group or of the meta group, or are being added to one), or by every registered
   * node while none holds one. A node that is down still counts while it holds a replica: it
   * will read the log when it comes back. Leaders write no entry above this level.
   */
  formatLevel(): number {
    return this.#levelOf(this.#holders())
  }

  /**
   * The level placement (`#place`, at apply) reads: as formatLevel, but counting the empty id
   * of a meta change that adds nobody (a shrink) as a holder of level 1, as every version did
   * before formatLevel left it out — an apply rule, so every replica of every version must
   * place alike. Not a change given up (adding and removing nobody: format level 36, which no
   * version counting that id applies).
   */
  #placementLevel(): number {
    const holders = this.#holders()
    if (this.#metaChange?.add === '' && this.#metaChange.remove !== '') holders.add('')
    return this.#levelOf(holders)
  }

  /** The format level node `id` registered with (1 when its record carries none, or there is none). */
  nodeFormatLevel(id: string): number {
    return this.#nodes.get(id)?.formatLevel ?? 1
  }

  #levelOf(holders: ReadonlySet<string>): number {
    const counted = holders.size > 0 ? [...holders] : [...this.#nodes.keys()]
    let level = Number.POSITIVE_INFINITY
    for (const id of counted) level = Math.min(level, this.nodeFormatLevel(id))
    return Number.isFinite(level) ? level : 1
  }

  /**
   * Why `formatLevel` is not known yet, or undefined when it is: no node has registered (a new
   * cluster before its first heartbeat), or some that hold a replica have not (a founder before
   * its first heartbeat); their levels count as 1 meanwhile.
   */
  formatLevelUnknown(): string | undefined {
    if (this.#nodes.size === 0) return 'no node registered yet'
    const unregistered = [...this.#holders()].filter((id) => !this.#nodes.has(id)).sort()
    return unregistered.length > 0 ? `${unregistered.join(', ')} not registered` : undefined
  }

  /**
   * The nodes that hold a replica: of a data group or of the meta group, or being added to
   * one (a replica being removed is still among its group's replicas). A change that adds
   * nobody (a meta shrink's `add: ''`) adds no holder: until 2026-12-02 its empty id counted as
   * an unregistered node of level 1, so the cluster ran at level 1 for every meta shrink (store
   * ids unchecked, level-gated settings refused, nodes told level 1).
   */
  #holders(): Set<string> {
    const holders = new Set<string>(this.#metaMembers ?? [])
    if (this.#metaChange?.add) holders.add(this.#metaChange.add)
    for (const g of this.#groups.values()) for (const r of g.replicas) holders.add(r)
    for (const c of this.#replicaChanges.values()) if (c.add) holders.add(c.add)
    return holders
  }

  /** The data groups node `nodeId` must host: those it is a replica of, or is being added to. */
  groupsOf(nodeId: string): readonly GroupRecord[] {
    if (this.#derived.byNode === undefined) {
      const byNode = new Map<string, GroupRecord[]>()
      const add = (node: string, g: GroupRecord) => {
        const list = byNode.get(node)
        if (list === undefined) byNode.set(node, [g])
        else if (list[list.length - 1] !== g) list.push(g)
      }
      for (const g of this.groups()) {
        for (const r of g.replicas) add(r, g)
        const adding = this.#replicaChanges.get(g.groupId)?.add
        if (adding) add(adding, g)
      }
      this.#derived.byNode = byNode
    }
    return this.#derived.byNode.get(nodeId) ?? []
  }

  /** How many partitions each data group holds (groups with none included). */
  partitionCounts(): Map<number, number> {
    const counts = new Map<number, number>()
    for (const g of this.#groups.keys()) counts.set(g, 0)
    for (const [g, n] of this.#held) counts.set(g, n)
    return counts
  }

  /** Adds `delta` to the partition count of `groupId` (see #held). */
  #hold(groupId: number, delta: number): void {
    const n = (this.#held.get(groupId) ?? 0) + delta
    if (n === 0) this.#held.delete(groupId)
    else this.#held.set(groupId, n)
  }

  /** Applies one committed command with the entry's leader timestamp `nowMs`. */
  apply(command: MetaCommand, nowMs: number): MetaResult {
    try {
      return this.#applyCommand(command, nowMs)
    } finally {
      // Also what the command itself read (drainNode, removeNode) before it changed anything.
      this.#revision++
      this.#derived = {}
    }
  }

  #applyCommand(command: MetaCommand, nowMs: number): MetaResult {
    switch (command.type) {
      case 'registerNode':
        return this.#registerNode(command, nowMs)
      case 'createGroup':
        return this.#createGroup(command.replicas, nowMs, command.groupId)
      case 'removeGroup':
        return this.#removeGroup(command.groupId)
      case 'reportLeader':
        return this.#reportLeader(command.groupId, command.leaderId, command.term)
      case 'createQueue':
        return this.#createQueue(command.name, command.config, nowMs)
      case 'updateQueue':
        return this.#updateQueue(command.name, command)
      case 'deleteQueue':
        return this.#deleteQueue(command.name)
      case 'putToken':
        return this.tokens.put(command.name, command.sha256, command.roles, nowMs, command.ttlMs ?? 0)
      case 'deleteToken':
        return this.tokens.remove(command.name)
      case 'scaleDataGroups':
        return this.#scaleDataGroups(command.groups, nowMs)
      case 'startMove':
        return this.#startMove(command.queue, command.partition, command.toGroup, nowMs)
      case 'completeMove':
        return this.#completeMove(command.moveId)
      case 'abortMove':
        return this.#abortMove(command.moveId)
      case 'finishMove':
        return this.#finishMove(command.moveId)
      case 'drainNode':
        return this.#drainNode(command.nodeId)
      case 'undrainNode':
        return this.#undrainNode(command.nodeId)
      case 'removeNode':
        return this.#removeNode(command.nodeId)
      case 'markSilent':
        return this.#markSilent(command.nodeId, command.sinceMs, nowMs)
      case 'markHeard':
        return this.#markHeard(command.nodeId)
      case 'startReplicaChange':
        return this.#startReplicaChange(command, nowMs)
      case 'retargetReplicaChange':
        return this.#retargetReplicaChange(command.groupId, command.add)
      case 'abandonReplicaChange':
        return this.#abandonReplicaChange(command.groupId)
      case 'finishReplicaChange':
        return this.#finishReplicaChange(command.groupId, command.removed)
      case 'initMetaMembers':
        return this.#initMetaMembers(command.voters)
      case 'startMetaChange':
        return this.#startMetaChange(command, nowMs)
      case 'retargetMetaChange':
        return this.#retargetMetaChange(command.add)
      case 'abandonMetaChange':
        return this.#abandonMetaChange()
      case 'finishMetaChange':
        return this.#finishMetaChange(command.removed)
      case 'setMetaVoters':
        return this.#setMetaVoters(command.voters)
      case 'setReplicationFactor':
        return this.#setReplicationFactor(command.factor, command.initial === true)
      case 'recordDataGroups':
        return this.#recordDataGroups(command.count)
      case 'finishScale':
        if (this.#scale) this.#scale = { ...this.#scale, running: false }
        return ok(this.#scale ?? null)
      default:
        return fail(
          ErrorCode.InvalidArgument,
          `unknown meta command ${JSON.stringify((command as { type: unknown }).type)}`,
        )
    }
  }

  #registerNode(command: MetaCommand & { type: 'registerNode' }, nowMs: number): MetaResult<NodeRecord> {
    const { nodeId, address, formatLevel = 1, storeId, freshStore } = command
    if (
      typeof nodeId !== 'string' ||
      nodeId.length === 0 ||
      typeof address !== 'string' ||
      address.length === 0
    ) {
      return fail(ErrorCode.InvalidArgument, 'registerNode needs a node id and an address')
    }
    if (!Number.isInteger(formatLevel) || (formatLevel as number) < 1) {
      return fail(ErrorCode.InvalidArgument, `format level ${String(formatLevel)} is not a positive integer`)
    }
    if (storeId !== undefined && !isStoreId(storeId)) {
      return fail(
        ErrorCode.InvalidArgument,
        `store id ${JSON.stringify(storeId)} is not 32 lowercase hex digits`,
      )
    }
    if (this.wasRemovedNode(nodeId)) return fail(ErrorCode.InvalidArgument, removedNodeMessage(nodeId))
    const existing = this.#nodes.get(nodeId)
    if (storeId !== undefined) {
      const claim = { storeId, fresh: freshStore === true }
      const conflict = storeConflict(nodeId, existing, claim, nowMs)
      if (conflict) return fail(ErrorCode.InvalidArgument, conflict)
    }
    if (!existing && this.#nodes.size >= META_LIMITS.nodesMax) {
      return fail(ErrorCode.LimitExceeded, `the cluster already has ${META_LIMITS.nodesMax} nodes`)
    }
    for (const other of this.#nodes.values()) {
      if (other.nodeId !== nodeId && other.address === address) {
        return fail(ErrorCode.InvalidArgument, `address ${address} already belongs to node ${other.nodeId}`)
      }
    }
    const level = formatLevel as number
    const store = storeId ?? existing?.storeId
    if (existing?.address === address && (existing.formatLevel ?? 1) === level && existing.storeId === store)
      return ok(existing)
    const record: NodeRecord = {
      nodeId,
      address,
      registeredAtMs: existing?.registeredAtMs ?? nowMs,
      ...(level > 1 ? { formatLevel: level } : {}),
      ...(store !== undefined ? { storeId: store } : {}),
    }
    this.#nodes.set(nodeId, record)
    // Routes carry node addresses: a changed address is a route change.
    if (existing && existing.address !== address) this.#routeEpoch++
    return ok(record)
  }

  #createGroup(replicas: unknown, nowMs: number, groupId: unknown): MetaResult<GroupRecord> {
    // Decided from a state another create then changed (one whose proposal timed out, its
    // outcome unknown, committed late): it would make one group more than wanted.
    if (
      groupId !== undefined &&
      this.formatLevel() >= FORMAT_LEVEL_CREATE_GROUP_ID &&
      groupId !== this.#nextGroupId
    ) {
      return fail(
        ErrorCode.InvalidArgument,
        `data group ${String(groupId)} was to be created, but the next group id is ${this.#nextGroupId}: the groups changed since`,
      )
    }
    if (
      !Array.isArray(replicas) ||
      replicas.length === 0 ||
      replicas.length > META_LIMITS.replicasPerGroupMax
    ) {
      return fail(
        ErrorCode.InvalidArgument,
        `a data group needs 1 to ${META_LIMITS.replicasPerGroupMax} replicas`,
      )
    }
    if (new Set(replicas).size !== replicas.length) {
      return fail(ErrorCode.InvalidArgument, 'a data group names a node twice')
    }
    const unknown = replicas.find((r) => typeof r !== 'string' || !this.#nodes.has(r))
    if (unknown !== undefined)
      return fail(ErrorCode.InvalidArgument, `node ${String(unknown)} is not registered`)
    if (this.#groups.size >= META_LIMITS.groupsMax) {
      return fail(ErrorCode.LimitExceeded, `the cluster already has ${META_LIMITS.groupsMax} data groups`)
    }
    const record: GroupRecord = {
      groupId: this.#nextGroupId++,
      replicas: [...(replicas as string[])],
      founders: [...(replicas as string[])],
      leaderId: '',
      leaderTerm: 0,
      createdAtMs: nowMs,
    }
    this.#groups.set(record.groupId, record)
    return ok(record)
  }

  #removeGroup(groupId: unknown): MetaResult<null> {
    const group = typeof groupId === 'number' ? this.#groups.get(groupId) : undefined
    if (!group) return fail(ErrorCode.InvalidArgument, `data group ${String(groupId)} does not exist`)
    if (this.#replicaChanges.has(group.groupId)) {
      return fail(
        ErrorCode.InvalidArgument,
        `data group ${group.groupId} is changing its replicas; wait for it`,
      )
    }
    const moving = this.moves().find((m) => m.fromGroup === group.groupId || m.toGroup === group.groupId)
    if (moving) {
      return fail(
        ErrorCode.InvalidArgument,
        `data group ${group.groupId} takes part in move ${moving.moveId}; wait for it to finish`,
      )
    }
    const held = this.partitionCounts().get(group.groupId) ?? 0
    if (held > 0) {
      return fail(
        ErrorCode.InvalidArgument,
        `data group ${group.groupId} still holds ${held} partitions; move them first`,
      )
    }
    this.#groups.delete(group.groupId)
    return ok(null)
  }

  #reportLeader(groupId: unknown, leaderId: unknown, term: unknown): MetaResult<GroupRecord> {
    const group = typeof groupId === 'number' ? this.#groups.get(groupId) : undefined
    if (!group) return fail(ErrorCode.InvalidArgument, `data group ${String(groupId)} does not exist`)
    if (typeof leaderId !== 'string' || !group.replicas.includes(leaderId)) {
      return fail(
        ErrorCode.InvalidArgument,
        `node ${String(leaderId)} is not a replica of data group ${group.groupId}`,
      )
    }
    if (typeof term !== 'number' || !Number.isInteger(term) || term < 1) {
      return fail(ErrorCode.InvalidArgument, `leader term must be a positive integer, got ${String(term)}`)
    }
    // A report from an older term than the one recorded is stale: keep the newer leader.
    if (term < group.leaderTerm || (term === group.leaderTerm && leaderId === group.leaderId))
      return ok(group)
    const next: GroupRecord = { ...group, leaderId, leaderTerm: term }
    this.#groups.set(group.groupId, next)
    return ok(next)
  }

  #createQueue(name: unknown, requested: unknown, nowMs: number): MetaResult<QueueRecord> {
    if (typeof name !== 'string') return fail(ErrorCode.InvalidArgument, 'queue name must be a string')
    const nameProblem = queueNameProblem(name)
    if (nameProblem) return fail(ErrorCode.InvalidArgument, nameProblem)
    if (this.#queues.has(name)) return fail(ErrorCode.QueueExists, `queue ${name} already exists`)
    if (this.#queues.size >= META_LIMITS.queuesMax) {
      return fail(ErrorCode.LimitExceeded, `the cluster already has ${META_LIMITS.queuesMax} queues`)
    }
    const config = resolveQueueConfig(typeof requested === 'object' && requested !== null ? requested : {})
    if (typeof config === 'string') return fail(ErrorCode.InvalidArgument, config)
    if (config.deadLetterQueue) {
      const dlqProblem = queueNameProblem(config.deadLetterQueue)
      if (dlqProblem) return fail(ErrorCode.InvalidArgument, `dead-letter ${dlqProblem}`)
    }
    if (this.#groups.size === 0) {
      return fail(
        ErrorCode.Unavailable,
        'the cluster has no data groups yet; retry once the controller has made them',
      )
    }
    const partitions = this.#place(0, config.partitions, config.engine)
    this.#routeEpoch++
    // A client that routed a deleted queue of this name is refused with STALE_ROUTE, as for
    // partitions added: placement is deterministic, so the partitions placed where the old
    // queue's were served its requests, and it never learnt of the others (an audit).
    const since =
      this.formatLevel() >= FORMAT_LEVEL_CREATE_PARTITIONS_EPOCH ? { partitionsEpoch: this.#routeEpoch } : {}
    const record: QueueRecord = {
      queueId: this.#nextQueueId++,
      name,
      config,
      partitions,
      createdAtMs: nowMs,
      ...since,
    }
    this.#queues.set(name, record)
    this.#names.splice(firstAtLeast(this.#names, name), 0, name)
    for (const p of partitions) this.#hold(p.groupId, 1)
    return ok(record)
  }

  /**
   * Places partitions `from` to `to - 1`: each goes to the data group holding the fewest
   * partitions (lowest id on a tie), so queues spread evenly over the groups; groups being
   * removed take none (unless every group left is, which a scale-down's target of at least one
   * group rules out). Replicated behaviour: below format level 18 the groups already removed
   * were counted among those being removed, so once some were gone the rest took partitions.
   */
  #place(from: number, to: number, engine: string): PartitionRecord[] {
    const counts = this.partitionCounts()
    const named = this.#scale?.running ? this.#scale.removing : []
    const removing =
      this.#placementLevel() >= FORMAT_LEVEL_PLACE_LIVE_REMOVING ? named.filter((g) => counts.has(g)) : named
    if (removing.length < counts.size) for (const g of removing) counts.delete(g)
    const partitions: PartitionRecord[] = []
    for (let partition = from; partition < to; partition++) {
      let best = -1
      let bestCount = Number.POSITIVE_INFINITY
      for (const [groupId, count] of counts) {
        if (count < bestCount || (count === bestCount && groupId < best)) {
          best = groupId
          bestCount = count
        }
      }
      counts.set(best, bestCount + 1)
      partitions.push({ partition, groupId: best, engine })
    }
    return partitions
  }

  #updateQueue(name: unknown, command: { readonly update: unknown }): MetaResult<QueueRecord> {
    const queue = typeof name === 'string' ? this.#queues.get(name) : undefined
    if (!queue) return fail(ErrorCode.QueueNotFound, `queue ${String(name)} does not exist`)
    const update = typeof command.update === 'object' && command.update !== null ? command.update : {}
    const config = applyQueueConfigUpdate(queue.config, update)
    if (typeof config === 'string') return fail(ErrorCode.InvalidArgument, config)
    // As createQueue's (the handler checks it before proposing; an entry from another source).
    if (
      config.deadLetterQueue !== queue.config.deadLetterQueue &&
      config.deadLetterQueue &&
      this.formatLevel() >= FORMAT_LEVEL_META_APPLY_CHECKS
    ) {
      const dlqProblem = queueNameProblem(config.deadLetterQueue)
      if (dlqProblem) return fail(ErrorCode.InvalidArgument, `dead-letter ${dlqProblem}`)
    }
    if (config.partitions > queue.partitions.length && this.#groups.size === 0) {
      return fail(ErrorCode.Unavailable, 'the cluster has no data groups to place partitions on')
    }
    // Routes carry the config, and data-group leaders version the settings they apply by it.
    this.#routeEpoch++
    this.#changedEpoch = this.#routeEpoch
    let next: QueueRecord = { ...queue, config }
    if (config.partitions > queue.partitions.length) {
      // Partitions added: placed like a new queue's, routed from this epoch on.
      const added = this.#place(queue.partitions.length, config.partitions, config.engine)
      for (const p of added) this.#hold(p.groupId, 1)
      next = { ...next, partitions: [...queue.partitions, ...added], partitionsEpoch: this.#routeEpoch }
      this.#growEpoch = this.#routeEpoch
    }
    this.#queues.set(queue.name, next)
    return ok(next)
  }

  /** Deletes a queue; its value is the queue as it was (its partitions are fenced next). */
  #deleteQueue(name: unknown): MetaResult<QueueRecord> {
    const queue = typeof name === 'string' ? this.#queues.get(name) : undefined
    if (!queue) return fail(ErrorCode.QueueNotFound, `queue ${String(name)} does not exist`)
    this.#queues.delete(queue.name)
    this.#names.splice(firstAtLeast(this.#names, queue.name), 1)
    for (const p of queue.partitions) this.#hold(p.groupId, -1)
    // Moves of a deleted queue's partitions are abandoned (their copies go with the queue's data).
    for (const m of this.moves()) if (m.queue === name) this.#moves.delete(m.moveId)
    this.#routeEpoch++
    this.#changedEpoch = this.#routeEpoch
    return ok(queue)
  }

  #scaleDataGroups(groups: unknown, nowMs: number): MetaResult<ScaleRecord> {
    if (
      typeof groups !== 'number' ||
      !Number.isInteger(groups) ||
      groups < 1 ||
      groups > META_LIMITS.groupsMax
    ) {
      return fail(
        ErrorCode.InvalidArgument,
        `the number of data groups must be an integer from 1 to ${META_LIMITS.groupsMax}, got ${String(groups)}`,
      )
    }
    // Shrinking: the groups holding the fewest partitions go (the newest on a tie).
    const counts = this.partitionCounts()
    const removing = [...counts.entries()]
      .sort(([a, ca], [b, cb]) => ca - cb || b - a)
      .slice(0, Math.max(0, counts.size - groups))
      .map(([g]) => g)
      .sort((a, b) => a - b)
    this.#scale = { targetGroups: groups, removing, movesDone: 0, running: true, startedAtMs: nowMs }
    return ok(this.#scale)
  }

  #startMove(
    queueName: unknown,
    partition: unknown,
    toGroup: unknown,
    nowMs: number,
  ): MetaResult<MoveRecord> {
    const queue = typeof queueName === 'string' ? this.#queues.get(queueName) : undefined
    if (!queue) return fail(ErrorCode.QueueNotFound, `queue ${String(queueName)} does not exist`)
    const p = queue.partitions.find((x) => x.partition === partition)
    if (!p)
      return fail(ErrorCode.InvalidArgument, `queue ${queue.name} has no partition ${String(partition)}`)
    const target = typeof toGroup === 'number' ? this.#groups.get(toGroup) : undefined
    if (!target) return fail(ErrorCode.InvalidArgument, `data group ${String(toGroup)} does not exist`)
    if (p.groupId === target.groupId) {
      return fail(
        ErrorCode.InvalidArgument,
        `${queue.name}/${p.partition} is in data group ${p.groupId} already`,
      )
    }
    if (this.#scale?.running && this.#scale.removing.includes(target.groupId)) {
      return fail(ErrorCode.InvalidArgument, `data group ${target.groupId} is being removed`)
    }
    if (this.moves().some((m) => m.queue === queue.name && m.partition === p.partition)) {
      return fail(ErrorCode.InvalidArgument, `${queue.name}/${p.partition} is being moved already`)
    }
    if (this.#moves.size >= META_LIMITS.movesMax) {
      return fail(ErrorCode.LimitExceeded, `${META_LIMITS.movesMax} partition moves are under way already`)
    }
    const record: MoveRecord = {
      moveId: this.#nextMoveId++,
      queue: queue.name,
      queueId: queue.queueId,
      partition: p.partition,
      fromGroup: p.groupId,
      toGroup: target.groupId,
      phase: MovePhase.Copy,
      startedAtMs: nowMs,
    }
    this.#moves.set(record.moveId, record)
    return ok(record)
  }

  #completeMove(moveId: unknown): MetaResult<MoveRecord> {
    const move = typeof moveId === 'number' ? this.#moves.get(moveId) : undefined
    if (!move) return fail(ErrorCode.InvalidArgument, `move ${String(moveId)} is not under way`)
    if (move.phase === MovePhase.Drop) return ok(move)
    if (move.phase === MovePhase.Abort)
      return fail(
        ErrorCode.InvalidArgument,
        `move ${move.moveId} was aborted: its partition stays where it is`,
      )
    const queue = this.#queues.get(move.queue)
    if (!queue || queue.queueId !== move.queueId) {
      return fail(ErrorCode.QueueNotFound, `queue ${move.queue} of move ${move.moveId} was deleted`)
    }
    const partitions = queue.partitions.map((p) =>
      p.partition === move.partition ? { ...p, groupId: move.toGroup } : p,
    )
    this.#queues.set(queue.name, { ...queue, partitions })
    for (const p of queue.partitions) {
      if (p.partition !== move.partition) continue
      this.#hold(p.groupId, -1)
      this.#hold(move.toGroup, 1)
    }
    const next: MoveRecord = { ...move, phase: MovePhase.Drop }
    this.#moves.set(move.moveId, next)
    this.#routeEpoch++
    return ok(next)
  }

  /** Gives a move up while it copies: the route never flips; the source lifts its fence next. */
  #abortMove(moveId: unknown): MetaResult<MoveRecord> {
    const move = typeof moveId === 'number' ? this.#moves.get(moveId) : undefined
    if (!move) return fail(ErrorCode.InvalidArgument, `move ${String(moveId)} is not under way`)
    if (move.phase === MovePhase.Abort) return ok(move)
    if (move.phase !== MovePhase.Copy)
      return fail(
        ErrorCode.InvalidArgument,
        `move ${move.moveId} reached its target already: it cannot be aborted`,
      )
    const next: MoveRecord = { ...move, phase: MovePhase.Abort }
    this.#moves.set(move.moveId, next)
    return ok(next)
  }

  #finishMove(moveId: unknown): MetaResult<null> {
    const move = typeof moveId === 'number' ? this.#moves.get(moveId) : undefined
    if (!move) return ok(null)
    if (move.phase === MovePhase.Copy) {
      return fail(ErrorCode.InvalidArgument, `move ${move.moveId} has not reached its target yet`)
    }
    this.#moves.delete(move.moveId)
    // An aborted move moved nothing: the plan moves the partition again (elsewhere, if it can).
    if (this.#scale?.running && move.phase === MovePhase.Drop)
      this.#scale = { ...this.#scale, movesDone: this.#scale.movesDone + 1 }
    return ok(null)
  }

  #markSilent(nodeId: unknown, sinceMs: unknown, nowMs: number): MetaResult<NodeRecord> {
    const node = typeof nodeId === 'string' ? this.#nodes.get(nodeId) : undefined
    if (!node) return fail(ErrorCode.InvalidArgument, `node ${String(nodeId)} is not registered`)
    if (!Number.isSafeInteger(sinceMs) || (sinceMs as number) < 0 || (sinceMs as number) > nowMs) {
      return fail(
        ErrorCode.InvalidArgument,
        `silent since ${String(sinceMs)} is not a time in milliseconds up to the entry's (${nowMs})`,
      )
    }
    // The first mark stands: a later leader's is its own takeover, not when the node went quiet.
    if (node.silentSinceMs !== undefined) return ok(node)
    const record: NodeRecord = { ...node, silentSinceMs: sinceMs as number }
    this.#nodes.set(node.nodeId, record)
    return ok(record)
  }

  #markHeard(nodeId: unknown): MetaResult<NodeRecord> {
    const node = typeof nodeId === 'string' ? this.#nodes.get(nodeId) : undefined
    if (!node) return fail(ErrorCode.InvalidArgument, `node ${String(nodeId)} is not registered`)
    if (node.silentSinceMs === undefined) return ok(node)
    const { silentSinceMs: _, ...heard } = node
    this.#nodes.set(node.nodeId, heard)
    return ok(heard)
  }

  #drainNode(nodeId: unknown): MetaResult<number> {
    if (typeof nodeId !== 'string' || !this.#nodes.has(nodeId)) {
      return fail(ErrorCode.InvalidArgument, `node ${String(nodeId)} is not registered`)
    }
    this.#draining.add(nodeId)
    // A meta vote it holds, or is being given (the change finishes first: one at a time).
    const metaVote = (this.#metaMembers?.includes(nodeId) ?? false) || this.#metaChange?.add === nodeId
    return ok(this.groupsOf(nodeId).length + Number(metaVote))
  }

  /** Undoes a drain of `nodeId`; the result says whether it was draining. */
  #undrainNode(nodeId: unknown): MetaResult<boolean> {
    if (typeof nodeId !== 'string' || !this.#nodes.has(nodeId)) {
      return fail(ErrorCode.InvalidArgument, `node ${String(nodeId)} is not registered`)
    }
    return ok(this.#draining.delete(nodeId))
  }

  /**
   * Forgets node `nodeId`: refused while it holds anything (a data-group replica, a meta vote,
   * a place in a membership change) or while the meta group's members are not recorded (they
   * could include it). Whether it is alive is the controller's soft state, checked before.
   */
  #removeNode(nodeId: unknown): MetaResult<NodeRecord> {
    const node = typeof nodeId === 'string' ? this.#nodes.get(nodeId) : undefined
    if (!node) return fail(ErrorCode.InvalidArgument, `node ${String(nodeId)} is not registered`)
    if (!this.#metaMembers) {
      return fail(ErrorCode.InvalidArgument, 'the meta group members are not recorded yet')
    }
    if (this.#holders().has(node.nodeId)) {
      const groups = this.groupsOf(node.nodeId).map((g) => g.groupId)
      const what = [
        ...(groups.length > 0 ? [`replicas of data groups ${groups.join(', ')}`] : []),
        ...(this.#metaMembers.includes(node.nodeId) || this.#metaChange?.add === node.nodeId
          ? ['a meta group vote']
          : []),
      ]
      return fail(
        ErrorCode.InvalidArgument,
        `node ${node.nodeId} still holds ${what.join(' and ')}: drain it first (mq node drain ${node.nodeId}) and wait until it holds nothing`,
      )
    }
    this.#nodes.delete(node.nodeId)
    this.#draining.delete(node.nodeId)
    this.#removedNodes = [...this.#removedNodes, node.nodeId].slice(-META_LIMITS.removedNodesKept)
    return ok(node)
  }

  #initMetaMembers(voters: unknown): MetaResult<readonly string[]> {
    if (this.#metaMembers) return ok(this.#metaMembers)
    if (
      !Array.isArray(voters) ||
      voters.length === 0 ||
      voters.length > META_LIMITS.replicasPerGroupMax ||
      voters.some((v) => typeof v !== 'string' || v.length === 0) ||
      new Set(voters).size !== voters.length
    ) {
      return fail(
        ErrorCode.InvalidArgument,
        `the meta group needs 1 to ${META_LIMITS.replicasPerGroupMax} distinct voters`,
      )
    }
    this.#metaMembers = [...(voters as string[])].sort(compare)
    return ok(this.#metaMembers)
  }

  #startMetaChange(
    c: { readonly add: unknown; readonly remove: unknown; readonly reason: unknown },
    nowMs: number,
  ): MetaResult<ReplicaChangeRecord> {
    const members = this.#metaMembers
    if (!members) return fail(ErrorCode.InvalidArgument, 'the meta group members are not recorded yet')
    if (this.#metaChange) {
      return fail(ErrorCode.InvalidArgument, 'the meta group is changing its members already')
    }
    const reason = c.reason
    if (
      reason !== ReplicaChangeReason.Drain &&
      reason !== ReplicaChangeReason.Dead &&
      reason !== ReplicaChangeReason.Grow &&
      reason !== ReplicaChangeReason.Shrink
    ) {
      return fail(ErrorCode.InvalidArgument, `unknown meta change reason ${String(reason)}`)
    }
    // Growing adds a voter and removes none; shrinking removes one and adds none.
    const removes = reason !== ReplicaChangeReason.Grow
    const adds = reason !== ReplicaChangeReason.Shrink
    if (removes ? typeof c.remove !== 'string' || !members.includes(c.remove) : c.remove !== '') {
      return fail(
        ErrorCode.InvalidArgument,
        removes
          ? `node ${String(c.remove)} is not a meta group member`
          : 'growing the meta group removes no voter',
      )
    }
    if (adds ? typeof c.add !== 'string' || !this.#nodes.has(c.add) : c.add !== '') {
      return fail(
        ErrorCode.InvalidArgument,
        adds ? `node ${String(c.add)} is not registered` : 'shrinking the meta group adds no voter',
      )
    }
    if (adds && members.includes(c.add as string)) {
      return fail(ErrorCode.InvalidArgument, `node ${String(c.add)} is a meta group member already`)
    }
    if (!adds && members.length <= 1) {
      return fail(ErrorCode.InvalidArgument, 'the meta group keeps at least one voter')
    }
    if (
      !removes &&
      members.length >= META_LIMITS.replicasPerGroupMax &&
      this.formatLevel() >= FORMAT_LEVEL_META_APPLY_CHECKS
    ) {
      return fail(
        ErrorCode.InvalidArgument,
        `the meta group has ${members.length} voters, the most it may have (${META_LIMITS.replicasPerGroupMax})`,
      )
    }
    this.#metaChange = {
      groupId: 0,
      add: c.add as string,
      remove: c.remove as string,
      reason,
      startedAtMs: nowMs,
    }
    return ok(this.#metaChange)
  }

  #retargetMetaChange(add: unknown): MetaResult<ReplicaChangeRecord> {
    const change = this.#metaChange
    if (!change || !this.#metaMembers) {
      return fail(ErrorCode.InvalidArgument, 'the meta group is not changing its members')
    }
    if (typeof add !== 'string' || !this.#nodes.has(add)) {
      return fail(ErrorCode.InvalidArgument, `node ${String(add)} is not registered`)
    }
    if (change.add === '') return fail(ErrorCode.InvalidArgument, 'the meta group is adding no voter')
    if (this.#metaMembers.includes(add) || add === change.add) {
      return fail(ErrorCode.InvalidArgument, `node ${add} is a meta group member or being added already`)
    }
    this.#metaChange = { ...change, add }
    return ok(this.#metaChange)
  }

  #setMetaVoters(voters: unknown): MetaResult<number> {
    if (typeof voters !== 'number' || !META_VOTER_COUNTS.includes(voters)) {
      return fail(
        ErrorCode.InvalidArgument,
        `the meta group can keep ${META_VOTER_COUNTS.join(', ')} voters, not ${String(voters)}`,
      )
    }
    if (!this.#metaMembers)
      return fail(ErrorCode.InvalidArgument, 'the meta group members are not recorded yet')
    this.#metaVotersWanted = voters
    return ok(voters)
  }

  /**
   * Sets the replication factor (`initial`: only when none is recorded); the result is the one
   * before (0: none recorded).
   */
  #setReplicationFactor(factor: unknown, initial: boolean): MetaResult<number> {
    const wrong = replicationFactorError(factor)
    if (wrong !== undefined || typeof factor !== 'number') return fail(ErrorCode.InvalidArgument, wrong ?? '')
    const previous = this.#replicationFactor ?? 0
    if (!initial || this.#replicationFactor === undefined) this.#replicationFactor = factor
    return ok(previous)
  }

  /** Records the data groups wanted before any scale plan, unless recorded; the result is the one recorded. */
  #recordDataGroups(count: unknown): MetaResult<number> {
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 0 || count > META_LIMITS.groupsMax) {
      return fail(
        ErrorCode.InvalidArgument,
        `the data group count must be an integer from 0 (as many as live nodes) to ${META_LIMITS.groupsMax}, not ${String(count)}`,
      )
    }
    this.#dataGroups ??= count
    return ok(this.#dataGroups)
  }

  /** Gives up adding a meta voter (its node gone, none to take its place), as #abandonReplicaChange. */
  #abandonMetaChange(): MetaResult<ReplicaChangeRecord> {
    const change = this.#metaChange
    if (!change) return fail(ErrorCode.InvalidArgument, 'the meta group is not changing its members')
    if (change.add === '') return fail(ErrorCode.InvalidArgument, 'the meta group is adding no voter')
    this.#metaChange = { ...change, add: '', remove: '' }
    return ok(this.#metaChange)
  }

  /** Finishes the meta group's change; one given up names the voter gone before it (`removed`), if any. */
  #finishMetaChange(removed: unknown): MetaResult<readonly string[]> {
    const change = this.#metaChange
    if (!change || !this.#metaMembers) {
      return fail(ErrorCode.InvalidArgument, 'the meta group is not changing its members')
    }
    if (removed !== undefined) {
      if (change.add !== '' || change.remove !== '')
        return fail(ErrorCode.InvalidArgument, 'only a meta change given up names a voter removed')
      if (typeof removed !== 'string' || !this.#metaMembers.includes(removed))
        return fail(ErrorCode.InvalidArgument, `node ${String(removed)} is not a meta group member`)
    }
    const gone = typeof removed === 'string' ? removed : change.remove
    // A replacement given up after its leader had removed the voter it replaced leaves the group
    // a voter short: the size it had is wanted, so it grows back once a node can take the vote
    // (by default the plan keeps the members' count, and two voters stayed two for good).
    if (typeof removed === 'string') this.#metaVotersWanted ??= this.#metaMembers.length
    const kept = this.#metaMembers.filter((m) => m !== gone)
    this.#metaMembers = (change.add === '' ? kept : [...kept, change.add]).sort(compare)
    this.#metaChange = undefined
    return ok(this.#metaMembers)
  }

  #startReplicaChange(
    c: {
      readonly groupId: unknown
      readonly add: unknown
      readonly remove: unknown
      readonly reason: unknown
    },
    nowMs: number,
  ): MetaResult<ReplicaChangeRecord> {
    const group = typeof c.groupId === 'number' ? this.#groups.get(c.groupId) : undefined
    if (!group) return fail(ErrorCode.InvalidArgument, `data group ${String(c.groupId)} does not exist`)
    if (this.#replicaChanges.has(group.groupId)) {
      return fail(ErrorCode.InvalidArgument, `data group ${group.groupId} is changing its replicas already`)
    }
    // Growing adds a replica and removes none, shrinking removes one and adds none; every
    // other change replaces one.
    if (c.reason === ReplicaChangeReason.Shrink) {
      if (c.add !== '')
        return fail(
          ErrorCode.InvalidArgument,
          `a change shrinking data group ${group.groupId} adds no replica`,
        )
      if (typeof c.remove !== 'string' || !group.replicas.includes(c.remove)) {
        return fail(
          ErrorCode.InvalidArgument,
          `node ${String(c.remove)} is not a replica of data group ${group.groupId}`,
        )
      }
      if (group.replicas.length <= 1)
        return fail(
          ErrorCode.InvalidArgument,
          `data group ${group.groupId} has one replica, the fewest a group may have`,
        )
      const record: ReplicaChangeRecord = {
        groupId: group.groupId,
        add: '',
        remove: c.remove,
        reason: ReplicaChangeReason.Shrink,
        startedAtMs: nowMs,
      }
      this.#replicaChanges.set(group.groupId, record)
      return ok(record)
    }
    if (c.reason === ReplicaChangeReason.Grow) {
      if (c.remove !== '')
        return fail(
          ErrorCode.InvalidArgument,
          `a change growing data group ${group.groupId} removes no replica`,
        )
      if (group.replicas.length >= META_LIMITS.replicasPerGroupMax) {
        return fail(
          ErrorCode.InvalidArgument,
          `data group ${group.groupId} has ${META_LIMITS.replicasPerGroupMax} replicas, the most a group may have`,
        )
      }
    } else if (typeof c.remove !== 'string' || !group.replicas.includes(c.remove)) {
      return fail(
        ErrorCode.InvalidArgument,
        `node ${String(c.remove)} is not a replica of data group ${group.groupId}`,
      )
    }
    if (typeof c.add !== 'string' || !this.#nodes.has(c.add)) {
      return fail(ErrorCode.InvalidArgument, `node ${String(c.add)} is not registered`)
    }
    if (group.replicas.includes(c.add)) {
      return fail(
        ErrorCode.InvalidArgument,
        `node ${c.add} is a replica of data group ${group.groupId} already`,
      )
    }
    if (typeof c.reason !== 'string' || !DATA_CHANGE_REASONS.includes(c.reason)) {
      return fail(ErrorCode.InvalidArgument, `unknown replica change reason ${String(c.reason)}`)
    }
    const record: ReplicaChangeRecord = {
      groupId: group.groupId,
      add: c.add,
      remove: c.remove,
      reason: c.reason as ReplicaChangeReason,
      startedAtMs: nowMs,
    }
    this.#replicaChanges.set(group.groupId, record)
    return ok(record)
  }

  #retargetReplicaChange(groupId: unknown, add: unknown): MetaResult<ReplicaChangeRecord> {
    const change = typeof groupId === 'number' ? this.#replicaChanges.get(groupId) : undefined
    const group = change ? this.#groups.get(change.groupId) : undefined
    if (!change || !group)
      return fail(ErrorCode.InvalidArgument, `data group ${String(groupId)} is not changing its replicas`)
    if (change.add === '')
      return fail(ErrorCode.InvalidArgument, `data group ${group.groupId} is shrinking: it adds no replica`)
    if (typeof add !== 'string' || !this.#nodes.has(add)) {
      return fail(ErrorCode.InvalidArgument, `node ${String(add)} is not registered`)
    }
    if (group.replicas.includes(add) || add === change.add) {
      return fail(
        ErrorCode.InvalidArgument,
        `node ${add} is a replica of data group ${group.groupId} or being added already`,
      )
    }
    const record: ReplicaChangeRecord = { ...change, add }
    this.#replicaChanges.set(group.groupId, record)
    return ok(record)
  }

  /**
   * Gives up adding a group's replica (its node gone, none to take its place): the change adds
   * and removes nobody from here on. Its record stays until the group's leader has removed the
   * node's learner (replica-changer.ts: a member outside the replicas goes first); finished,
   * it changes nothing, or drops the replica a replacing change had removed already.
   */
  #abandonReplicaChange(groupId: unknown): MetaResult<ReplicaChangeRecord> {
    const change = typeof groupId === 'number' ? this.#replicaChanges.get(groupId) : undefined
    if (!change)
      return fail(ErrorCode.InvalidArgument, `data group ${String(groupId)} is not changing its replicas`)
    if (change.add === '')
      return fail(ErrorCode.InvalidArgument, `data group ${change.groupId}'s change adds no replica`)
    const record: ReplicaChangeRecord = { ...change, add: '', remove: '' }
    this.#replicaChanges.set(change.groupId, record)
    return ok(record)
  }

  /**
   * Finishes a group's change; a shrink's leader may have removed `removed` instead of `remove`,
   * and a change given up names the replica a replacement had removed first (`removed`).
   */
  #finishReplicaChange(groupId: unknown, removed: unknown): MetaResult<GroupRecord> {
    const change = typeof groupId === 'number' ? this.#replicaChanges.get(groupId) : undefined
    const group = change ? this.#groups.get(change.groupId) : undefined
    if (!change || !group)
      return fail(ErrorCode.InvalidArgument, `data group ${String(groupId)} is not changing its replicas`)
    if (removed !== undefined) {
      if (change.add !== '')
        return fail(
          ErrorCode.InvalidArgument,
          `data group ${group.groupId} is not shrinking: it removes ${change.remove}`,
        )
      if (typeof removed !== 'string' || !group.replicas.includes(removed)) {
        return fail(
          ErrorCode.InvalidArgument,
          `node ${String(removed)} is not a replica of data group ${group.groupId}`,
        )
      }
    }
    const gone = typeof removed === 'string' ? removed : change.remove
    const kept = group.replicas.filter((r) => r !== gone)
    const replicas = change.add === '' ? kept : [...kept, change.add]
    const next: GroupRecord = {
      ...group,
      replicas,
      ...(group.leaderId === gone ? { leaderId: '', leaderTerm: group.leaderTerm } : {}),
    }
    this.#groups.set(group.groupId, next)
    this.#replicaChanges.delete(group.groupId)
    // Routes carry the replicas' addresses.
    this.#routeEpoch++
    return ok(next)
  }

  /** The whole state as bytes: the Raft snapshot of the meta group. */
  snapshot(): Uint8Array {
    const image: MetaImage = {
      version: 1,
      routeEpoch: this.#routeEpoch,
      nextGroupId: this.#nextGroupId,
      nextQueueId: this.#nextQueueId,
      nextMoveId: this.#nextMoveId,
      moves: this.moves(),
      ...(this.#scale ? { scale: this.#scale } : {}),
      draining: [...this.#draining].sort(compare),
      replicaChanges: this.replicaChanges(),
      ...(this.#metaMembers ? { metaMembers: this.#metaMembers } : {}),
      ...(this.#metaChange ? { metaChange: this.#metaChange } : {}),
      ...(this.#metaVotersWanted !== undefined ? { metaVotersWanted: this.#metaVotersWanted } : {}),
      ...(this.#replicationFactor !== undefined ? { replicationFactor: this.#replicationFactor } : {}),
      ...(this.#dataGroups !== undefined ? { dataGroups: this.#dataGroups } : {}),
      ...(this.#removedNodes.length > 0 ? { removedNodes: this.#removedNodes } : {}),
      // Also 0: restoring an image without it derives it from the queues' partitionsEpoch, which
      // a queue created at format level 30 or above has without any partitions added.
      growEpoch: this.#growEpoch,
      ...(this.#changedEpoch > 0 ? { changedEpoch: this.#changedEpoch } : {}),
      nodes: this.nodes(),
      groups: this.groups(),
      queues: this.queues(),
      tokens: this.tokens.list(),
    }
    return new TextEncoder().encode(JSON.stringify(image))
  }

  /** Replaces the whole state with a snapshot's. Throws when the bytes are not one. */
  restore(bytes: Uint8Array): void {
    this.#revision++
    this.#derived = {}
    const image = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as MetaImage
    if (image.version !== 1)
      throw new Error(`meta snapshot version ${String(image.version)} is not supported`)
    this.#routeEpoch = image.routeEpoch
    this.#nextGroupId = image.nextGroupId
    this.#nextQueueId = image.nextQueueId ?? 1
    this.#nextMoveId = image.nextMoveId ?? 1
    this.#scale = image.scale
    this.#moves.clear()
    for (const m of image.moves ?? []) this.#moves.set(m.moveId, m)
    this.#draining.clear()
    for (const n of image.draining ?? []) this.#draining.add(n)
    this.#replicaChanges.clear()
    for (const c of image.replicaChanges ?? []) this.#replicaChanges.set(c.groupId, c)
    this.#metaMembers = image.metaMembers
    this.#metaChange = image.metaChange
    this.#metaVotersWanted = image.metaVotersWanted
    this.#replicationFactor = image.replicationFactor
    this.#dataGroups = image.dataGroups
    this.#removedNodes = [...(image.removedNodes ?? [])]
    this.#nodes.clear()
    this.#groups.clear()
    this.#queues.clear()
    for (const n of image.nodes) this.#nodes.set(n.nodeId, n)
    for (const g of image.groups) this.#groups.set(g.groupId, g)
    for (const q of image.queues) this.#queues.set(q.name, { ...q, config: withLaterSettings(q.config) })
    this.#names = [...this.#queues.keys()].sort(compare)
    this.#held.clear()
    for (const q of image.queues) for (const p of q.partitions) this.#hold(p.groupId, 1)
    this.#growEpoch = image.growEpoch ?? image.queues.reduce((m, q) => Math.max(m, q.partitionsEpoch ?? 0), 0)
    // An image of a version before the rename keeps the epoch as settingsEpoch (it counted
    // settings changes only, not deletions): without it, a replica restoring such an image
    // had 0 where one replaying the same entries had the epoch, and heartbeats from it as
    // leader asked no node to refresh routes cached before that change.
    this.#changedEpoch = image.changedEpoch ?? image.settingsEpoch ?? 0
    this.tokens.replace(image.tokens ?? [])
  }
}

/**
 * `config` as restored from a snapshot: a snapshot written before a setting existed lacks it,
 * which gets its default (routes carry the config, and an undefined field would not encode),
 * in the place resolveQueueConfig gives it, so that the state's snapshot is byte-identical.
 */
function withLaterSettings(config: QueueSettings): QueueSettings {
  return {
    ...config,
    messageTtlMs: config.messageTtlMs ?? QUEUE_DEFAULTS.messageTtlMs,
    paused: config.paused ?? QUEUE_DEFAULTS.paused,
    orderedKeys: config.orderedKeys ?? QUEUE_DEFAULTS.orderedKeys,
    deliveryRate: config.deliveryRate ?? QUEUE_DEFAULTS.deliveryRate,
    retryBackoffMinMs: config.retryBackoffMinMs ?? QUEUE_DEFAULTS.retryBackoffMinMs,
    retryBackoffMaxMs: config.retryBackoffMaxMs ?? QUEUE_DEFAULTS.retryBackoffMaxMs,
  }
}

function ok<T>(value: T): MetaResult<T> {
  return { ok: true, value }
}

function fail(code: ErrorCode, message: string): MetaResult<never> {
  return { ok: false, code, message }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** Which queue names a caller sees: every name it sees starts with one of `prefixes`. */
export interface QueueScope {
  sees(name: string): boolean
  readonly prefixes: readonly string[]
}

/**
 * The prefixes to read under for names that start with `prefix` and with one of `scoped`: in
 * name order, none under another (so the ranges they start are disjoint and ascending).
 */
export function narrowedPrefixes(scoped: readonly string[], prefix: string): string[] {
  const starts = scoped.flatMap((p) => (p.startsWith(prefix) ? [p] : prefix.startsWith(p) ? [prefix] : []))
  starts.sort()
  const out: string[] = []
  for (const s of starts) if (!out.some((o) => s.startsWith(o))) out.push(s)
  return out
}

/** The index of the first of `sorted` (ascending) that is ≥ `name` (its length when none is). */
function firstAtLeast(sorted: readonly string[], name: string): number {
  let lo = 0
  let hi = sorted.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if ((sorted[mid] as string) < name) lo = mid + 1
    else hi = mid
  }
  return lo
}

const REMOVED_NODE_PHRASE = 'was removed from the cluster (mq node remove)'

/** Why a removed node may not register again; the node stops when its heartbeat is told this. */
export function removedNodeMessage(nodeId: string): string {
  return `node ${nodeId} ${REMOVED_NODE_PHRASE} and cannot come back under that id: start it with a new --node-id and an empty --data-dir`
}

/** Whether an error's message is removedNodeMessage's (as a heartbeat's refusal carries it). */
export function saysNodeRemoved(message: string): boolean {
  return message.includes(REMOVED_NODE_PHRASE)
}
