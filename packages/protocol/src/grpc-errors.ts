import {
  Metadata,
  type ServerUnaryCall,
  type ServiceError,
  type StatusObject,
  type sendUnaryData,
} from '@grpc/grpc-js'
import { CallContext, type UnaryCallContext } from './call-context'
import { ERROR_CODES, ErrorCode, GrpcStatus, isErrorCode } from './errors'
import { ErrorDetail } from './generated/mq/v1/errors'
import { type ErrorFacts, MqError, mqError } from './mq-error'
import { isRefusedRequest } from './request-guard'
import { shownCut, shownText } from './shown-text'

/** The trailing metadata key that carries the encoded ErrorDetail. */
export const ERROR_DETAIL_KEY = 'mq-error-bin'

/**
 * Characters of an error's message its gRPC status carries at most. A message may quote what
 * the caller sent (a name of 100,000 characters): grpc-js sends the message as a header, and
 * past ~70 KB the client got no status at all (its call ran to its deadline, or hung without
 * one), so a longer one is cut (`boundedText`).
 */
export const ERROR_DETAILS_CHARS_MAX = 1024

/**
 * `text`, or its first `max` characters at most followed by `… (N chars)` when it is longer
 * (shownCut: never cutting a surrogate pair in two, since a lone surrogate cannot be sent in a
 * header, nor an escape shownText wrote).
 */
export function boundedText(text: string, max: number): string {
  if (text.length <= max) return text
  return `${text.slice(0, shownCut(text, max))}… (${text.length} chars)`
}

/**
 * Turns an MqError into what a grpc-js handler passes to its callback (or `emit('error')`):
 * the code's gRPC status, the message (at most ERROR_DETAILS_CHARS_MAX characters of it, its
 * control characters escaped: shownText), and the typed detail in trailing metadata.
 */
export function toGrpcStatus(error: MqError): Partial<StatusObject> {
  const metadata = new Metadata()
  const detail: ErrorDetail = {
    code: error.code,
    retriable: error.retriable,
    leaderId: error.facts.leaderId ?? '',
    leaderAddress: error.facts.leaderAddress ?? '',
    epoch: error.facts.epoch ?? 0,
    groupId: error.facts.groupId ?? 0,
    ...(error.facts.messageIndex !== undefined ? { messageIndex: error.facts.messageIndex } : {}),
  }
  metadata.set(ERROR_DETAIL_KEY, Buffer.from(ErrorDetail.encode(detail).finish()))
  return {
    code: ERROR_CODES[error.code].status,
    details: boundedText(shownText(error.message), ERROR_DETAILS_CHARS_MAX),
    metadata,
  }
}

/**
 * grpc-js's INTERNAL messages for a message it could not encode or decode: this side's (a
 * request, an answer) or the server's (its answer, our request; until 2026-12-05, an audit,
 * those were retried as transport errors, each retry failing alike).
 */
const LOCAL_CODEC_FAILURE =
  /^(Request message serialization failure|Response message parsing error|Error serializing response|Error deserializing request)/

/**
 * Turns a failed call's error into the typed MqError it stands for. With an `mq-error-bin`
 * detail the code and facts come from it; without one (a transport failure, a deadline, a
 * server that is not mq) the gRPC status decides: unreachable, deadline and cancelled become
 * a retriable UnavailableError, INVALID_ARGUMENT an InvalidArgumentError, RESOURCE_EXHAUSTED
 * (grpc-js's own size limits) a non-retriable InvalidArgumentError saying so, UNAUTHENTICATED
 * and PERMISSION_DENIED theirs, INTERNAL (the transport's: a reset stream, a proxy) a retriable
 * UnavailableError unless grpc-js could not encode the request or decode the answer, the rest
 * an InternalError. The original error is the `cause`.
 */
