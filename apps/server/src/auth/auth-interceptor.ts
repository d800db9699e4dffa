import { ServerInterceptingCall, type ServerInterceptor, status } from '@grpc/grpc-js'
import { boundedText, ERROR_DETAILS_CHARS_MAX, MqError, toGrpcStatus } from '@mq/protocol'
import type { Logger } from '../log'
import type { AccessControl, Principal } from './access'
import { AuditRecord, principalName } from './audit-log'
import { checkPeerIdentity } from './peer-identity'

/**
 * The server interceptor that enforces AccessControl on every call before its handler sees
 * it: the caller is authenticated from the call's metadata, and authorized then, or on its
 * request message for a queue-scoped method (its queue is in it) and for an administrative
 * one (so that its audit line says what it asked for; a caller without credentials is still
 * refused at once, its message unread). A method whose client streams is always authorized
 * when the call opens, since grpc-js starts its handler then. A refused call ends with the
 * typed UNAUTHENTICATED or PERMISSION_DENIED status and reaches no handler, so nothing
 * changes. With `access.peerIds`, a peer call that speaks for a node must carry a certificate
 * naming it (checkPeerIdentity), each message of a Raft stream included. Every administrative
 * call (AccessControl.audits) leaves one audit line when it ends (audit-log.ts).
 */
export function authInterceptor(access: AccessControl, log: Logger): ServerInterceptor {
  return (descriptor, call) => {
    const method = descriptor.path.slice(1)
    let principal: Principal = { kind: 'anonymous' }
    let refused = false
    /** Whether the request went on to the handler (its answer then ends the audit line). */
    let handedOn = false
    const audit = access.audits(method) ? new AuditRecord(log, method, call.getPeer()) : undefined
    const onMessage = !descriptor.requestStream && (access.needsRequest(method) || audit !== undefined)
    const refuse = (error: unknown): void => {
      refused = true
      if (!(error instanceof MqError)) throw error
      log.info(
        { method, code: error.code, principal: principalName(principal) },
        `call refused: ${boundedText(error.message, ERROR_DETAILS_CHARS_MAX)}`,
      )
      const s = toGrpcStatus(error)
      audit?.end(s.code ?? status.UNKNOWN, error.message)
      call.sendStatus({
        code: s.code ?? status.UNKNOWN,
        details: s.details ?? error.message,
        metadata: s.metadata,
      })
    }
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, nextMetadata) => {
            try {
              principal = access.authenticate(metadata)
              audit?.by(principal)
              if (!onMessage || (principal.kind === 'anonymous' && access.clientAuth))
                access.authorize(principal, method)
            } catch (error) {
              refuse(error)
              return
            }
            nextMetadata(metadata)
          },
          onReceiveMessage: (message, nextMessage) => {
            if (refused) return
            audit?.request(message)
            try {
              if (onMessage || access.needsRequest(method)) access.authorize(principal, method, message)
              // Every message of a stream (each Raft batch names its sender).
              if (access.peerIds) checkPeerIdentity(method, message, call.getAuthContext().sslPeerCertificate)
            } catch (error) {
              refuse(error)
              return
            }
            handedOn = true
            nextMessage(message)
          },
          onReceiveHalfClose: (next) => {
            if (refused) return
            // A unary call without its message never reaches a handler (grpc-js refuses it);
            // checked here all the same, should one come to the half-close unauthorized.
            if (onMessage && !handedOn) {
              try {
                access.authorize(principal, method)
              } catch (error) {
                refuse(error)
                return
              }
            }
            handedOn = true
            next()
          },
          onCancel: () => {
            // Ended without an answer from the handler: grpc-js refused the request (too large,
            // undecodable), or the client went away or its deadline passed before the handler
            // had it. After the handler has it, its answer (which no one reads) ends the line,
            // or, without one for AUDIT_ANSWER_WAIT_MS, a line saying the outcome is unknown.
            if (handedOn) audit?.cancelled()
            else audit?.end(status.CANCELLED, 'the call ended before its handler had the request')
          },
        }),
      sendMessage: (message, next) => {
        if (!descriptor.responseStream) audit?.answered()
        next(message)
      },
      sendStatus: (s, next) => {
        audit?.end(s.code, s.details)
        next(s)
      },
    })
  }
}
