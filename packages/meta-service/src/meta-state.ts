import { ErrorCode, type QueueConfig } from '@mq/protocol'
import type { MetaCommand } from './meta-commands'
import { applyQueueConfigUpdate, resolveQueueConfig } from './queue-config'
import { queueNameProblem } from './queue-name'
import { type TokenRecord, TokenRegistry } from './token-registry'

export interface NodeRecord {
  readonly nodeId: string
  readonly address: string
  readonly registeredAtMs: number
}

export interface GroupRecord {
  readonly groupId: number
  /** Node ids of the group's replicas. */
  readonly replicas: readonly string[]
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
  readonly config: QueueConfig
  readonly partitions: readonly PartitionRecord[]
  readonly createdAtMs: number
}

/** The outcome of applying one command: the same on every replica. */
export type MetaResult<T = unknown> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly code: ErrorCode; readonly message: string }

/** Bounds on the metadata, so that the meta state (kept in memory) stays small. */
export const META_LIMITS = {
  nodesMax: 1_000,
  groupsMax: 10_000,
  queuesMax: 100_000,
  replicasPerGroupMax: 7,
} as const

interface MetaImage {
  readonly version: 1
  readonly routeEpoch: number
  readonly nextGroupId: number
  readonly nextQueueId?: number
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
  #nextGroupId = 1
  #nextQueueId = 1
  readonly #nodes = new Map<string, NodeRecord>()
  readonly #groups = new Map<number, GroupRecord>()
  readonly #queues = new Map<string, QueueRecord>()
  /** The client tokens kept in the meta group. */
  readonly tokens = new TokenRegistry()

  get routeEpoch(): number {
    return this.#routeEpoch
  }

  node(nodeId: string): NodeRecord | undefined {
    return this.#nodes.get(nodeId)
  }