export function fromGrpcError(error: ServiceError): MqError {
  const raw = error.metadata?.get(ERROR_DETAIL_KEY)[0]
  const message = error.details || error.message
  if (raw instanceof Buffer) {
    let detail: ErrorDetail | undefined
    try {
      detail = ErrorDetail.decode(raw)
    } catch {
      detail = undefined
    }
    if (detail && isErrorCode(detail.code)) {
      const facts: ErrorFacts = {
        ...(detail.leaderId ? { leaderId: detail.leaderId } : {}),
        ...(detail.leaderAddress ? { leaderAddress: detail.leaderAddress } : {}),
        ...(detail.epoch ? { epoch: detail.epoch } : {}),
        ...(detail.groupId ? { groupId: detail.groupId } : {}),
        ...(detail.messageIndex !== undefined ? { messageIndex: detail.messageIndex } : {}),
      }
      return mqError(detail.code, message, facts, { cause: error })
    }
    // A detail whose code this version does not know (a newer server's): its retriable flag
    // stands (until 2026-12-05, an audit, the status alone decided, and a retriable refusal
    // sent with RESOURCE_EXHAUSTED failed for good).
    if (detail && detail.code !== '') {
      const code = detail.retriable ? ErrorCode.Unavailable : ErrorCode.Internal
      return mqError(code, `${detail.code}: ${message}`, {}, { cause: error })
    }
  }
  switch (error.code) {
    case GrpcStatus.Unavailable:
    case GrpcStatus.DeadlineExceeded:
    case GrpcStatus.Cancelled:
    case GrpcStatus.Aborted:
      return mqError(ErrorCode.Unavailable, message, {}, { cause: error })
    case GrpcStatus.Internal:
      // grpc-js's own, on this side: a request it cannot encode or an answer it cannot decode,
      // which a retry would meet again.
      if (LOCAL_CODEC_FAILURE.test(message)) return mqError(ErrorCode.Internal, message, {}, { cause: error })
      // Else, without a detail, not an mq server's (its faults carry one): the transport's, e.g.
      // "Received RST_STREAM with code 2" from a connection reset or a proxy. Until 2026-12-02 it
      // was a non-retriable InternalError, and a consumer ended on a transport hiccup.
      return mqError(ErrorCode.Unavailable, `transport error (INTERNAL): ${message}`, {}, { cause: error })
    case GrpcStatus.InvalidArgument:
      return mqError(ErrorCode.InvalidArgument, message, {}, { cause: error })
    case GrpcStatus.ResourceExhausted:
      // Without a detail, grpc-js's own: a message over a size limit, which a retry resends
      // as it was (a full queue's LIMIT_EXCEEDED carries its detail).
      return mqError(
        ErrorCode.InvalidArgument,
        `a message is larger than gRPC allows (${message}): send smaller batches, or lease fewer messages`,
        {},
        { cause: error },
      )
    case GrpcStatus.Unauthenticated:
      return mqError(ErrorCode.Unauthenticated, message, {}, { cause: error })
    case GrpcStatus.PermissionDenied:
      return mqError(ErrorCode.PermissionDenied, message, {}, { cause: error })
    default:
      return mqError(ErrorCode.Internal, message, {}, { cause: error })
  }
}

/**
 * Adapts an async function to a grpc-js unary handler: its result is the response; a thrown
 * MqError travels as its typed status; anything else is a server fault and travels as an
 * InternalError that names it. A request the service's guard refused (a RefusedRequest: over a
 * limit, invalid UTF-8, a uint64 above 2^53 - 1, malformed) is answered with its
 * INVALID_ARGUMENT and `fn` never runs. `fn` may watch the call through its second argument: a
 * long wait can end when the client gives up on the call (cancel, deadline, lost connection).
 */
export function unaryHandler<Req, Res>(
  fn: (request: Req, call: UnaryCallContext) => Promise<Res>,
): (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => void {
  return (call, callback) => {
    const request: unknown = call.request
    if (isRefusedRequest(request)) {
      callback(toGrpcStatus(request.error))
      return
    }
    fn(call.request, new CallContext(call)).then(
      (response) => callback(null, response),
      (error: unknown) => {
        const typed =
          error instanceof MqError
            ? error
            : mqError(
                ErrorCode.Internal,
                `internal error: ${error instanceof Error ? error.message : String(error)}`,
                {},
                { cause: error },
              )
        callback(toGrpcStatus(typed))
      },
    )
  }
}
