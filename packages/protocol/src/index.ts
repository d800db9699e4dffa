export { RECONNECT_CHANNEL_OPTIONS } from './channel-options'
export { SERVER_NODE_FLAGS } from './server-node-flags'

// The wire contract: generated messages and services (see proto/), the error codes, the
// typed errors and their mapping to and from gRPC statuses.

export type { UnaryCallContext } from './call-context'
export type { ErrorCodeInfo } from './errors'
export { ERROR_CODES, ErrorCode, GrpcStatus, isErrorCode } from './errors'
export {
  belowClusterLevelMessage,
  FORMAT_LEVEL,
  FORMAT_LEVEL_DEAD_LETTER_QUEUE,
  FORMAT_LEVEL_DELIVERY_RATE,
  FORMAT_LEVEL_DROP_IMPORT,
  FORMAT_LEVEL_GROW_PARTITIONS,
  FORMAT_LEVEL_LEASE_BYTES,
  FORMAT_LEVEL_LEASE_TAGS,
  FORMAT_LEVEL_MESSAGE_TTL,
  FORMAT_LEVEL_META_MEMBERS,
  FORMAT_LEVEL_META_SIZE,
  FORMAT_LEVEL_MOVE_IDS,
  FORMAT_LEVEL_ORDERED_KEYS,
  FORMAT_LEVEL_PARTITION_CLOCK,
  FORMAT_LEVEL_PAUSE,
  FORMAT_LEVEL_PIPELINING,
  FORMAT_LEVEL_PLACE_LIVE_REMOVING,
  FORMAT_LEVEL_RELEASE,
  FORMAT_LEVEL_REMOVE_NODE,
  FORMAT_LEVEL_REPLICA_RETARGET,
  FORMAT_LEVEL_RETIRE,
  FORMAT_LEVEL_RETRY_BACKOFF,
  FORMAT_LEVEL_SILENCE,
  FORMAT_LEVEL_STORE_ID,
  FORMAT_LEVEL_TOKEN_TTL,
  FORMAT_LEVEL_TTL_REDRIVE_LINES,
  formatLevelOf,
  saysBelowClusterLevel,
} from './format-level'
export { freePort } from './free-port'
export {
  HealthCheckRequest,
  HealthCheckResponse,
  HealthCheckResponse_ServingStatus,
  HealthClient,
  type HealthServer,
  HealthService,
} from './generated/grpc/health/v1/health'
export { ErrorDetail } from './generated/mq/v1/errors'
export {
  ClusterStatusRequest,
  ClusterStatusResponse,
  CreateQueueRequest,
  CreateTokenRequest,
  CreateTokenResponse,
  DeleteQueueRequest,
  DeleteQueueResponse,
  DeleteTokenRequest,
  DeleteTokenResponse,
  DescribeQueueRequest,
  DrainNodeRequest,
  DrainNodeResponse,
  GetRoutesRequest,
  GetRoutesResponse,
  GroupStatus,
  ListQueuesRequest,
  ListQueuesResponse,
  ListTokensRequest,
  ListTokensResponse,
  MetaClient,
  type MetaServer,
  NodeStatus,
  PartitionMove,
  PartitionRoute,
  QueueConfig,
  QueueConfigUpdate,
  QueueRoute,
  RemoveNodeRequest,
  RemoveNodeResponse,
  Replica,
  ScaleDataGroupsRequest,
  ScaleDataGroupsResponse,
  ScalePlan,
  TokenInfo,
  TransferLeaderRequest,
  TransferLeaderResponse,
  UpdateQueueRequest,
} from './generated/mq/v1/meta'
export {
  ChangeReplicasRequest,
  ChangeReplicasResponse,
  FencePartitionsRequest,
  FencePartitionsResponse,
  FetchImageRequest,
  FetchImageResponse,
  GroupAssignment,
  GroupReport,
  HeartbeatRequest,
  HeartbeatResponse,
  ImportPartitionRequest,
  ImportPartitionResponse,
  LeaderTransfer,
  MovePartitionRequest,
  MovePartitionResponse,
  NodeAddress,
  type PeerServer,
  ProbeRequest,
  ProbeResponse,
  RaftBatch,
  RaftConfState,
  RaftEntry,
  RaftMessage,
  RaftSnapshotChunk,
  RaftSnapshotMeta,
  RaftStreamEnd,
  StoredToken,
} from './generated/mq/v1/peer'
export {
  AckRequest,
  ExtendRequest,
  LeasedMessage,
  LeaseOutcome,
  LeaseRequest,
  LeaseResponse,
  LeaseResult,
  LeaseResultsResponse,
  ListDeadRequest,
  ListReadyRequest,
  NackRequest,
  PartitionStats,
  PartitionTarget,
  ProduceMessage,
  ProduceRequest,
  ProduceResponse,
  PurgeRequest,
  PurgeResponse,
  type QueueServer,
  RedriveRequest,
  RedriveResponse,
  StatsRequest,
  WeightStats,
} from './generated/mq/v1/queue'
export { GROUP_CLOCK_CATCH_UP, leaseHoldMs } from './group-clock'
export { ERROR_DETAIL_KEY, fromGrpcError, toGrpcStatus, unaryHandler } from './grpc-errors'
export type { ErrorFacts } from './mq-error'
export {
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  MqError,
  mqError,
  NotLeaderError,
  PermissionDeniedError,
  QueueExistsError,
  QueueNotFoundError,
  SequenceGapError,
  StaleRouteError,
  UnauthenticatedError,
  UnavailableError,
} from './mq-error'
export { IDEMPOTENT_BATCHES_IN_FLIGHT_MAX } from './producer-window'
export { QUEUE_MAX_DELIVERIES_MAX, QUEUE_PARTITIONS_MAX } from './queue-limits'
export { QUEUE_NAME_LENGTH_MAX, queueNameProblem } from './queue-name'
export { isRefusedRequest, RefusedRequest } from './request-guard'
export {
  CREATE_TOKEN_ROLES_MAX,
  GET_ROUTES_QUEUES_MAX,
  HEADERS_PER_MESSAGE_MAX,
  LEASE_IDS_MAX,
  PRODUCE_MESSAGES_MAX,
  REQUEST_FIELDS_MAX,
} from './request-limits'
export { MetaService, PeerClient, PeerService, QueueClient, QueueService } from './services'
export { waitServing } from './wait-serving'
