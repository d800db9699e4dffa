import { type ChannelCredentials, InterceptingCall, type Interceptor } from '@grpc/grpc-js'
import { MqClient } from '@mq/router-client'
import { PEER_TOKEN_KEY } from '../peer-transport'
import type { ForwardedMessage } from './dead-letter-forwarder'

/** Deadline of one of the node's own client operations, retries included. */
const OWN_CALL_MS = 10_000

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

  constructor(options: OwnClientOptions) {
    this.#options = options
  }

  /** Enqueues `messages` into `queue`; resolves once every one is durable. */
  async send(queue: string, messages: readonly ForwardedMessage[]): Promise<void> {
    const client = await this.#connect()
    // Not idempotent: each call is a new producer, which would leave a producer record per
    // call in the target; the messages' dedup keys catch a copy sent twice instead.
    const producer = client.producer(queue, { idempotent: false })
    try {
      await Promise.all(messages.map((m) => producer.send(m)))
    } finally {
      await producer.close()
    }
  }

  async close(): Promise<void> {
    const client = this.#client
    this.#client = undefined
    await (await client?.catch(() => undefined))?.close()
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
