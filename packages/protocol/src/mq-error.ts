import { ERROR_CODES, ErrorCode } from './errors'

/** The optional facts an error carries beyond its code and message. */
export interface ErrorFacts {
  /** NOT_LEADER: the leader as far as the replica knows. */
  readonly leaderId?: string
  readonly leaderAddress?: string
  /** STALE_ROUTE: the current route epoch. */
  readonly epoch?: number
  /** The Raft group the error concerns (0 = meta). */
  readonly groupId?: number
  /**
   * INVALID_ARGUMENT of a Produce refused for one of its messages (none of the batch stored):
   * that message's place in the batch.
   */
  readonly messageIndex?: number
}

/**
 * Base of every error that crosses the wire: a stable `code`, whether a retry can help,
 * and the facts a client needs to retry in one hop (leader hint, current epoch).
 */
export abstract class MqError extends Error {
  abstract readonly code: ErrorCode
  readonly facts: ErrorFacts

  constructor(message: string, facts: ErrorFacts = {}, options?: ErrorOptions) {
    super(message, options)
    this.facts = facts
  }

  /** Whether the same request can succeed when retried. */
  get retriable(): boolean {
    return ERROR_CODES[this.code].retriable
  }
}

/** The replica is not the leader of its group; `facts` holds the leader hint. Retry there. */
export class NotLeaderError extends MqError {
  override readonly name = 'NotLeaderError'
  readonly code = ErrorCode.NotLeader
}

/** The request was routed by an old route epoch; refresh routes (`facts.epoch`) and retry. */
export class StaleRouteError extends MqError {
  override readonly name = 'StaleRouteError'
  readonly code = ErrorCode.StaleRoute
}

export class QueueNotFoundError extends MqError {
  override readonly name = 'QueueNotFoundError'
  readonly code = ErrorCode.QueueNotFound
}

export class QueueExistsError extends MqError {
  override readonly name = 'QueueExistsError'
  readonly code = ErrorCode.QueueExists
}

/** The request can never succeed as written; the message says what to fix. */
export class InvalidArgumentError extends MqError {
  override readonly name = 'InvalidArgumentError'
  readonly code = ErrorCode.InvalidArgument
}

/** A size, length or rate limit was reached and nothing changed; retry after a backoff. */
export class LimitExceededError extends MqError {
  override readonly name = 'LimitExceededError'
  readonly code = ErrorCode.LimitExceeded
}

/** The service could not be reached or had no leader in time; retry after a backoff. */
export class UnavailableError extends MqError {
  override readonly name = 'UnavailableError'
  readonly code = ErrorCode.Unavailable
}

/** A server-side failure that is not the caller's fault and that a retry will not fix. */
export class InternalError extends MqError {
  override readonly name = 'InternalError'
  readonly code = ErrorCode.Internal
}

/** The call carried no credentials, or ones the server does not know (a missing or wrong token). */
export class UnauthenticatedError extends MqError {
  override readonly name = 'UnauthenticatedError'
  readonly code = ErrorCode.Unauthenticated
}

/** The caller is known but its roles do not allow this call on this queue; nothing changed. */
export class PermissionDeniedError extends MqError {
  override readonly name = 'PermissionDeniedError'
  readonly code = ErrorCode.PermissionDenied
}

/**
 * A pipelining idempotent producer's batch overtook an earlier batch of its own that is still
 * in flight; nothing changed. Retry it once the earlier one is answered (the SDK does).
 */
export class SequenceGapError extends MqError {
  override readonly name = 'SequenceGapError'
  readonly code = ErrorCode.SequenceGap
}

type MqErrorClass = new (message: string, facts?: ErrorFacts, options?: ErrorOptions) => MqError

const CLASS_BY_CODE: Readonly<Record<ErrorCode, MqErrorClass>> = {
  NOT_LEADER: NotLeaderError,
  STALE_ROUTE: StaleRouteError,
  QUEUE_NOT_FOUND: QueueNotFoundError,
  QUEUE_EXISTS: QueueExistsError,
  INVALID_ARGUMENT: InvalidArgumentError,
  LIMIT_EXCEEDED: LimitExceededError,
  UNAVAILABLE: UnavailableError,
  INTERNAL: InternalError,
  UNAUTHENTICATED: UnauthenticatedError,
  PERMISSION_DENIED: PermissionDeniedError,
  SEQUENCE_GAP: SequenceGapError,
}

/** Builds the error class of `code`. */
export function mqError(
  code: ErrorCode,
  message: string,
  facts?: ErrorFacts,
  options?: ErrorOptions,
): MqError {
  return new CLASS_BY_CODE[code](message, facts, options)
}
