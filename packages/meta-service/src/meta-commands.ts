import type { QueueConfig, QueueConfigUpdate } from '@mq/protocol'
import type { ReplicaChangeReason } from './meta-state'

/**
 * The commands of the meta state machine: what the meta leader proposes through Raft and
 * every meta replica applies in log order. Plain JSON-serialisable values.
 */
export type MetaCommand =
  /**
   * A node's address and the format level its version reads and writes (absent: 1); from
   * FORMAT_LEVEL_STORE_ID its store id, and whether its data dir was empty at its start
   * (node-store.ts).
   */
  | {
      readonly type: 'registerNode'
      readonly nodeId: string
      readonly address: string
      readonly formatLevel?: number
      readonly storeId?: string
      readonly freshStore?: boolean
    }
  /**
   * A new data group on `replicas`. `groupId` (format level 29): the id it is to take, the
   * state's next one when the controller decided it; refused when another group took it.
   */
  | { readonly type: 'createGroup'; readonly replicas: readonly string[]; readonly groupId?: number }
  | { readonly type: 'removeGroup'; readonly groupId: number }
  | {
      readonly type: 'reportLeader'
      readonly groupId: number
      readonly leaderId: string
      readonly term: number
    }
  | { readonly type: 'createQueue'; readonly name: string; readonly config: Partial<QueueConfig> }
  | { readonly type: 'updateQueue'; readonly name: string; readonly update: QueueConfigUpdate }
  | { readonly type: 'deleteQueue'; readonly name: string }
  /** A client token: its name, the SHA-256 of its secret (never the secret), its roles and lifetime. */
  | {
      readonly type: 'putToken'
      readonly name: string
      readonly sha256: string
      readonly roles: readonly string[]
      /** How long it is valid from the entry's time; 0 or absent = it never expires. */
      readonly ttlMs?: number
    }
  | { readonly type: 'deleteToken'; readonly name: string }
  /** Sets the wanted number of data groups; the controller carries the plan out. */
  | { readonly type: 'scaleDataGroups'; readonly groups: number }
  /** Records a live move of one partition to another data group (phase copy). */
  | {
      readonly type: 'startMove'
      readonly queue: string
      readonly partition: number
      readonly toGroup: number
    }
  /** The target group holds the partition: route it there (phase drop; the route epoch bumps). */
  | { readonly type: 'completeMove'; readonly moveId: number }
  /**
   * The move, still copying, is given up: the partition stays routed to its source group, which
   * lifts the move's fence next (phase abort; FORMAT_LEVEL_MOVE_ABORT).
   */
  | { readonly type: 'abortMove'; readonly moveId: number }
  /** The source group dropped its copy, or lifted an aborted move's fence: the move is over. */
  | { readonly type: 'finishMove'; readonly moveId: number }
  /** The scale plan is carried out (groups made or removed, partitions spread evenly). */
  | { readonly type: 'finishScale' }
  /** A meta leader has not heard from `nodeId` since `sinceMs` (it counts as dead); kept on a leader change. */
  | { readonly type: 'markSilent'; readonly nodeId: string; readonly sinceMs: number }
  /** A meta leader heard from `nodeId` again: the silence mark goes. */
  | { readonly type: 'markHeard'; readonly nodeId: string }
  /** Marks a node as draining: its data-group replicas move to other nodes. */
  | { readonly type: 'drainNode'; readonly nodeId: string }
  /** The node is no longer draining: it takes new replicas again (FORMAT_LEVEL_UNDRAIN). */
  | { readonly type: 'undrainNode'; readonly nodeId: string }
  /** Forgets a node that holds nothing (no replica, no meta vote, in no change). */
  | { readonly type: 'removeNode'; readonly nodeId: string }
  /** Records a membership change of a data group: `add` replaces `remove` ('' when growing). */
  | {
      readonly type: 'startReplicaChange'
      readonly groupId: number
      readonly add: string
      readonly remove: string
      readonly reason: ReplicaChangeReason
    }
  /** The node being added to data group `groupId` was lost before it became a voter: `add` instead. */
  | { readonly type: 'retargetReplicaChange'; readonly groupId: number; readonly add: string }
  /**
   * The node being added to data group `groupId` was lost before it became a voter and no other
   * can take its place: the change goes on adding and removing nobody, so the group's leader
   * removes that node's learner and the change finishes (FORMAT_LEVEL_ABANDON_CHANGE).
   */
  | { readonly type: 'abandonReplicaChange'; readonly groupId: number }
  /**
   * The group's Raft membership changed: `add` is a voter, `remove` is gone; for a shrink,
   * `removed` when its leader removed another voter instead (one away: replica-changer.ts);
   * for a change given up, the replica a replacement's leader had removed first, if any.
   */
  | { readonly type: 'finishReplicaChange'; readonly groupId: number; readonly removed?: string }
  /** Records the meta group's founding voters (the first meta leader; a no-op once recorded). */
  | { readonly type: 'initMetaMembers'; readonly voters: readonly string[] }
  /** Records a membership change of the meta group: `add` replaces `remove` ('' when growing or shrinking). */
  | {
      readonly type: 'startMetaChange'
      readonly add: string
      readonly remove: string
      readonly reason: ReplicaChangeReason
    }
  /** The node being added to the meta group was lost before it became a voter: `add` instead. */
  | { readonly type: 'retargetMetaChange'; readonly add: string }
  /**
   * The node being added to the meta group was lost before it became a voter and no other can
   * take its place: the change adds and removes nobody from then on (FORMAT_LEVEL_ABANDON_CHANGE).
   */
  | { readonly type: 'abandonMetaChange' }
  /**
   * The meta group's Raft membership changed: `add` is a voter, `remove` is gone; for a change
   * given up, `removed` when the voter it was replacing had gone before (removed first): the
   * size the group had is then wanted (unless one was set), so it grows back to it.
   */
  | { readonly type: 'finishMetaChange'; readonly removed?: string }
  /** The meta group is to keep `voters` voters (1, 3, 5 or 7): the controller grows or shrinks it. */
  | { readonly type: 'setMetaVoters'; readonly voters: number }
  /**
   * Replicas per data group (1 to 7): the controller grows or shrinks the groups to it
   * (FORMAT_LEVEL_REPLICATION_FACTOR). `initial`: only when none is recorded yet (the first
   * meta leader's own setting, which must not replace an operator's).
   */
  | { readonly type: 'setReplicationFactor'; readonly factor: number; readonly initial?: boolean }
  /**
   * The data groups wanted before any scale plan (0: as many as live nodes), recorded once (the
   * first meta leader's own `"dataGroups"`; FORMAT_LEVEL_DATA_GROUPS): a later one, with
   * another setting, does not replace it. A scale plan (`mq group scale`) overrides it.
   */
  | { readonly type: 'recordDataGroups'; readonly count: number }

