import {
  type ChannelCredentials,
  type ClientUnaryCall,
  credentials,
  Metadata,
  type ServiceError,
} from '@grpc/grpc-js'
import {
  fromGrpcError,
  MetaClient,
  type MqError,
  NotLeaderError,
  PeerClient,
  RECONNECT_CHANNEL_OPTIONS,
  UnavailableError,
} from '@mq/protocol'
import { PEER_TOKEN_KEY } from '../peer-transport'

/**
 * The largest answer a peer call takes: a FetchImage page is ~1 MiB, but may pass that by up
 * to 64 values of up to 256 KiB (key-pages.ts), above grpc-js's default of 4 MiB.
 */
export const PEER_RECEIVE_BYTES_MAX = 64 * 1024 * 1024

export interface NodeClients {
  readonly meta: MetaClient
  readonly peer: PeerClient
}

/**
 * One unary call: a generated client method with its metadata, options and callback (the call
 * it returns, when it does, is what `close()` cancels).
 */
export type UnaryCall<T> = (
  c: NodeClients,
  md: Metadata,
  opts: { deadline: number },
  cb: (e: ServiceError | null, r: T) => void,
) => ClientUnaryCall | undefined

/** A replica to try, by node id and address. */
export interface ReplicaAddress {
  readonly nodeId: string
  readonly address: string
}

/**
 * A node's clients of other nodes (Meta and Peer services over one channel per address),
 * and unary calls to them with a deadline and the peer token. Clients are kept per address
 * until `close()`; at most `clientsMax` (the oldest is closed beyond that).
 */
export class PeerCalls {
  readonly #token: string
  readonly #clients = new Map<string, NodeClients>()
  readonly #clientsMax: number
  readonly #credentials: () => ChannelCredentials
  /** The calls under way, cancelled at `close()`. */
  readonly #open = new Set<ClientUnaryCall>()
  #closed = false

  /** `channelCredentials`: how to reach peers (TLS when the cluster uses it); default plaintext. */
  constructor(
    token: string,
    clientsMax = 1_000,
    channelCredentials: () => ChannelCredentials = () => credentials.createInsecure(),
  ) {
    this.#token = token
    this.#clientsMax = clientsMax
    this.#credentials = channelCredentials
  }

  clients(address: string): NodeClients {
    let c = this.#clients.get(address)
    if (!c) {
      const meta = new MetaClient(address, this.#credentials(), {
        ...RECONNECT_CHANNEL_OPTIONS,
        'grpc.max_receive_message_length': PEER_RECEIVE_BYTES_MAX,
      })
      const peer = new PeerClient(address, this.#credentials(), {
        channelOverride: meta.getChannel(),
      })
      c = { meta, peer }
      this.#clients.set(address, c)
      if (this.#clients.size > this.#clientsMax) {
        const [oldest, client] = this.#clients.entries().next().value as [string, NodeClients]
        this.#clients.delete(oldest)
        client.meta.close()
      }
    }
    return c
  }

  /**
   * One call to `address`; rejects with the typed MqError the callee answered (or UNAVAILABLE,
   * also once `close()` ended it or when made after it).
   */
  call<T>(address: string, fn: UnaryCall<T>, timeoutMs: number): Promise<T> {
    if (this.#closed) return Promise.reject(stoppingError())
    const metadata = new Metadata()
    if (this.#token) metadata.set(PEER_TOKEN_KEY, this.#token)
    return new Promise((resolve, reject) => {
      const call = fn(this.clients(address), metadata, { deadline: Date.now() + timeoutMs }, (e, r) => {
        if (call) this.#open.delete(call)
        if (!e) resolve(r)
        else reject(this.#closed ? stoppingError() : fromGrpcError(e))
      })
      if (call) this.#open.add(call)
    })
  }

  /**
   * Calls the leader of a group among `replicas` (the likely leader first): a NOT_LEADER
   * answer's hint is tried next, then the other replicas; at most `attemptsMax` calls.
   * Rejects with the last error when none succeeds, or at once on a non-retriable error.
   * `stillWanted`, asked before every call after the first, stops the calls when it answers
   * false (the request was built from a state that has moved on): rejects with the last error.
   */
  async callLeader<T>(
    replicas: readonly ReplicaAddress[],
    fn: UnaryCall<T>,
    timeoutMs: number,
    options: { attemptsMax?: number; stillWanted?: () => boolean } = {},
  ): Promise<T> {
    const attemptsMax = options.attemptsMax ?? 2 * replicas.length + 2
    const queue = replicas.map((r) => r.address).filter((a) => a !== '')
    let last: unknown = new UnavailableError('the group has no known replica')
    for (let attempt = 0; attempt < attemptsMax && queue.length > 0; attempt++) {
      if (attempt > 0 && options.stillWanted?.() === false) break
      const address = queue.shift() as string
      try {
        return await this.call(address, fn, timeoutMs)
      } catch (error) {
        last = error
        if (!(error as MqError).retriable) throw error
        const hint = error instanceof NotLeaderError ? error.facts.leaderAddress : undefined
        if (hint) queue.unshift(hint)
        else queue.push(address)
      }
    }
    throw last
  }

  /**
   * Ends the calls under way (their callers get UNAVAILABLE) and closes the clients; no call is
   * made after it. Until 2026-12-07 (an audit) the calls under way went on to their deadlines
   * (a channel's close lets its calls finish), and a stopping node whose image fetch waited on a
   * peer that did not answer lived on up to 30 s after it had stopped.
   */
  close(): void {
    this.#closed = true
    for (const call of [...this.#open]) call.cancel()
    this.#open.clear()
    for (const c of this.#clients.values()) c.meta.close()
    this.#clients.clear()
  }
}

function stoppingError(): UnavailableError {
  return new UnavailableError('this node is stopping: its calls to other nodes are ended')
}
