export { ChangeSignal } from './change-signal'
export type { DataCommand, ImportChunk } from './data-command'
export { decodeDataCommand, encodeDataCommand } from './data-command'
export type { DataApplied, DataResult, RefusalReason, WriteWatch } from './data-group'
export { DataGroupMachine } from './data-group'
export type { KeyPair } from './key-pairs'
export { decodePairs, encodePairs } from './key-pairs'
export type { LongPollTally } from './long-poll-waiters'
export type { PartitionRef } from './partition-key'
export {
  orphanPartitions,
  parsePartitionId,
  parseStoredQueueName,
  partitionId,
  queueNamesOf,
  storedQueueName,
} from './partition-key'
export type { DataGroupPort, DataNodePort, QueueHandlerLimits } from './queue-handlers'
export { DEFAULT_QUEUE_HANDLER_LIMITS, partitionNowMs, queueHandlers } from './queue-handlers'
export type { PartitionMoves } from './stale-move'
export { staleMove } from './stale-move'
export {
  configAtLevel,
  enqueueOf,
  errorOf,
  leasedMessageOf,
  leaseOf,
  outcomeOf,
  partitionConfigOf,
} from './wire-map'
