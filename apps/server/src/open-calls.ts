import { ServerInterceptingCall, type ServerInterceptor } from '@grpc/grpc-js'
import { PeerService } from '@mq/protocol'

/** Calls a node is serving now, peers' Raft streams not counted (those last as long as the peer runs). */
export interface OpenCalls {
  open: number
}

/**
 * A server interceptor counting the calls open in `tally`: one from the call's start to its end,
 * answered or cancelled (grpc-js tells each call's interceptors of its end once, whichever way
 * it ended). A node stopping reads it: grpc-js's graceful shutdown waits for every open call,
 * peers' Raft streams included, which they end only when they stop too (Node.stop).
 */
export function openCallsInterceptor(tally: OpenCalls): ServerInterceptor {
  return (descriptor, call) => {
    if (descriptor.path === PeerService.raft.path) return new ServerInterceptingCall(call)
    return new ServerInterceptingCall(call, {
      start: (next) => {
        tally.open++
        next({ onCancel: () => tally.open-- })
      },
    })
  }
}