  nodes(): NodeRecord[] {
    return [...this.#nodes.values()].sort((a, b) => compare(a.nodeId, b.nodeId))
  }

  group(groupId: number): GroupRecord | undefined {
    return this.#groups.get(groupId)
  }

  groups(): GroupRecord[] {
    return [...this.#groups.values()].sort((a, b) => a.groupId - b.groupId)
  }

  queue(name: string): QueueRecord | undefined {
    return this.#queues.get(name)
  }

  /** Queues whose name starts with `prefix`, after `after`, in name order, at most `limit`. */
  queues(prefix = '', after = '', limit = Number.POSITIVE_INFINITY): QueueRecord[] {
    return [...this.#queues.values()]
      .filter((q) => q.name.startsWith(prefix) && q.name > after)
      .sort((a, b) => compare(a.name, b.name))
      .slice(0, limit)
  }

  /** How many partitions each data group holds (groups with none included). */
  partitionCounts(): Map<number, number> {
    const counts = new Map<number, number>()
    for (const g of this.#groups.keys()) counts.set(g, 0)
    for (const q of this.#queues.values()) {
      for (const p of q.partitions) counts.set(p.groupId, (counts.get(p.groupId) ?? 0) + 1)
    }
    return counts
  }

  /** Applies one committed command with the entry's leader timestamp `nowMs`. */
  apply(command: MetaCommand, nowMs: number): MetaResult {
    switch (command.type) {
      case 'registerNode':
        return this.#registerNode(command.nodeId, command.address, nowMs)
      case 'createGroup':
        return this.#createGroup(command.replicas, nowMs)
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
        return this.tokens.put(command.name, command.sha256, command.roles, nowMs)
      case 'deleteToken':
        return this.tokens.remove(command.name)
      default:
        return fail(
          ErrorCode.InvalidArgument,
          `unknown meta command ${JSON.stringify((command as { type: unknown }).type)}`,
        )
    }
  }

  #registerNode(nodeId: unknown, address: unknown, nowMs: number): MetaResult<NodeRecord> {
    if (
      typeof nodeId !== 'string' ||
      nodeId.length === 0 ||
      typeof address !== 'string' ||
      address.length === 0
    ) {
      return fail(ErrorCode.InvalidArgument, 'registerNode needs a node id and an address')
    }
    const existing = this.#nodes.get(nodeId)
    if (!existing && this.#nodes.size >= META_LIMITS.nodesMax) {
      return fail(ErrorCode.LimitExceeded, `the cluster already has ${META_LIMITS.nodesMax} nodes`)
    }
    for (const other of this.#nodes.values()) {
      if (other.nodeId !== nodeId && other.address === address) {
        return fail(ErrorCode.InvalidArgument, `address ${address} already belongs to node ${other.nodeId}`)
      }
    }
    if (existing?.address === address) return ok(existing)
    const record: NodeRecord = { nodeId, address, registeredAtMs: existing?.registeredAtMs ?? nowMs }
    this.#nodes.set(nodeId, record)
    // Routes carry node addresses: a changed address is a route change.
    if (existing) this.#routeEpoch++
    return ok(record)
  }

  #createGroup(replicas: unknown, nowMs: number): MetaResult<GroupRecord> {
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
    // Each partition goes to the data group holding the fewest partitions (lowest id on a
    // tie), so queues spread evenly over the groups.
    const counts = this.partitionCounts()
    const partitions: PartitionRecord[] = []
    for (let partition = 0; partition < config.partitions; partition++) {
      let best = -1
      let bestCount = Number.POSITIVE_INFINITY
      for (const [groupId, count] of counts) {
        if (count < bestCount || (count === bestCount && groupId < best)) {
          best = groupId
          bestCount = count
        }
      }
      counts.set(best, bestCount + 1)
      partitions.push({ partition, groupId: best, engine: config.engine })
    }
    const record: QueueRecord = { queueId: this.#nextQueueId++, name, config, partitions, createdAtMs: nowMs }
    this.#queues.set(name, record)
    this.#routeEpoch++
    return ok(record)
  }

  #updateQueue(name: unknown, command: { readonly update: unknown }): MetaResult<QueueRecord> {
    const queue = typeof name === 'string' ? this.#queues.get(name) : undefined
    if (!queue) return fail(ErrorCode.QueueNotFound, `queue ${String(name)} does not exist`)
    const update = typeof command.update === 'object' && command.update !== null ? command.update : {}
    const config = applyQueueConfigUpdate(queue.config, update)
    if (typeof config === 'string') return fail(ErrorCode.InvalidArgument, config)
    const next: QueueRecord = { ...queue, config }
    this.#queues.set(queue.name, next)
    return ok(next)
  }

  #deleteQueue(name: unknown): MetaResult<null> {
    if (typeof name !== 'string' || !this.#queues.delete(name)) {
      return fail(ErrorCode.QueueNotFound, `queue ${String(name)} does not exist`)
    }
    this.#routeEpoch++
    return ok(null)
  }

  /** The whole state as bytes: the Raft snapshot of the meta group. */
  snapshot(): Uint8Array {
    const image: MetaImage = {
      version: 1,
      routeEpoch: this.#routeEpoch,
      nextGroupId: this.#nextGroupId,
      nextQueueId: this.#nextQueueId,
      nodes: this.nodes(),
      groups: this.groups(),
      queues: this.queues(),
      tokens: this.tokens.list(),
    }
    return new TextEncoder().encode(JSON.stringify(image))
  }

  /** Replaces the whole state with a snapshot's. Throws when the bytes are not one. */
  restore(bytes: Uint8Array): void {
    const image = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as MetaImage
    if (image.version !== 1)
      throw new Error(`meta snapshot version ${String(image.version)} is not supported`)
    this.#routeEpoch = image.routeEpoch
    this.#nextGroupId = image.nextGroupId
    this.#nextQueueId = image.nextQueueId ?? 1
    this.#nodes.clear()
    this.#groups.clear()
    this.#queues.clear()
    for (const n of image.nodes) this.#nodes.set(n.nodeId, n)
    for (const g of image.groups) this.#groups.set(g.groupId, g)
    for (const q of image.queues) this.#queues.set(q.name, q)
    this.tokens.replace(image.tokens ?? [])
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
