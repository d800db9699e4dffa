export { COMMAND_BYTES_MAX, COMMAND_CODEC_VERSION, decodeCommand, encodeCommand } from './codec'
export type {
  AckCommand,
  Command,
  CommandResult,
  ConfigureCommand,
  DeadMessage,
  EnqueueCommand,
  EnqueueMessage,
  ExtendCommand,
  Lease,
  LeaseCommand,
  NackCommand,
  PartitionCounters,
  PurgeDeadCommand,
  PurgeReadyCommand,
  QueueStats,
  RedriveDeadCommand,
  StoredMessage,
  TickCommand,
  WeightStats,
} from './commands'
export { CommandType, LeaseStatus } from './commands'
export type { QueueConfig } from './config'
export { QUEUE_CONFIG_DEFAULT, RETRY_BACKOFF_MS_MAX, retryBackoffMs, SchedulingMode } from './config'
export { DirectPartition } from './direct'
export {
  InvalidArgumentError,
  LimitExceededError,
  OutOfOrderSequenceError,
  QueueError,
  QueueErrorCode,
  SequenceGapError,
} from './errors'
export type { KeySpan } from './keys'
export type { Applied } from './partition'
export {
  LIST_BYTES_MAX,
  MESSAGE_META_CACHED_BYTES_MAX,
  MESSAGE_METAS_CACHED_MAX,
  NAME_BYTES_MAX,
  PENDING_APPLIES_MAX,
  PRODUCERS_CACHED_MAX,
  QueuePartition,
  STATS_AGES_MAX,
  TURNS_CACHED_MAX,
} from './partition'
export { READ_AHEAD_BUDGET, ReadAheadBudget } from './read-ahead-budget'
export { PRODUCER_BATCHES_KEPT } from './records'
export type { SchedulerState } from './scheduler'
export { VIRTUAL_TIME_RENORMALIZE_AT, WeightedScheduler } from './scheduler'
export {
  partitionKeySpan,
  readPartitionSnapshot,
  restorePartitionOps,
  SNAPSHOT_PAGE_ENTRIES_MAX,
} from './snapshot'
export { parseWeight, WEIGHT_DEFAULT, WEIGHT_MAX, WEIGHT_MIN } from './weight'
