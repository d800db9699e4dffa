import { type ChannelCredentials, InterceptingCall, type Interceptor } from '@grpc/grpc-js'
import { MqClient, type Producer } from '@mq/router-client'
import { PEER_TOKEN_KEY } from '../peer-transport'
import type { ForwardedMessage } from './dead-letter-forwarder'

/** Deadline of one of the node's own client operations, retries included. */
const OWN_CALL_MS = 5_000

/** Producers kept (one per target queue, the least recently used closed beyond). */
const PRODUCERS_MAX = 64

export interface OwnClientOptions {
  /** This node's address (the seed: it redirects to the meta leader and partition leaders). */
  readonly advertise: string
  readonly credentials: ChannelCredentials
  /** The cluster's peer secret ('' when peer calls are not checked). */
  readonly peerToken: string
}

/**
 * The node's own SDK client, for what the node itself sends to queues (dead letters moved to
 * a dead-letter queue). Its calls carry the peer secret, so access control lets them through
 * as a cluster member's. Connected on first use; `close()` ends it.
 */
export class OwnClient {
  readonly #options: OwnClientOptions
  #client: Promise<MqClient> | undefined
  /** One producer per target queue, in order of last use. */
  readonly #producers = new Map<string, Producer>()

  constructor(options: OwnClientOptions) {
    this.#options = options
  }

  /** Enqueues `messages` into `queue`; resolves once every one is durable. */
  async send(queue: string, messages: readonly ForwardedMessage[]): Promise<void> {
    const producer = await this.#producer(queue)
    await Promise.all(messages.map((m) => producer.send(m)))
  }

  async close(): Promise<void> {
    const client = this.#client
    this.#client = undefined
    this.#producers.clear()
    await (await client?.catch(() => undefined))?.close()
  }

  /**
   * The producer of `queue`, not idempotent: the messages' dedup keys catch a copy sent twice,
   * also by another node after a leader change (which a producer id, one per node, would not).
   */
  async #producer(queue: string): Promise<Producer> {
    const client = await this.#connect()
    let producer = this.#producers.get(queue)
    if (producer) this.#producers.delete(queue)
    else producer = client.producer(queue, { idempotent: false })
    this.#producers.set(queue, producer)
    for (const [name, old] of this.#producers) {
      if (this.#producers.size <= PRODUCERS_MAX) break
      this.#producers.delete(name)
      void old.close().catch(() => {})
    }
    return producer
  }

  #connect(): Promise<MqClient> {
    if (!this.#client) {
      const { advertise, credentials, peerToken } = this.#options
      this.#client = MqClient.connect({
        servers: [advertise],
        credentials,
        deadlineMs: OWN_CALL_MS,
        ...(peerToken ? { interceptors: [peerTokenInterceptor(peerToken)] } : {}),
      })
      // A failed connect is tried again on the next use.
      this.#client.catch(() => {
        this.#client = undefined
      })
    }
    return this.#client
  }
}

/** Sends the cluster's peer secret with every call. */
function peerTokenInterceptor(token: string): Interceptor {
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        metadata.set(PEER_TOKEN_KEY, token)
        next(metadata, listener)
      },
    })
}
