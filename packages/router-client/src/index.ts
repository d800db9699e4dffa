export {
  ErrorCode,
  InternalError,
  InvalidArgumentError,
  LEASE_VISIBILITY_MS_MAX,
  LimitExceededError,
  MESSAGE_DELAY_MS_MAX,
  META_VOTER_COUNTS,
  MqError,
  NotLeaderError,
  PermissionDeniedError,
  QUEUE_DAY_SETTING_MS_MAX,
  QUEUE_LENGTH_MAX,
  QUEUE_MAX_DELIVERIES_MAX,
  QUEUE_MESSAGE_BYTES_MAX,
  QUEUE_MESSAGE_TTL_MS_MAX,
  QUEUE_PARTITIONS_MAX,
  QueueExistsError,
  QueueNotFoundError,
  REPLICAS_PER_GROUP_MAX,
  StaleRouteError,
  shownCut,
  shownText,
  TOKEN_TTL_MS_MAX,
  UnauthenticatedError,
  UnavailableError,
  VISIBILITY_MS_MIN,
} from '@mq/protocol'
export type { ListedMessage, QueueOptions } from './admin'
export { Admin, PEEK_LIMIT_MAX } from './admin'
export type { BackoffPolicy } from './backoff'
export { backoffMs, DEFAULT_BACKOFF } from './backoff'
export type { EncodedBody } from './body-text'
export { encodeBody } from './body-text'
export type { ClientOptions, ConsumeOptions, Subscription } from './client'
export { MqClient } from './client'
export { ClientClosedError } from './client-closed-error'
export type { ConsumerOptions } from './consumer'
export { Consumer, DEFAULT_CONSUMER_OPTIONS, PREFETCH_MAX } from './consumer'
export { type TlsOptions, tokenProblem } from './credentials'
export { Delivery, LeaseLostError } from './delivery'
export { metaGroupSummary, metaVotersResult } from './meta-summary'
export { drainResult, undrainResult } from './node-summary'
export {
  fnv1a32,
  type KeylessPartitioning,
  type LaneLoad,
  Partitioner,
  type PartitionerOptions,
} from './partitioner'
export type { OutgoingMessage, ProducerOptions, SendResult } from './producer'
export { DEFAULT_PRODUCER_OPTIONS, Producer } from './producer'
export { replicationResult, replicationSummary } from './replication-summary'
export type { AttemptReport } from './router'
export { ConnectionRefusedError, notGrpc, PartitionNotFoundError } from './router'
export { SendOutcomeUnknownError } from './send-outcome-unknown-error'
export { SendTimeoutError } from './send-timeout-error'
