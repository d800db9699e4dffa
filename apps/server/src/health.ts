import { type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, status } from '@grpc/grpc-js'
import {
  boundedText,
  ERROR_DETAILS_CHARS_MAX,
  type HealthCheckRequest,
  type HealthCheckResponse,
  type HealthServer,
  isRefusedRequest,
  HealthCheckResponse_ServingStatus as Serving,
  toGrpcStatus,
} from '@mq/protocol'
import { AddressSlots, slotOf } from './address-slots'

/** Bounds on open Watch streams: the health service asks no token, so anyone reaching the port may open them. */
export interface HealthLimits {
  /** In all, so a misbehaving client cannot pile them up. */
  readonly watchersMax: number
  /** From one remote address, so one host cannot take every slot from the others' probes. */
  readonly watchersPerAddressMax: number
}

export const HEALTH_LIMITS: HealthLimits = { watchersMax: 1_000, watchersPerAddressMax: 100 }

/**
 * The longest service name a Watch is kept open for: a stream keeps its request while open, and
 * names of up to 64 MiB let one client hold gigabytes without a token. gRPC service names are short.
 */
export const SERVICE_NAME_CHARS_MAX = 256

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
  /** Open Watch streams per remote address (no port). */
  readonly #perAddress: AddressSlots
  readonly #limits: HealthLimits

  constructor(limits: HealthLimits = HEALTH_LIMITS) {
    this.#limits = limits
    this.#perAddress = new AddressSlots(limits.watchersPerAddressMax)
  }

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
    this.#perAddress.clear()
  }

  handlers(): HealthServer {
    return {
      check: (
        call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
        cb: sendUnaryData<HealthCheckResponse>,
      ) => {
        // Bytes that are not a HealthCheckRequest (HealthService's deserializer).
        const request: unknown = call.request
        if (isRefusedRequest(request)) {
          cb(toGrpcStatus(request.error))
          return
        }
        const s = this.#statuses.get(call.request.service)
        if (s === undefined)
          // Bounded as every mq error's message (toGrpcStatus): echoed whole, a name of 100 KB
          // made a grpc-message header past the caller's bound, its call hung to its deadline.
          cb({
            code: status.NOT_FOUND,
            details: boundedText(`unknown service ${call.request.service}`, ERROR_DETAILS_CHARS_MAX),
          })
        else cb(null, { status: s })
      },
      watch: (stream: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        const request: unknown = stream.request
        if (isRefusedRequest(request)) {
          stream.emit('error', toGrpcStatus(request.error))
          return
        }
        const service = stream.request.service
        if (service.length > SERVICE_NAME_CHARS_MAX) {
          stream.emit('error', {
            code: status.INVALID_ARGUMENT,
            details: `a service name of ${service.length} characters: names have at most ${SERVICE_NAME_CHARS_MAX}`,
          })
          return
        }
        const address = remoteAddress(stream.getPeer())
        const refusal =
          this.#watchers.size >= this.#limits.watchersMax
            ? `too many health watchers (${this.#limits.watchersMax} open)`
            : !this.#perAddress.take(address)
              ? `too many health watchers from ${address} (${this.#limits.watchersPerAddressMax} open)`
              : undefined
        if (refusal) {
          stream.emit('error', { code: status.RESOURCE_EXHAUSTED, details: refusal })
          return
        }
        const watcher = { service: stream.request.service, stream }
        this.#watchers.add(watcher)
        stream.write({ status: this.status(watcher.service) })
        stream.on('cancelled', () => {
          if (this.#watchers.delete(watcher)) this.#perAddress.give(address)
        })
      },
    }
  }
}

/**
 * The address of a grpc-js peer (`127.0.0.1:5000`, `[::1]:5000`) without its port, as the
 * connection caps count it (an IPv6 address as its /64: address-slots.ts).
 */
export function remoteAddress(peer: string): string {
  return slotOf(peer.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'))
}
