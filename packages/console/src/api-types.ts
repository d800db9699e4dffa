/**
 * The JSON API mq-server serves for the console (`/api/...`), shared by the server that
 * writes it and the page that reads it. Numbers are plain JSON numbers (indexes and counts
 * stay below 2^53); times are ms since the epoch, ages and durations are ms.
 */

/** `GET /api/session`: who is asking and what the page may offer. */
export interface SessionInfo {
  /** The node that served the request. */
  readonly nodeId: string
  /** True when the cluster authenticates clients (`--auth-file`): the API needs a token. */
  readonly auth: boolean
  /** The token's name ('' = no token given). */
  readonly tokenName: string
  /** The token's roles, as `admin`, `producer:PATTERN`, `consumer:PATTERN`, `viewer:PATTERN`. */
  readonly roles: readonly string[]
  /** True when admin actions are allowed: auth is on and the token has the admin role. */
  readonly admin: boolean
}

export interface NodeInfo {
  readonly nodeId: string
  readonly address: string
  readonly alive: boolean
  /** Being drained: its replicas move off, and it takes none (undrain takes it back). */
  readonly draining: boolean
  readonly lastHeartbeatMs: number
  /** The groups this node hosts a replica of (0 = meta). */
  readonly groupIds: readonly number[]
  /** The groups whose leader this node is. */
  readonly leaderOf: readonly number[]
}

export interface ReplicaInfo {
  readonly nodeId: string
  readonly learner: boolean
  /** The index this replica last reported as applied (0: not reported yet). */
  readonly appliedIndex: number
  /** The group's commit index (as its leader reported it) minus this replica's applied index. */
  readonly lag: number
}

export interface GroupInfo {
  readonly groupId: number
  readonly leaderId: string
  readonly term: number
  readonly replicas: readonly ReplicaInfo[]
  readonly commitIndex: number
  readonly appliedIndex: number
  /** commitIndex − appliedIndex on the leader, as last reported to the meta group. */
  readonly applyLag: number
  readonly state: string
  /** How many partitions are routed to this group. */
  readonly partitionCount: number
  /**
   * The partitions routed to this group, as `queue/partition`, sorted; empty when the cluster
   * holds more than NAMED_PARTITIONS_MAX partitions (naming them would list every queue at
   * each poll): `partitionCount` then says how many.
   */
  readonly partitions: readonly string[]
}

/** Up to this many partitions in the cluster, the groups view names them. */
export const NAMED_PARTITIONS_MAX = 1_000

export interface ScaleInfo {
  readonly targetGroups: number
  readonly movesTotal: number
  readonly movesDone: number
  readonly state: string
}

export interface MoveInfo {
  readonly moveId: number
  readonly queue: string
  readonly partition: number
  readonly fromGroup: number
  readonly toGroup: number
  readonly phase: string
  readonly startedAtMs: number
}

/** The meta group's membership. */
export interface MetaGroupInfo {
  readonly voters: readonly string[]
  /** The size an operator set (`mq cluster meta-voters`); 0 = as many as it has. */
  readonly votersWanted: number
  /** For people: voters, the size wanted, a learner, the change under way (router-client's `metaGroupSummary`). */
  readonly summary: string
  /** The sizes the meta group may keep (protocol's META_VOTER_COUNTS). */
  readonly voterChoices: readonly number[]
}

/** `GET /api/cluster`: the cluster as the meta leader sees it. */
export interface ClusterInfo {
  readonly servedBy: string
  readonly metaLeaderId: string
  readonly meta: MetaGroupInfo
  /** Replicas per data group (`mq cluster replication`); 0 = none recorded yet. */
  readonly replicationFactor: number
  /** For people (router-client's `replicationSummary`). */
  readonly replication: string
  /** The factors the cluster may have: 1 to protocol's REPLICAS_PER_GROUP_MAX. */
  readonly replicationChoices: readonly number[]
  readonly routeEpoch: number
  readonly nodes: readonly NodeInfo[]
  readonly groups: readonly GroupInfo[]
  /** The scaling under way or last finished, when there was one. */
  readonly scale: ScaleInfo | null
  readonly moves: readonly MoveInfo[]
  readonly atMs: number
}

export interface QueueConfigInfo {
  readonly partitions: number
  readonly visibilityTimeoutMs: number
  readonly maxDeliveries: number
  readonly deadLetterQueue: string
  readonly messageBytesMax: number
  readonly queueLengthMax: number
  readonly strictPriority: boolean
  readonly dedupWindowMs: number
  readonly engine: string
  /** How long a message may wait to be delivered (0 = until consumed). */
  readonly messageTtlMs: number
  /** Delivery paused: consumers get nothing until it is resumed. */
  readonly paused: boolean
  /** A key's messages are delivered one at a time, in the order they arrived (set at creation). */
  readonly orderedKeys: boolean
  /** Messages handed out per second over the whole queue, at most (0 = no limit). */
  readonly deliveryRate: number
  /** A failed delivery waits this long before it is delivered again, doubling per attempt (0 = at once). */
  readonly retryBackoffMinMs: number
  /** The longest retry backoff. */
  readonly retryBackoffMaxMs: number
}

