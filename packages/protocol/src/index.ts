// The wire contract: generated messages and services (see proto/), the error codes, the
// typed errors and their mapping to and from gRPC statuses.

export type { ErrorCodeInfo } from './errors'
export { ERROR_CODES, ErrorCode, GrpcStatus, isErrorCode } from './errors'
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
  DeleteQueueRequest,
  DeleteQueueResponse,
  DescribeQueueRequest,
  GetRoutesRequest,
  GetRoutesResponse,
  GroupStatus,
  ListQueuesRequest,
  ListQueuesResponse,
  MetaClient,
  type MetaServer,
  MetaService,
  NodeStatus,
  PartitionRoute,
  QueueConfig,
  QueueConfigUpdate,
  QueueRoute,
  Replica,
  ScaleDataGroupsRequest,
  ScaleDataGroupsResponse,
  ScalePlan,
  TransferLeaderRequest,
  TransferLeaderResponse,
  UpdateQueueRequest,
} from './generated/mq/v1/meta'
export {
  CreateReplicaRequest,
  CreateReplicaRequest_Replica,
  InstallSnapshotResponse,
  PeerClient,
  type PeerServer,
  PeerService,
  RaftBatch,
  RaftConfState,
  RaftEntry,
  RaftMessage,
  RaftSnapshotMeta,
  RaftStreamEnd,
  RemoveReplicaRequest,
  ReplicaResponse,
  SnapshotChunk,
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
  NackRequest,
  PartitionTarget,
  ProduceMessage,
  ProduceRequest,
  ProduceResponse,
  QueueClient,
  type QueueServer,
  QueueService,
} from './generated/mq/v1/queue'
export { ERROR_DETAIL_KEY, fromGrpcError, toGrpcStatus } from './grpc-errors'
export type { ErrorFacts } from './mq-error'
export {
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  MqError,
  mqError,
  NotLeaderError,
  QueueExistsError,
  QueueNotFoundError,
  StaleRouteError,
  UnavailableError,
} from './mq-error'
