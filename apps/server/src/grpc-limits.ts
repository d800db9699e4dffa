import type { ServerOptions } from '@grpc/grpc-js'

/** The bounds of the gRPC port's connections (clients and peers alike). */
export interface GrpcLimits {
  /** One gRPC message, both ways (a produce batch, a Raft batch). */
  readonly messageBytesMax: number
  /**
   * Calls one connection (HTTP/2 session) may have open at once: a consumer's long polls (one
   * per partition it reads on that node) and its sends. Past it the client's HTTP/2 layer
   * waits for a call to end before it opens another.
   */
  readonly connectionCallsMax: number
  /**
   * After this long without a frame from a connection the node pings it, and closes it when
   * the ping is not answered within `keepaliveTimeoutMs`: a client whose machine died or
   * whose network dropped (a half-open TCP connection) no longer holds its long polls and
   * their buffers for ever (grpc-js's default is no pings at all).
   */
  readonly keepaliveMs: number
  readonly keepaliveTimeoutMs: number
}

export const GRPC_LIMITS: GrpcLimits = {
  messageBytesMax: 64 * 1024 * 1024,
  connectionCallsMax: 1_000,
  keepaliveMs: 60_000,
  keepaliveTimeoutMs: 20_000,
}

/** grpc-js server options for `limits` (interceptors and the like are the caller's to add). */
export function grpcServerOptions(limits: GrpcLimits = GRPC_LIMITS): ServerOptions {
  return {
    'grpc.max_receive_message_length': limits.messageBytesMax,
    'grpc.max_send_message_length': limits.messageBytesMax,
    'grpc.max_concurrent_streams': limits.connectionCallsMax,
    'grpc.keepalive_time_ms': limits.keepaliveMs,
    'grpc.keepalive_timeout_ms': limits.keepaliveTimeoutMs,
  }
}
