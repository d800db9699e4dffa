import { type ChannelCredentials, InterceptingCall, type Interceptor } from '@grpc/grpc-js'
import { type ClientOptions, MqClient, type Producer } from '@mq/router-client'
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
  /** Connects the SDK client (tests: a stand-in; default MqClient.connect). */
  readonly connect?: (options: ClientOptions) => Promise<Pick<MqClient, 'producer' | 'close'>>
}

/**
 * The node's own SDK client, for what the node itself sends to queues (dead letters moved to
 * a dead-letter queue). Its calls carry the peer secret, so access control lets them through
 * as a cluster member's. Connected on first use; `close()` ends it.
 */
export class OwnClient {
  readonly #options: OwnClientOptions
  #client: Promise<Pick<MqClient, 'producer' | 'close'>> | undefined
  /** One producer per target queue, in order of last use. */
  readonly #producers = new Map<string, Producer>()

  constructor(options: OwnClientOptions) {
    this.#options = options
  }

  /**
   * Enqueues `messages` into `queue`, in their order; resolves, once each one is durable or has
   * failed, with each one's error (undefined: durable). It waits for all: when the target
   * refuses a batch for one message (ErrorDetail `message_index`), the producer sends the
   * others again itself, and they may be stored after that one failed.
   */
  async send(queue: string, messages: readonly ForwardedMessage[]): Promise<unknown[]> {
    const producer = await this.#producer(queue)
    const settled = await Promise.allSettled(messages.map((m) => producer.send(m)))
    return settled.map((s) => (s.status === 'fulfilled' ? undefined : s.reason))
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
   * One batch in flight per partition: without a producer sequence nothing else keeps two
   * batches to one partition in order (a round's copies over one batch's bytes, 1 MiB, would
   * race), and the producer sends the rest of a batch refused for one message again itself
   * only when no other batch of it is in flight.
   */
  async #producer(queue: string): Promise<Producer> {
    const client = await this.#connect()
    let producer = this.#producers.get(queue)
    if (producer) this.#producers.delete(queue)
    else producer = client.producer(queue, { idempotent: false, inFlightMax: 1 })
    this.#producers.set(queue, producer)
    for (const [name, old] of this.#producers) {
      if (this.#producers.size <= PRODUCERS_MAX) break
      this.#producers.delete(name)
      void old.close().catch(() => {})
    }
    return producer
  }

  #connect(): Promise<Pick<MqClient, 'producer' | 'close'>> {
    if (!this.#client) {
      const { advertise, credentials, peerToken, connect = (o) => MqClient.connect(o) } = this.#options
      this.#client = connect({
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
