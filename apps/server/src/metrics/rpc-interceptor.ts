import { Metadata, ServerInterceptingCall, type ServerInterceptor, status } from '@grpc/grpc-js'
import type { Logger } from '../log'
import type { NodeMetrics } from './node-metrics'
import { countQueueOps } from './queue-ops'

/** The metadata key of a call's request id (taken from the caller when given, else made here; echoed back). */
export const REQUEST_ID_KEY = 'x-request-id'
const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/
const STATUS_NAMES = new Map<number, string>(
  Object.entries(status).map(([name, code]) => [code as number, name]),
)
/** Codes that mean the server failed (logged at warn); the others are the caller's or routine. */
const SERVER_FAULTS: ReadonlySet<number> = new Set([status.INTERNAL, status.UNKNOWN, status.DATA_LOSS])

/**
 * The outermost server interceptor: gives each call a request id, times it into
 * mq_rpc_duration_seconds{method, code}, counts the queue operations of successful Queue
 * calls, and logs the call (debug; warn when the server failed) with its request id.
 */
export function rpcInterceptor(metrics: NodeMetrics, log: Logger, nodeId: string): ServerInterceptor {
  let sequence = 0
  return (descriptor, call) => {
    const method = descriptor.path.slice(1)
    const startedNs = process.hrtime.bigint()
    let requestId = ''
    let request: unknown
    let response: unknown
    /** Set once the call is timed: its status sent through here, or it ended without one. */
    let timed = false
    /** The call's log fields as it ends with `code`, and whether this end timed it (the first). */
    const end = (code: string) => {
      const seconds = Number(process.hrtime.bigint() - startedNs) / 1e9
      const first = !timed
      timed = true
      if (first) metrics.rpcSeconds.observe({ method, code }, seconds)
      return { first, fields: { requestId, method, code, ms: Math.round(seconds * 1e4) / 10 } }
    }
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, nextMetadata) => {
            const given = metadata.get(REQUEST_ID_KEY)[0]
            requestId =
              typeof given === 'string' && REQUEST_ID_PATTERN.test(given)
                ? given
                : `${nodeId}-${(++sequence).toString(36)}`
            nextMetadata(metadata)
          },
          onReceiveMessage: (message, nextMessage) => {
            // Unary calls only (a stream's messages are not counted, nor kept).
            if (!descriptor.requestStream) request = message
            nextMessage(message)
          },
          // Also after a status sent here. Otherwise the call ended without one through here:
          // cancelled by its caller, or past its deadline (grpc-js answers that itself).
          onCancel: () => {
            if (timed) return
            log.debug(
              end(Number(call.getDeadline()) <= Date.now() ? 'DEADLINE_EXCEEDED' : 'CANCELLED').fields,
              'rpc',
            )
          },
        }),
      sendMetadata: (metadata, next) => {
        if (requestId) metadata.set(REQUEST_ID_KEY, requestId)
        next(metadata)
      },
      sendMessage: (message, next) => {
        if (!descriptor.responseStream) response = message
        next(message)
      },
      sendStatus: (s, next) => {
        // Timed already when it ended before (cancelled): the operations it did are counted still.
        const { first, fields } = end(STATUS_NAMES.get(s.code) ?? String(s.code))
        if (s.code === status.OK) countQueueOps(metrics, descriptor.path, request, response)
        if (SERVER_FAULTS.has(s.code)) log.warn({ ...fields, details: s.details }, 'rpc failed')
        else if (first) log.debug(fields, 'rpc')
        // Errors usually end a call before any header: the trailers carry the request id then.
        const trailers = s.metadata ?? new Metadata()
        if (requestId && trailers.get(REQUEST_ID_KEY).length === 0) trailers.set(REQUEST_ID_KEY, requestId)
        next({ ...s, metadata: trailers })
      },
    })
  }
}
