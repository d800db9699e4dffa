import {
  type ChannelOptions,
  type Client,
  credentials,
  makeGenericClientConstructor,
  type ServiceDefinition,
} from '@grpc/grpc-js'

/** A gRPC service of one unary method, `call`, whose requests and answers are raw bytes. */
export function bytesService(path: string): ServiceDefinition {
  const same = (b: Buffer) => b
  return {
    call: {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: same,
      requestDeserialize: same,
      responseSerialize: same,
      responseDeserialize: same,
    },
  }
}

/** A client of `service` (bytesService) on 127.0.0.1:`port`, and its one method as a promise. */
export function bytesClient(
  service: ServiceDefinition,
  port: number,
  options: ChannelOptions = {},
): { client: Client; call: (request: Buffer) => Promise<Buffer> } {
  const Ctor = makeGenericClientConstructor(service, 'Bytes')
  const client = new Ctor(`127.0.0.1:${port}`, credentials.createInsecure(), options)
  const method = (
    client as unknown as Record<string, (r: Buffer, cb: (e: Error | null, b?: Buffer) => void) => void>
  ).call as (r: Buffer, cb: (e: Error | null, b?: Buffer) => void) => void
  return {
    client,
    call: (request) =>
      new Promise((resolve, reject) =>
        method.call(client, request, (error, answer) => (error ? reject(error) : resolve(answer as Buffer))),
      ),
  }
}
