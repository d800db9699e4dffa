import {
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServiceError,
  type sendUnaryData,
} from '@grpc/grpc-js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ErrorCode, GrpcStatus } from '../src/errors'
import { ErrorDetail } from '../src/generated/mq/v1/errors'
import { QueueClient, QueueService } from '../src/generated/mq/v1/queue'
import { ERROR_DETAIL_KEY, fromGrpcError, toGrpcStatus, unaryHandler } from '../src/grpc-errors'
import {
  InternalError,
  InvalidArgumentError,
  NotLeaderError,
  StaleRouteError,
  UnavailableError,
} from '../src/mq-error'

// The error contract end to end: a real grpc-js server on loopback fails calls with typed
// errors; the client side turns them back into the same typed errors with their facts.
describe('typed errors over gRPC', () => {
  let server: Server
  let client: QueueClient
  const unimplemented = (_: unknown, cb: sendUnaryData<never>) => cb(new Error('unused'))

  beforeAll(async () => {
    server = new Server()
    server.addService(QueueService, {
      produce: (_call: unknown, cb: sendUnaryData<never>) =>
        cb(
          toGrpcStatus(
            new NotLeaderError('not the leader of group 3', {
              leaderId: 'n2',
              leaderAddress: '127.0.0.1:7002',
              groupId: 3,
            }),
          ),
        ),
      lease: (_call: unknown, cb: sendUnaryData<never>) =>
        cb(toGrpcStatus(new StaleRouteError('route epoch 4 is older than 9', { epoch: 9 }))),
      ack: unimplemented,
      nack: (_call: unknown, cb: sendUnaryData<never>) =>
        cb(toGrpcStatus(new InvalidArgumentError('message 0 is too big', { messageIndex: 0 }))),
      extend: (_call: unknown, cb: sendUnaryData<unknown>) =>
        cb(null, {
          results: Array.from({ length: 50 }, () => ({ leaseId: 'x'.repeat(20), outcome: 1, deadlineMs: 0 })),
        }),
    })
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    )
    client = new QueueClient(`127.0.0.1:${port}`, credentials.createInsecure())
  })

  afterAll(() => {
    client?.close()
    server?.forceShutdown()
  })

  const call = <T>(fn: (cb: (e: ServiceError | null, r?: T) => void) => void) =>
    new Promise<ServiceError>((resolve, reject) =>
      fn((e) => (e ? resolve(e) : reject(new Error('the call was expected to fail')))),
    )

  it('carries NOT_LEADER with the leader hint', async () => {
    const raw = await call((cb) => client.produce({ producerId: '', sequence: 0, messages: [] }, cb))
    const error = fromGrpcError(raw)
    expect(error).toBeInstanceOf(NotLeaderError)
    expect(error.retriable).toBe(true)
    expect(error.message).toBe('not the leader of group 3')
    expect(error.facts).toEqual({ leaderId: 'n2', leaderAddress: '127.0.0.1:7002', groupId: 3 })
  })

  it('carries STALE_ROUTE with the current epoch', async () => {
    const raw = await call((cb) =>
      client.lease(
        {
          consumerId: 'c',
          max: 1,
          visibilityMs: 0,
          waitMs: 0,
          attempt: '',
          attemptRepeat: false,
          ackLeaseIds: [],
        },
        cb,
      ),
    )
    const error = fromGrpcError(raw)
    expect(error).toBeInstanceOf(StaleRouteError)
    expect(error.facts.epoch).toBe(9)
  })

  it("carries the place of a batch's message at fault (0 too)", async () => {
    const raw = await call((cb) => client.nack({ leaseIds: [], delayMs: 0, release: false }, cb))
    const error = fromGrpcError(raw)
    expect(error).toBeInstanceOf(InvalidArgumentError)
    expect(error.facts).toEqual({ messageIndex: 0 })
  })

  it("takes an INTERNAL without an mq detail (the transport's, a proxy's) as retriable", async () => {
    const raw = {
      code: GrpcStatus.Internal,
      details: 'Received RST_STREAM with code 2',
      metadata: new Metadata(),
    }
    const error = fromGrpcError(raw as unknown as ServiceError)
    expect(error).toBeInstanceOf(UnavailableError)
    expect(error.retriable).toBe(true)
    expect(error.message).toBe('transport error (INTERNAL): Received RST_STREAM with code 2')
    // grpc-js's own failure to encode a request (or decode an answer): a retry would fail alike.
    const local = fromGrpcError({
      code: GrpcStatus.Internal,
      details: 'Request message serialization failure: invalid uint32: 1.5',
      metadata: new Metadata(),
    } as unknown as ServiceError)
    expect([local.code, local.retriable]).toEqual([ErrorCode.Internal, false])
    // Likewise the server's (grpc-js's messages there).
    for (const details of [
      'Error serializing response: invalid uint32: -1',
      'Error deserializing request: index out of range',
    ]) {
      const remote = fromGrpcError({ code: GrpcStatus.Internal, details, metadata: new Metadata() } as never)
      expect([remote.code, remote.retriable]).toEqual([ErrorCode.Internal, false])
    }
    // An mq server's own fault carries its detail: not retried.
    const typed = fromGrpcError(
      toGrpcStatus(new InternalError('internal error: x is undefined')) as ServiceError,
    )
    expect(typed.retriable).toBe(false)
  })

  it("keeps the retriable flag of a detail whose code this version does not know (a newer server's)", () => {
    const withDetail = (code: string, retriable: boolean) => {
      const metadata = new Metadata()
      metadata.set(
        ERROR_DETAIL_KEY,
        Buffer.from(ErrorDetail.encode(ErrorDetail.fromPartial({ code, retriable })).finish()),
      )
      return fromGrpcError({ code: GrpcStatus.ResourceExhausted, details: 'throttled', metadata } as never)
    }
    const later = withDetail('THROTTLED', true)
    expect([later.code, later.retriable, later.message]).toEqual([
      ErrorCode.Unavailable,
      true,
      'THROTTLED: throttled',
    ])
    expect([withDetail('THROTTLED', false).code, withDetail('THROTTLED', false).retriable]).toEqual([
      ErrorCode.Internal,
      false,
    ])
  })

  it('maps an untyped failure by its status', async () => {
    const raw = await call((cb) => client.ack({ leaseIds: [] }, cb))
    expect(fromGrpcError(raw).code).toBe(ErrorCode.Internal)
  })

  it("turns a message over gRPC's size limit into an InvalidArgumentError, not a retriable one", async () => {
    const small = new QueueClient(
      client.getChannel().getTarget().replace(/^dns:/, ''),
      credentials.createInsecure(),
      {
        'grpc.max_receive_message_length': 64,
      },
    )
    const raw = await call((cb) => small.extend({ leaseIds: [], extendMs: 1 }, cb))
    small.close()
    const error = fromGrpcError(raw)
    expect(error.code).toBe(ErrorCode.InvalidArgument)
    expect(error.retriable).toBe(false)
    expect(error.message).toMatch(/larger than gRPC allows/)
  })

  it('turns an unreachable server into a retriable UnavailableError', async () => {
    const dead = new QueueClient('127.0.0.1:1', credentials.createInsecure())
    const raw = await call((cb) =>
      dead.ack({ leaseIds: [] }, new Metadata(), { deadline: Date.now() + 2000 }, cb),
    )
    dead.close()
    const error = fromGrpcError(raw)
    expect(error).toBeInstanceOf(UnavailableError)
    expect(error.retriable).toBe(true)
    expect(error.cause).toBe(raw)
  })
})

describe('unaryHandler', () => {
  const run = (fn: () => Promise<unknown>) =>
    new Promise<{ error: unknown; response: unknown }>((resolve) =>
      unaryHandler(fn)({ request: {} } as never, (error, response) => resolve({ error, response })),
    )

  it('answers with the result', async () => {
    expect(await run(async () => ({ ok: 1 }))).toEqual({ error: null, response: { ok: 1 } })
  })
  it('sends a thrown MqError as its typed status', async () => {
    const { error } = await run(async () => {
      throw new StaleRouteError('old', { epoch: 3 })
    })
    expect(error).toMatchObject({ code: 9, details: 'old' })
  })
  it('sends anything else as INTERNAL, naming it', async () => {
    const { error } = await run(async () => {
      throw new TypeError('x is undefined')
    })
    expect(error).toMatchObject({ code: 13, details: 'internal error: x is undefined' })
  })
})
