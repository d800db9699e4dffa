/**
 * The wire error codes: every error a client can see carries one of these as its typed
 * detail, beside the gRPC status code it maps to. Defined once, here.
 */
export const ErrorCode = {
  NotLeader: 'NOT_LEADER',
  StaleRoute: 'STALE_ROUTE',
  QueueNotFound: 'QUEUE_NOT_FOUND',
  QueueExists: 'QUEUE_EXISTS',
  InvalidArgument: 'INVALID_ARGUMENT',
  LimitExceeded: 'LIMIT_EXCEEDED',
  Unavailable: 'UNAVAILABLE',
  Internal: 'INTERNAL',
  Unauthenticated: 'UNAUTHENTICATED',
  PermissionDenied: 'PERMISSION_DENIED',
  SequenceGap: 'SEQUENCE_GAP',
} as const
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode]

/** gRPC status codes used on the wire (numeric values from the gRPC spec). */
export const GrpcStatus = {
  Ok: 0,
  Cancelled: 1,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  PermissionDenied: 7,
  Internal: 13,
  Unavailable: 14,
  Unauthenticated: 16,
} as const
export type GrpcStatus = (typeof GrpcStatus)[keyof typeof GrpcStatus]

export interface ErrorCodeInfo {
  /** The gRPC status the error travels with. */
  readonly status: GrpcStatus
  /** Whether the same request may succeed when retried (after a refresh or a backoff). */
  readonly retriable: boolean
}

/** For each code: its gRPC status and whether a client should retry. */
export const ERROR_CODES: Readonly<Record<ErrorCode, ErrorCodeInfo>> = {
  NOT_LEADER: { status: GrpcStatus.Unavailable, retriable: true },
  STALE_ROUTE: { status: GrpcStatus.FailedPrecondition, retriable: true },
  QUEUE_NOT_FOUND: { status: GrpcStatus.NotFound, retriable: false },
  QUEUE_EXISTS: { status: GrpcStatus.AlreadyExists, retriable: false },
  INVALID_ARGUMENT: { status: GrpcStatus.InvalidArgument, retriable: false },
  LIMIT_EXCEEDED: { status: GrpcStatus.ResourceExhausted, retriable: true },
  UNAVAILABLE: { status: GrpcStatus.Unavailable, retriable: true },
  INTERNAL: { status: GrpcStatus.Internal, retriable: false },
  UNAUTHENTICATED: { status: GrpcStatus.Unauthenticated, retriable: false },
  PERMISSION_DENIED: { status: GrpcStatus.PermissionDenied, retriable: false },
  SEQUENCE_GAP: { status: GrpcStatus.Aborted, retriable: true },
}

/** Returns true when `value` is one of the wire error codes. */
export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ERROR_CODES, value)
}
