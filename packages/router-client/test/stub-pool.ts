import { type MqError, type QueueRoute, toGrpcStatus } from '@mq/protocol'
import type { ConnectionPool } from '../src/connections'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'

/** A gRPC callback. */
export type Reply = (error: unknown, response?: unknown) => void

/**
 * What one address does with a Queue call: answer through `reply` (at once, later, or never:
 * a silent node). The request is as the SDK built it; `deadline` is the call's (ms since the
 * epoch), which grpc-js would end it at.
 */
export type Replica = (
  method: string,
  request: Record<string, unknown>,
  reply: Reply,
  deadline?: number,
) => void

/** Answers `reply` with `error` as a server would send it (its status and typed detail). */
export function fail(reply: Reply, error: MqError): void {
  reply({ ...toGrpcStatus(error), message: error.message })
}

/**
 * A ConnectionPool stand-in whose addresses run scripted replicas, for a real Router: the
 * Meta service's GetRoutes answers `route()`, every Queue call goes to `replica(address)`.
 * (FakeBroker is one real gRPC server: it cannot be three replicas that disagree.)
 */
export function stubPool(route: () => QueueRoute, replica: (address: string) => Replica): ConnectionPool {
  const stub = (address: string, service: 'meta' | 'queue') =>
    new Proxy(
      {},
      {
        get:
          (_target, method: string) =>
          (
            request: Record<string, unknown>,
            _metadata: unknown,
            options: { deadline: number },
            reply: Reply,
          ) => {
            if (service === 'meta' && method === 'getRoutes')
              setImmediate(() => reply(null, { routes: [route()] }))
            // A lease answer without ack results decodes as one with none (a replica of a
            // version before them), as the wire's decoder gives it.
            else if (method === 'lease')
              replica(address)(
                method,
                request,
                (e, r) => reply(e, r && { ackResults: [], ...(r as object) }),
                options.deadline,
              )
            else replica(address)(method, request, reply, options.deadline)
            return { cancel: () => {} }
          },
      },
    )
  const pool = {
    get: (address: string) => {
      const queue = stub(address, 'queue')
      return { address, meta: stub(address, 'meta'), queue, polls: queue }
    },
    close: () => {},
  }
  return pool as unknown as ConnectionPool
}

/** The route of queue `queue`: `partitions` partitions led by `leader`, each on `replicas`. */
export function routeOf(
  queue: string,
  leader: string,
  replicas: readonly string[],
  partitions = 1,
): QueueRoute {
  return {
    queue,
    routeEpoch: 1,
    queueId: 1,
    partitionsEpoch: 0,
    partitions: Array.from({ length: partitions }, (_, partition) => ({
      partition,
      groupId: 1,
      leaderId: leader,
      leaderAddress: leader,
      replicas: replicas.map((address) => ({ id: address, address })),
      engine: '',
    })),
  } as unknown as QueueRoute
}

/**
 * A real Router whose one address, M, leads the meta group and queue q's partition 0 and runs
 * `replica` (no wait for a silent leader): an admin call's copies all go to `replica`.
 */
export function metaLeaderRouter(replica: (address: string) => Replica): Router {
  return new Router(
    stubPool(() => routeOf('q', 'M', ['M']), replica),
    {
      ...DEFAULT_ROUTER_OPTIONS,
      servers: ['M'],
      leaderSilenceMs: 0,
    },
  )
}
