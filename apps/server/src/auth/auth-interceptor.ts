import { ServerInterceptingCall, type ServerInterceptor, status } from '@grpc/grpc-js'
import { MqError, toGrpcStatus } from '@mq/protocol'
import type { Logger } from '../log'
import type { AccessControl, Principal } from './access'
import { checkPeerIdentity } from './peer-identity'

/**
 * The server interceptor that enforces AccessControl on every call before its handler sees
 * it: the caller is authenticated from the call's metadata, and authorized then (or, for a
 * queue-scoped method, on its request message). A refused call ends with the typed
 * UNAUTHENTICATED or PERMISSION_DENIED status and reaches no handler, so nothing changes.
 * With `access.peerIds`, a peer call that speaks for a node must carry a certificate naming
 * it (checkPeerIdentity), each message of a Raft stream included.
 */
export function authInterceptor(access: AccessControl, log: Logger): ServerInterceptor {
  return (descriptor, call) => {
    const method = descriptor.path.slice(1)
    let principal: Principal = { kind: 'anonymous' }
    let refused = false
    const refuse = (error: unknown): void => {
      refused = true
      if (!(error instanceof MqError)) throw error
      log.info({ method, code: error.code, principal: describe(principal) }, `call refused: ${error.message}`)
      const s = toGrpcStatus(error)
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
              if (!access.needsRequest(method)) access.authorize(principal, method)
            } catch (error) {
              refuse(error)
              return
            }
            nextMetadata(metadata)
          },
          onReceiveMessage: (message, nextMessage) => {
            if (refused) return
            try {
              if (access.needsRequest(method)) access.authorize(principal, method, message)
              // Every message of a stream (each Raft batch names its sender).
              if (access.peerIds) checkPeerIdentity(method, message, call.getAuthContext().sslPeerCertificate)
            } catch (error) {
              refuse(error)
              return
            }
            nextMessage(message)
          },
          onReceiveHalfClose: (next) => {
            if (!refused) next()
          },
        }),
    })
  }
}

function describe(p: Principal): string {
  return p.kind === 'token' ? `token:${p.name}` : p.kind
}
