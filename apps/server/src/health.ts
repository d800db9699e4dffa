import { type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, status } from '@grpc/grpc-js'
import {
  type HealthCheckRequest,
  type HealthCheckResponse,
  type HealthServer,
  HealthCheckResponse_ServingStatus as Serving,
} from '@mq/protocol'

/** Bound on concurrent Watch streams, so a misbehaving client cannot pile them up. */
const WATCHERS_MAX = 1_000

/**
 * The standard gRPC health service (grpc.health.v1). '' is the whole server; other names are
 * the mq services ('mq.v1.Queue', 'mq.v1.Meta'). `set` changes a status and notifies watchers.
 */
export class HealthRegistry {
  readonly #statuses = new Map<string, Serving>([['', Serving.NOT_SERVING]])
  readonly #watchers = new Set<{
    service: string
    stream: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>
  }>()

  set(service: string, serving: boolean): void {
    const next = serving ? Serving.SERVING : Serving.NOT_SERVING
    if (this.#statuses.get(service) === next) return
    this.#statuses.set(service, next)
    for (const w of this.#watchers) if (w.service === service) w.stream.write({ status: next })
  }

  status(service: string): Serving {
    return this.#statuses.get(service) ?? Serving.SERVICE_UNKNOWN
  }

  /** Ends every Watch stream (at shutdown). */
  close(): void {
    for (const w of this.#watchers) w.stream.end()
    this.#watchers.clear()
  }

  handlers(): HealthServer {
    return {
      check: (
        call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
        cb: sendUnaryData<HealthCheckResponse>,
      ) => {
        const s = this.#statuses.get(call.request.service)
        if (s === undefined)
          cb({ code: status.NOT_FOUND, details: `unknown service ${call.request.service}` })
        else cb(null, { status: s })
      },
      watch: (stream: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        if (this.#watchers.size >= WATCHERS_MAX) {
          stream.emit('error', { code: status.RESOURCE_EXHAUSTED, details: 'too many health watchers' })
          return
        }
        const watcher = { service: stream.request.service, stream }
        this.#watchers.add(watcher)
        stream.write({ status: this.status(watcher.service) })
        stream.on('cancelled', () => this.#watchers.delete(watcher))
      },
    }
  }
}
