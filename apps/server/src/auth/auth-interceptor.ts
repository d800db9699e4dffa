import { ServerInterceptingCall, type ServerInterceptor, status } from '@grpc/grpc-js'
import { MqError, toGrpcStatus } from '@mq/protocol'
import type { Logger } from '../log'
import type { AccessControl, Principal } from './access'
import { AuditRecord, principalName } from './audit-log'
import { checkPeerIdentity } from './peer-identity'

/**
 * The server interceptor that enforces AccessControl on every call before its handler sees
 * it: the caller is authenticated from the call's metadata, and authorized then (or, for a
 * queue-scoped method, on its request message). A refused call ends with the typed
 * UNAUTHENTICATED or PERMISSION_DENIED status and reaches no handler, so nothing changes.
 * With `access.peerIds`, a peer call that speaks for a node must carry a certificate naming
 * it (checkPeerIdentity), each message of a Raft stream included. Every administrative call
 * (AccessControl.audits) leaves one audit line when it ends, refused or not (audit-log.ts).
 */
export function authInterceptor(access: AccessControl, log: Logger): ServerInterceptor {
  return (descriptor, call) => {
    const method = descriptor.path.slice(1)
    let principal: Principal = { kind: 'anonymous' }
    let refused = false
    const audit = access.audits(method) ? new AuditRecord(log, method, call.getPeer()) : undefined
    // Authorized on the request message: a queue-scoped method (its queue is in it), and an
    // audited one (so that its audit line, refused or not, says what it asked for).
    const onMessage = access.needsRequest(method) || audit !== undefined
    let authorized = false
    const refuse = (error: unknown): void => {
      refused = true
      if (!(error instanceof MqError)) throw error
      log.info(
        { method, code: error.code, principal: principalName(principal) },
        `call refused: ${error.message}`,
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
              if (!onMessage) access.authorize(principal, method)
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
              if (onMessage) access.authorize(principal, method, message)
              authorized = true
              // Every message of a stream (each Raft batch names its sender).
              if (access.peerIds) checkPeerIdentity(method, message, call.getAuthContext().sslPeerCertificate)
            } catch (error) {
              refuse(error)
              return
            }
            nextMessage(message)
          },
          onReceiveHalfClose: (next) => {
            if (refused) return
            // A stream that sent no message still needs the caller's authorization.
            if (onMessage && !authorized) {
              try {
                access.authorize(principal, method)
              } catch (error) {
                refuse(error)
                return
              }
            }
            next()
          },
        }),
      sendStatus: (s, next) => {
        audit?.end(s.code, s.details)
        next(s)
      },
    })
  }
}
