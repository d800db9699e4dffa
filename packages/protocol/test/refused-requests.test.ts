import {
  Client,
  credentials,
  Server,
  ServerCredentials,
  type ServiceError,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { GrpcStatus } from '../src/errors'
import { ProduceRequest, QueueService as UnguardedQueueService } from '../src/generated/mq/v1/queue'
import { fromGrpcError, unaryHandler } from '../src/grpc-errors'
import { InvalidArgumentError } from '../src/mq-error'
import { PRODUCE_MESSAGES_MAX } from '../src/request-limits'
import { QueueService } from '../src/services'

// The guard end to end: a real grpc-js server on loopback whose Queue service is the guarded
// one and whose handlers are unaryHandler's, as mq-server's are. A refused request reaches the
// client as INVALID_ARGUMENT with the guard's message, and never reaches the handler.
describe('refused requests over gRPC', () => {
  let guarded: Server
  let unguarded: Server
  let guardedAddress = ''
  let unguardedAddress = ''
  const handled: ProduceRequest[] = []

  const handlers = (): UntypedServiceImplementation => ({
    produce: unaryHandler(async (req: ProduceRequest) => {
      handled.push(req)
      return { ids: req.messages.map((_, i) => i), duplicate: false, pipelining: true }
    }),
  })

  const serve = async (server: Server): Promise<string> => {
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    )
    return `127.0.0.1:${port}`
  }

  beforeAll(async () => {
    guarded = new Server()
    guarded.addService(QueueService, handlers())
    guardedAddress = await serve(guarded)
    unguarded = new Server()
    unguarded.addService(UnguardedQueueService, handlers())
    unguardedAddress = await serve(unguarded)
  })

  afterAll(() => {
    guarded?.forceShutdown()
    unguarded?.forceShutdown()
  })

  /** Sends `bytes` as a Produce request to `address`; resolves with the error or the answer's bytes. */
  const produceRaw = (address: string, bytes: Uint8Array) => {
    const client = new Client(address, credentials.createInsecure())
    return new Promise<ServiceError | Buffer>((resolve) => {
      client.makeUnaryRequest(
        '/mq.v1.Queue/Produce',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from(bytes),
        (error, response) => {
          client.close()
          resolve(error ?? (response as Buffer))
        },
      )
    })
  }

  const emptyMessages = (n: number) => Buffer.alloc(2 * n, Buffer.from([0x22, 0x00]))

  it('answers 2,000,000 empty messages with INVALID_ARGUMENT naming the field and the limit', async () => {
    handled.length = 0
    const answer = await produceRaw(guardedAddress, emptyMessages(2_000_000))
    expect(answer).not.toBeInstanceOf(Buffer)
    const raw = answer as ServiceError
    expect(raw.code).toBe(GrpcStatus.InvalidArgument)
    const error = fromGrpcError(raw)
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect(error.retriable).toBe(false)
    expect(error.message).toContain(`ProduceRequest.messages has more than ${PRODUCE_MESSAGES_MAX} messages`)
    expect(handled).toHaveLength(0)
  })

  it('answers a uint64 above 2^53 with INVALID_ARGUMENT (it was INTERNAL "Error deserializing request")', async () => {
    const bytes = Uint8Array.of(0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01) // sequence = 2^64 - 1
    const before = (await produceRaw(unguardedAddress, bytes)) as ServiceError
    expect([before.code, before.details]).toEqual([GrpcStatus.Internal, 'Error deserializing request'])
    const after = (await produceRaw(guardedAddress, bytes)) as ServiceError
    expect(after.code).toBe(GrpcStatus.InvalidArgument)
    expect(fromGrpcError(after).message).toBe(
      'ProduceRequest.sequence is 18446744073709551615, above 2^53 - 1 (9007199254740991), the largest integer mq takes',
    )
  })

  it('hands a normal request to the handler as the generated decoder makes it', async () => {
    handled.length = 0
    const request: ProduceRequest = {
      target: { queue: 'q', partition: 1, routeEpoch: 2 },
      producerId: 'p',
      sequence: 3,
      messages: [
        { body: Uint8Array.of(1), weight: 2, headers: { a: 'b' }, key: 'k', delayMs: 4, dedupKey: 'd' },
      ],
    }
    const bytes = ProduceRequest.encode(request).finish()
    const answer = await produceRaw(guardedAddress, bytes)
    expect(answer).toBeInstanceOf(Buffer)
    expect(handled).toHaveLength(1)
    expect(ProduceRequest.encode(handled[0] as ProduceRequest).finish()).toEqual(bytes)
  })
})
