export { QUEUE_NAME_LENGTH_MAX, queueNameProblem } from '@mq/protocol'
export type { LeaderTransfer } from './leader-balance'
export { preferredLeaders, transfersByNode, transfersFor } from './leader-balance'
export type { LeaderBalanceInput } from './leader-balance-cache'
export { LeaderBalanceCache } from './leader-balance-cache'
export type { MetaCommand, MetaCommandType } from './meta-commands'
export { decodeMetaCommand, encodeMetaCommand } from './meta-commands'
export type { ControllerPort, MetaGroupPort, MetaHandlerOptions } from './meta-handlers'
export { metaHandlers } from './meta-handlers'
export type { MetaChange, MetaPlanInput } from './meta-plan'
export { metaChangeAction } from './meta-plan'
export type {
  GroupRecord,
  MetaResult,
  MoveRecord,
  NodeRecord,
  PartitionRecord,
  QueueRecord,
  QueueScope,
  ReplicaChangeRecord,
  ScaleRecord,
} from './meta-state'
export {
  META_LIMITS,
  MetaState,
  MovePhase,
  ReplicaChangeReason,
  removedNodeMessage,
  replicationFactorError,
  saysNodeRemoved,
} from './meta-state'
export type { RegisteredStore, StoreClaim } from './node-store'
export {
  FRESH_STORE_GRACE_MS,
  isStoreId,
  saysStoreReplaced,
  storeConflict,
  storeReplacedMessage,
} from './node-store'
export { chooseReplicaNodes } from './placement'
export type { QueueSettings, StorageEngine } from './queue-config'
export {
  applyQueueConfigUpdate,
  QUEUE_DEFAULTS,
  QUEUE_LIMITS,
  resolveQueueConfig,
  STORAGE_ENGINES,
} from './queue-config'
export type { ReplicaChange, ReplicaInput } from './replica-plan'
export { replicaActions, replicasFor } from './replica-plan'
export type { Liveness } from './routes'
export { groupStatusesOf, nodeStatusesOf, replicasOf, routeOf } from './routes'
export type { ControlAction, ControlInput, ScaleProgress } from './scale-plan'
export { controlActions, planMoves, scaleProgress } from './scale-plan'
export { tokenDigest } from './token-handlers'
export type { TokenRecord } from './token-registry'
export { TOKEN_TTL_MS_MAX, TOKENS_MAX, TokenRegistry } from './token-registry'
export type { Role } from './token-roles'
export {
  formatRole,
  globMatches,
  parseRole,
  ROLES_PER_TOKEN_MAX,
  TOKEN_NAME_PATTERN,
  TOKEN_SHA256_PATTERN,
} from './token-roles'
