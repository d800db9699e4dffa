import { type ErrorCode, isErrorCode } from '@mq/protocol'

/** A console API request that cannot be served as sent: its HTTP status, a stable code, what to do. */
export class ApiRequestError extends Error {
  override readonly name = 'ApiRequestError'
  readonly retriable = false
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The methods the route takes (a 405's `Allow` header). */
    readonly allow?: string,
  ) {
    super(message)
  }
}

const HTTP_STATUS: Readonly<Record<ErrorCode, number>> = {
  NOT_LEADER: 503,
  STALE_ROUTE: 503,
  QUEUE_NOT_FOUND: 404,
  QUEUE_EXISTS: 409,
  INVALID_ARGUMENT: 400,
  LIMIT_EXCEEDED: 429,
  UNAVAILABLE: 503,
  INTERNAL: 500,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  SEQUENCE_GAP: 409,
}

/** The HTTP status, code and message an error of the API or of the cluster is answered with. */
export function httpError(error: unknown): { status: number; code: string; message: string } {
  if (error instanceof ApiRequestError)
    return { status: error.status, code: error.code, message: error.message }
  const code = (error as { code?: unknown }).code
  const message = (error as Error).message ?? String(error)
  if (typeof code === 'string' && isErrorCode(code)) return { status: HTTP_STATUS[code], code, message }
  return { status: 502, code: 'CLUSTER_CALL_FAILED', message }
}