export type MetaCommandType = MetaCommand['type']

const COMMAND_TYPES: ReadonlySet<string> = new Set<MetaCommandType>([
  'registerNode',
  'createGroup',
  'removeGroup',
  'reportLeader',
  'createQueue',
  'updateQueue',
  'deleteQueue',
  'putToken',
  'deleteToken',
  'scaleDataGroups',
  'startMove',
  'completeMove',
  'abortMove',
  'finishMove',
  'finishScale',
  'drainNode',
  'undrainNode',
  'removeNode',
  'markSilent',
  'markHeard',
  'startReplicaChange',
  'retargetReplicaChange',
  'abandonReplicaChange',
  'finishReplicaChange',
  'initMetaMembers',
  'startMetaChange',
  'retargetMetaChange',
  'abandonMetaChange',
  'finishMetaChange',
  'setMetaVoters',
  'setReplicationFactor',
  'recordDataGroups',
])

const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Encodes a command as the bytes of a Raft entry (UTF-8 JSON). */
export function encodeMetaCommand(command: MetaCommand): Uint8Array {
  return encoder.encode(JSON.stringify(command))
}

/**
 * Keys no command has: an object decoded with one of them as a value that is not a function
 * (`{"toString": 0}`) throws when made a string, as apply's refusals do with what they name,
 * and a throw in apply would stop every meta replica on the same entry.
 */
const CONVERSION_KEYS = new Set(['toString', 'valueOf', 'toJSON'])

/**
 * Decodes a Raft entry's bytes into a command. Returns undefined when the bytes are not a
 * command this version knows (the state machine then records the entry as rejected, the
 * same way on every replica).
 */
export function decodeMetaCommand(bytes: Uint8Array): MetaCommand | undefined {
  let value: unknown
  let convertible = true
  try {
    value = JSON.parse(decoder.decode(bytes), (key, v: unknown) => {
      if (CONVERSION_KEYS.has(key)) convertible = false
      return v
    })
  } catch {
    return undefined
  }
  if (!convertible) return undefined
  if (typeof value !== 'object' || value === null) return undefined
  const type = (value as { type?: unknown }).type
  return typeof type === 'string' && COMMAND_TYPES.has(type) ? (value as MetaCommand) : undefined
}