/** Counts of one queue's weight (or the part of a queue's depth by weight) over its partitions. */
export interface Counts {
  readonly ready: number
  readonly delayed: number
  /** In flight: leased and not settled yet. */
  readonly leased: number
  readonly dead: number
  /** Age of the oldest ready message over all partitions (0 = none). */
  readonly oldestAgeMs: number
}

/** Counts of one queue summed over its partitions. */
export interface Depth extends Counts {
  /** In line behind an earlier message of their key (ordered keys); in no weight's counts. */
  readonly waiting: number
}

export interface WeightInfo extends Counts {
  readonly weight: number
  /** The scheduler's share for this weight, over the partitions (see the README). */
  readonly targetShare: number
  /** The share of recent leases this weight got, over the partitions. */
  readonly achievedShare: number
}

export interface PartitionInfo {
  readonly partition: number
  readonly groupId: number
  readonly leaderId: string
  readonly messages: number
  readonly windowLeases: number
  /** Messages waiting behind an earlier one of their key (a queue with ordered keys). */
  readonly waiting: number
}

/** Ready messages `GET /api/queues/NAME/peek` lists per partition, at most (without delivering them). */
export const PEEK_PER_PARTITION = 10
/** Characters of a peeked body shown, at most. */
export const PEEK_BODY_CHARS = 200

/**
 * One ready message of `GET /api/queues/NAME/peek` (Queue.ListReady: not delivered, not
 * leased). Without auth on the cluster a peek answers 403 PEEK_DISABLED unless the node was
 * started with `--console-peek`.
 */
export interface PeekedMessage {
  readonly partition: number
  readonly id: number
  readonly weight: number
  readonly deliveryCount: number
  readonly key: string
  /** The body as UTF-8 text, or `base64:…` when it is not UTF-8; cut at PEEK_BODY_CHARS (…). */
  readonly body: string
  readonly enqueuedAtMs: number
}

/** One row of `GET /api/queues`. */
export interface QueueSummary {
  readonly name: string
  readonly config: QueueConfigInfo
  /** Totals, or null when the queue's stats could not be read (see `error`). */
  readonly depth: Depth | null
  readonly error: string
}

/** One sample of a queue's history, taken when its detail was read. */
/** What a queue's partitions have done since they were created, summed (replicated counters). */
export interface Counters {
  readonly enqueued: number
  /** Leases handed out (first deliveries and redeliveries). */
  readonly delivered: number
  readonly acked: number
  readonly nacked: number
  /** Leases that passed their deadline unsettled. */
  readonly expired: number
  readonly deadLettered: number
  /** Ready messages deleted because they outlived the queue's message TTL. */
  readonly discarded: number
}

export interface QueueSample {
  readonly atMs: number
  readonly depth: Depth
  readonly counters: Counters
  /** At most 16 weights: those with the largest target share (a queue may have 1,000). */
  readonly weights: readonly Pick<WeightInfo, 'weight' | 'ready' | 'targetShare' | 'achievedShare'>[]
}

/** `GET /api/queues/:name`. */
export interface QueueDetail {
  readonly name: string
  readonly queueId: number
  readonly routeEpoch: number
  readonly config: QueueConfigInfo
  readonly depth: Depth
  readonly weights: readonly WeightInfo[]
  readonly partitions: readonly PartitionInfo[]
  /** Samples of the last minutes (oldest first), kept by the serving node while the queue is watched. */
  readonly history: readonly QueueSample[]
  /** Net change of the stored messages per second over the history (negative = draining). */
  readonly netRatePerS: number
  /** The partitions' counters, summed (since the queue was created). */
  readonly counters: Counters
  /** Each counter's change per second over the last minute of the history. */
  readonly ratesPerS: Counters
  /**
   * Whether this caller may peek at the queue's ready messages (`GET …/peek`): a token that
   * may consume it on a cluster with auth, anyone on a node started with `--console-peek`.
   */
  readonly mayPeek: boolean
}

/** The body of every error answer. */
export interface ApiError {
  readonly error: { readonly code: string; readonly message: string }
}

/** The admin actions (`POST /api/...`) and their bodies. */
export interface CreateQueueBody {
  readonly name: string
  readonly config?: Partial<QueueConfigInfo>
}
export type UpdateQueueBody = Partial<
  Pick<
    QueueConfigInfo,
    | 'partitions'
    | 'visibilityTimeoutMs'
    | 'maxDeliveries'
    | 'deadLetterQueue'
    | 'messageBytesMax'
    | 'queueLengthMax'
    | 'strictPriority'
    | 'dedupWindowMs'
    | 'messageTtlMs'
    | 'paused'
    | 'deliveryRate'
    | 'retryBackoffMinMs'
    | 'retryBackoffMaxMs'
  >
>
export interface ScaleBody {
  readonly groups: number
}
export interface TransferBody {
  readonly toNodeId: string
}
/** What an admin action answers. */
export interface ActionResult {
  readonly ok: true
  readonly message: string
}
