import { type ChannelCredentials, credentials as grpcCredentials, type Interceptor } from '@grpc/grpc-js'
import { MetaClient, QueueClient, RECONNECT_CHANNEL_OPTIONS } from '@mq/protocol'
import { ClientClosedError } from './client-closed-error'

/** The gRPC stubs for one server address, sharing one channel (but `polls`). */
export interface Connection {
  readonly address: string
  readonly meta: MetaClient
  readonly queue: QueueClient
  /**
   * The Queue stub for leases that wait (long polls), on a channel and HTTP/2 connection of
   * their own, opened on first use. A server takes a bounded number of calls at once on one
   * connection (mq-server: 1,000) and the client's HTTP/2 layer holds the others until one
   * ends: on the shared connection, a client long-polling that many partitions of a node held
   * every send, ack and route fetch to the node behind its polls (sends failed after their
   * deadline, acks took 26 s, with 2,048 polls open).
   */
  readonly polls: QueueClient
}

/**
 * One connection per server address, opened on first use and reused; grpc-js reconnects
 * a channel by itself after a failure. Bounded: at most `connectionsMax` addresses (the
 * least recently used is closed beyond that).
 */
export class ConnectionPool {
  readonly #connections = new Map<string, Connection>()
  /** The long polls' channels (Connection.polls) opened, by address. */
  readonly #polls = new Map<string, QueueClient>()
  readonly #credentials: ChannelCredentials
  readonly #connectionsMax: number
  readonly #interceptors: readonly Interceptor[]
  #closed = false

  /** `interceptors` run on every call (e.g. the one that adds the token). */
  constructor(
    credentials: ChannelCredentials = grpcCredentials.createInsecure(),
    connectionsMax = 64,
    interceptors: readonly Interceptor[] = [],
  ) {
    this.#credentials = credentials
    this.#connectionsMax = connectionsMax
    this.#interceptors = interceptors
  }

  /** Returns the connection to `address`. Throws ClientClosedError once the pool is closed. */
  get(address: string): Connection {
    if (this.#closed) throw new ClientClosedError()
    const existing = this.#connections.get(address)
    if (existing) {
      this.#connections.delete(address)
      this.#connections.set(address, existing)
      return existing
    }
    const options = {
      ...RECONNECT_CHANNEL_OPTIONS,
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.keepalive_time_ms': 30_000,
      // The SDK retries on its own terms (typed errors, leader hints, backoff) and keeps no
      // channelz: grpc-js's own retry wrapper and channelz bookkeeping cost every call CPU.
      'grpc.enable_retries': 0,
      'grpc.enable_channelz': 0,
      interceptors: [...this.#interceptors],
    }
    const queue = new QueueClient(address, this.#credentials, options)
    // The meta stub shares the queue stub's channel.
    const meta = new MetaClient(address, this.#credentials, {
      ...options,
      channelOverride: queue.getChannel(),
    })
    const pool = this
    const connection: Connection = {
      address,
      meta,
      queue,
      get polls(): QueueClient {
        // A connection closed meanwhile (the pool's, or this one gone from it) opens none.
        if (pool.#connections.get(address) !== connection) return queue
        let polls = pool.#polls.get(address)
        if (!polls) {
          // A subchannel pool of its own: a channel of the same target and options would share
          // the queue stub's HTTP/2 connection (grpc-js's global pool).
          polls = new QueueClient(address, pool.#credentials, {
            ...options,
            'grpc.use_local_subchannel_pool': 1,
          })
          pool.#polls.set(address, polls)
        }
        return polls
      },
    }
    this.#connections.set(address, connection)
    if (this.#connections.size > this.#connectionsMax) {
      const [oldest] = this.#connections.keys()
      if (oldest !== undefined) this.#close(oldest)
    }
    return connection
  }

  /** Closes every connection; later `get` calls throw. */
  close(): void {
    this.#closed = true
    for (const address of [...this.#connections.keys()]) this.#close(address)
  }

  #close(address: string): void {
    const c = this.#connections.get(address)
    if (!c) return
    this.#connections.delete(address)
    c.queue.close()
    this.#polls.get(address)?.close()
    this.#polls.delete(address)
  }
}
