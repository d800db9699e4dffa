import { type CallOptions, Metadata, type ServiceError } from '@grpc/grpc-js'
import { fromGrpcError } from '@mq/protocol'

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown

/**
 * Calls a unary gRPC method and resolves with its response; a failure rejects with the
 * typed MqError it stands for (see fromGrpcError). `deadlineMs` bounds the call.
 */
export function unary<Req, Res>(
  target: object,
  method: UnaryMethod<Req, Res>,
  request: Req,
  deadlineMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    method.call(target, request, new Metadata(), { deadline: Date.now() + deadlineMs }, (error, response) => {
      if (error) reject(fromGrpcError(error))
      else resolve(response)
    })
  })
}
