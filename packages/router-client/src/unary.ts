import { type CallOptions, type ClientUnaryCall, Metadata, type ServiceError } from '@grpc/grpc-js'
import { fromGrpcError } from '@mq/protocol'

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown

/**
 * Calls a unary gRPC method and resolves with its response; a failure rejects with the
 * typed MqError it stands for (see fromGrpcError). `deadlineMs` bounds the call. `signal`,
 * when it aborts, cancels the call (the server hears of it), which then rejects with the
 * signal's reason (not an MqError, so nothing retries it) unless its answer came first.
 */
export function unary<Req, Res>(
  target: object,
  method: UnaryMethod<Req, Res>,
  request: Req,
  deadlineMs: number,
  signal?: AbortSignal,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    const cancel = () => call.cancel()
    const call = method.call(
      target,
      request,
      new Metadata(),
      { deadline: Date.now() + deadlineMs },
      (error, response) => {
        signal?.removeEventListener('abort', cancel)
        // An answer that came anyway is the caller's (a lease's messages, to give back).
        if (!error) resolve(response)
        else reject(signal?.aborted ? signal.reason : fromGrpcError(error))
      },
    ) as ClientUnaryCall
    if (signal?.aborted) cancel()
    else signal?.addEventListener('abort', cancel, { once: true })
  })
}
