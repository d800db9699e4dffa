import {
  type ChannelCredentials,
  type ClientWritableStream,
  credentials,
  Metadata,
  type ServerReadableStream,
  type sendUnaryData,
  status,
} from '@grpc/grpc-js'
import {
  isRefusedRequest,
  PeerClient,
  type RaftBatch,
  type RaftMessage,
  type RaftStreamEnd,
  RECONNECT_CHANNEL_OPTIONS,
  toGrpcStatus,
  UnavailableError,
} from '@mq/protocol'
import type { Message, Transport } from '@mq/raft-core'
import { messageFromWire, messageToWire } from './peer-codec'

/** Stream failures that mean the connection to the peer broke (not a refusal by a live peer). */
const PEER_GONE_CODES: ReadonlySet<number> = new Set([
  status.UNAVAILABLE,
  status.CANCELLED,
  status.INTERNAL,
  status.UNKNOWN,
])

/** The metadata key that carries the cluster's peer secret. */
export const PEER_TOKEN_KEY = 'mq-peer-token'

export interface PeerTransportOptions {
  /** This node's id (the `fromNode` of every batch it sends). */
  readonly nodeId: string
  /** The address of a node, or undefined when it is not known (the message is dropped). */
  readonly resolve: (nodeId: string) => string | undefined
  /** The shared secret sent to peers ('' = none); the node's access control requires it of them. */
  readonly token: string
  /** Messages queued per destination at most; beyond it new messages are dropped. */
  readonly queueMax: number
  /**
   * Bytes (of entries and snapshot chunks, `wireBytes`) queued per destination at most (one
   * message of any size when nothing else waits): beyond it a message that carries data is dropped, so a slow or stalled peer cannot make
   * this node's memory grow (Raft's window frees a slot per heartbeat answer, so it does not
   * bound what waits here). Messages without data (heartbeats, votes, answers) still pass.
   */
  readonly queueBytesMax: number
  /** Messages per RaftBatch at most. */
  readonly batchMax: number
  /**
   * Bytes per RaftBatch at most (at least one message): well below the 64 MiB gRPC message
   * limit, which a batch of 512 Apps of up to 1 MiB each could pass, cutting the stream.
   */
  readonly batchBytesMax: number
  /** After a stream fails, wait this long before opening another to that peer. */
  readonly reconnectMs: number
  /**
   * Destinations kept at most (each with its queue, stream and channel): the one sent to least
   * recently is forgotten beyond it. Nodes come and go (replaced under new ids, removed): each
   * one ever sent to was kept, its channel open, for the life of the process. The meta group
   * registers at most 1,000 nodes (META_LIMITS.nodesMax).
   */
  readonly peersMax: number
  /**
   * A failure detector: called with a peer's node id when our stream to it breaks (its
   * connection reset or refused, or cut off by its shutdown), which is what a killed process
   * looks like. (The server side cannot tell: grpc-js reports an orderly end and a reset alike.)
   */
  readonly onPeerDown: (nodeId: string) => void
  /**
   * How to reach peer `nodeId` (TLS, see src/tls.ts; with --tls-peer-ids its certificate must
   * name that node); default plaintext.
   */
  readonly credentials?: (nodeId: string) => ChannelCredentials
}

export const DEFAULT_PEER_TRANSPORT_OPTIONS = {
  queueMax: 10_000,
  queueBytesMax: 64 * 1024 * 1024,
  batchMax: 512,
  batchBytesMax: 8 * 1024 * 1024,
  reconnectMs: 100,
  peersMax: 1_000,
  onPeerDown: () => {},
} as const

/**
 * Keepalive on peer channels: a connection whose peer stopped answering at the HTTP/2 level
 * (its address now drops packets, a dead host) fails within about 20 s and the stream is
 * reopened, instead of waiting for the kernel's TCP timeout (~15 min) with a full window.
 */
const PEER_CHANNEL_OPTIONS = {
  ...RECONNECT_CHANNEL_OPTIONS,
  'grpc.max_send_message_length': 64 * 1024 * 1024,
  'grpc.enable_channelz': 0,
  'grpc.keepalive_time_ms': 10_000,
  'grpc.keepalive_timeout_ms': 10_000,
} as const

/** After ending a stream, cancel it if it has not finished by then (a stopped peer never answers). */
const END_GRACE_MS = 1_000

/** A message's size for the transport's byte bounds: its entries' and snapshot chunk's data, and a bit per message. */
export function wireBytes(m: Message): number {
  let bytes = 64 + m.requestCtx.length
  for (const e of m.entries) bytes += 32 + e.data.length
  if (m.snapshot) bytes += 64 + m.snapshot.data.length
  return bytes
}

export interface PeerTransportStats {
  sent: number
  received: number
  /** Dropped for a full queue, an unknown destination, or a failed stream. */
  dropped: number
  /** Inbound messages rejected: not addressed to this node. */
  rejected: number
  /** Streams that ended in an error (what was written to them may be lost). */
  streamFailures: number
}

interface Outbound {
  readonly nodeId: string
  readonly queue: RaftMessage[]
  /** `wireBytes` of each message in `queue`, and their sum. */
  readonly sizes: number[]
  bytes: number
  stream: ClientWritableStream<RaftBatch> | undefined
  client: PeerClient | undefined
  address: string
  /** Not before this time (performance.now(): a wall clock stepped back held reconnects for the step) may a new stream open (after a failure). */
  retryAtMs: number
  /** The one timer that flushes again at `retryAtMs`. */
  retryTimer: NodeJS.Timeout | undefined
  /** When a message for it was last queued (the transport's count of sends): the least recent is forgotten first. */
  usedAt: number
  waitingDrain: boolean
  /**
   * Bytes written to the stream whose write has not completed yet (grpc-js buffers ~16
   * batches before `write` says to wait): they count against `queueBytesMax` too.
   */
  writing: number
}

/**
 * Carries Raft messages between nodes: one long-lived client stream (Peer.Raft) per
 * destination node, with every message of an event-loop turn for that node, across all
 * groups, coalesced into one RaftBatch. Raft tolerates loss, so the transport never blocks
 * the caller: a full queue, an unknown peer or a broken stream drops messages (counted),
 * and the stream is reopened after `reconnectMs`.
 */
export class PeerTransport implements Transport {
  readonly stats: PeerTransportStats = {
    sent: 0,
    received: 0,
    dropped: 0,
    rejected: 0,
    streamFailures: 0,
  }
  readonly #options: PeerTransportOptions
  readonly #outbound = new Map<string, Outbound>()
  readonly #deliver: (groupId: number, message: Message, fromNode: string) => void
  readonly #down = new Set<string>()
  #flushScheduled = false
  #closed = false
  /** How to end each inbound Raft stream open now (endInbound). */
  readonly #inbound = new Set<() => void>()
  #inboundEnded = false
  #queuedBytes = 0
  /** Messages queued so far (Outbound.usedAt). */
  #sends = 0

  constructor(
    options: Pick<PeerTransportOptions, 'nodeId' | 'resolve' | 'token'> & Partial<PeerTransportOptions>,
    deliver: (groupId: number, message: Message, fromNode: string) => void,
  ) {
    this.#options = { ...DEFAULT_PEER_TRANSPORT_OPTIONS, ...options }
    this.#deliver = deliver
  }

  /** Queues each message of group `groupId` for its node `message.to`. Never throws, never blocks. */
  send(groupId: number, messages: readonly Message[]): void {
    for (const message of messages) this.#enqueue(groupId, message)
  }

  #enqueue(groupId: number, message: Message): void {
    if (this.#closed) return
    let out = this.#outbound.get(message.to)
    if (!out) {
      out = {
        nodeId: message.to,
        queue: [],
        sizes: [],
        bytes: 0,
        stream: undefined,
        client: undefined,
        address: '',
        retryAtMs: 0,
        retryTimer: undefined,
        usedAt: 0,
        waitingDrain: false,
        writing: 0,
      }
      this.#outbound.set(message.to, out)
      if (this.#outbound.size > this.#options.peersMax) this.#forgetLeastUsed(out)
    }
    out.usedAt = ++this.#sends
    const bytes = wireBytes(message)
    const carriesData = message.entries.length > 0 || message.snapshot !== null
    // An empty queue takes any message: one bigger than the byte bound alone (an entry near
    // the node's ENTRY_BYTES_MAX) would otherwise never be sent, holding its group for good.
    if (
      out.queue.length >= this.#options.queueMax ||
      (carriesData &&
        out.bytes + out.writing > 0 &&
        out.bytes + out.writing + bytes > this.#options.queueBytesMax)
    ) {
      this.stats.dropped++
      return
    }
    out.queue.push(messageToWire(groupId, message))
    out.sizes.push(bytes)
    out.bytes += bytes
    this.#queuedBytes += bytes
    if (!this.#flushScheduled) {
      this.#flushScheduled = true
      setImmediate(() => this.#flushAll())
    }
  }

  /**
   * The grpc-js handler of Peer.Raft: delivers each message addressed to this node. The peer
   * token is checked before this runs, by the node's access control (auth/access.ts).
   */
  handleRaft = (
    stream: ServerReadableStream<RaftBatch, RaftStreamEnd>,
    cb: sendUnaryData<RaftStreamEnd>,
  ): void => {
    const stopping = () => toGrpcStatus(new UnavailableError(`node ${this.#options.nodeId} is stopping`))
    if (this.#inboundEnded) {
      cb(stopping())
      return
    }
    /** Whether the call is answered (what comes on it after that is ignored). */
    let answered = false
    const answer: sendUnaryData<RaftStreamEnd> = (error, value) => {
      if (answered) return
      answered = true
      cb(error, value)
    }
    const end = () => answer(stopping())
    this.#inbound.add(end)
    // At every end of the call: answered, cancelled, or its connection gone.
    stream.once('cancelled', () => this.#inbound.delete(end))
    stream.on('data', (batch: RaftBatch) => {
      if (answered) return
      // Bytes that are not a RaftBatch (PeerService's deserializer): the stream is answered
      // INVALID_ARGUMENT, and what follows on it is ignored.
      const read: unknown = batch
      if (isRefusedRequest(read)) {
        answer(toGrpcStatus(read.error))
        return
      }
      this.#down.delete(batch.fromNode) // it is up again (only a peer with the token gets here)
      for (const wire of batch.messages) {
        // One message that cannot be read or delivered is dropped (Raft tolerates loss), never
        // thrown into grpc-js's stream handling, which would end the process.
        try {
          const { groupId, message } = messageFromWire(wire)
          // Addressed elsewhere, or not from the batch's sender (whose identity the access
          // control checks, with --tls-peer-ids against its certificate).
          if (message.to !== this.#options.nodeId || message.from !== batch.fromNode) {
            this.stats.rejected++
            continue
          }
          this.stats.received++
          this.#deliver(groupId, message, batch.fromNode)
        } catch {
          this.stats.rejected++
        }
      }
    })
    stream.on('end', () => answer(null, {}))
    stream.on('error', () => {})
  }

  /** Bytes (`wireBytes`) queued or being written, to every destination (a gauge, not a count). */
  get queuedBytes(): number {
    return this.#queuedBytes
  }

  /** Whether the last stream to `nodeId` broke (and nothing has been heard from it since). */
  isDown(nodeId: string): boolean {
    return this.#down.has(nodeId)
  }

  /**
   * Ends every inbound Raft stream open now, and each one opened later at once, with
   * UNAVAILABLE (this node is stopping): a peer ends its stream only when it stops too, and
   * grpc-js's graceful shutdown waits for every open call. The peers see what a stopped
   * node's cut connection shows them, a stream broken (onPeerDown), only sooner.
   */
  endInbound(): void {
    this.#inboundEnded = true
    for (const end of this.#inbound) end()
    this.#inbound.clear()
  }

  /** Ends every stream; later sends are ignored. */
  close(): void {
    this.#closed = true
    for (const out of this.#outbound.values()) {
      clearTimeout(out.retryTimer)
      this.#reset(out, false)
    }
    this.#outbound.clear()
  }

  /**
   * Forgets the destination sent to least recently but `kept` (a node gone for good, most
   * likely): its queue is dropped (counted), its stream ended and its channel closed. Scans
   * them all, but only when a new destination passes `peersMax`.
   */
  #forgetLeastUsed(kept: Outbound): void {
    let oldest: Outbound | undefined
    for (const out of this.#outbound.values())
      if (out !== kept && (oldest === undefined || out.usedAt < oldest.usedAt)) oldest = out
    if (!oldest) return
    clearTimeout(oldest.retryTimer)
    this.#dropQueued(oldest)
    this.#reset(oldest, false)
    this.#outbound.delete(oldest.nodeId)
    this.#down.delete(oldest.nodeId)
  }

  #flushAll(): void {
    this.#flushScheduled = false
    for (const out of this.#outbound.values()) this.#flush(out)
  }

  #flush(out: Outbound): void {
    if (out.queue.length === 0 || this.#closed) return
    // A stream waiting for its peer to read is left alone, unless the peer moved: then the
    // new address gets a new stream at once (the old one's peer may never read again).
    if (out.waitingDrain && (out.stream === undefined || this.#options.resolve(out.nodeId) === out.address))
      return
    let stream: ClientWritableStream<RaftBatch> | undefined
    try {
      stream = this.#stream(out)
    } catch {
      // An address grpc-js cannot parse (a peer registers its own): dropped as for an unknown
      // one, never thrown out of the flush's setImmediate, which ended the process.
      this.#dropQueued(out)
      return
    }
    if (!stream) return
    // At most a batch's worth being written at once: what grpc-js buffers beyond is bounded
    // here, not by its stream's count of ~16 batches (up to 128 MiB a peer).
    while (out.queue.length > 0 && out.writing < this.#options.batchBytesMax) {
      const { messages, bytes } = this.#nextBatch(out)
      this.stats.sent += messages.length
      out.writing += bytes
      const written = () => {
        if (out.stream !== stream) return // reset: counted off then
        out.writing -= bytes
        this.#queuedBytes -= bytes
        this.#flush(out)
      }
      if (!stream.write({ fromNode: this.#options.nodeId, messages }, written)) {
        out.waitingDrain = true
        stream.once('drain', () => {
          out.waitingDrain = false
          this.#flush(out)
        })
        return
      }
    }
  }

  /**
   * Takes the next batch off the queue: up to `batchMax` messages and `batchBytesMax` bytes
   * (one at least). Its bytes stay in the gauge until their write completes.
   */
  #nextBatch(out: Outbound): { messages: RaftMessage[]; bytes: number } {
    let n = 0
    let bytes = 0
    const max = Math.min(this.#options.batchMax, out.queue.length)
    while (n < max && (n === 0 || bytes + (out.sizes[n] as number) <= this.#options.batchBytesMax)) {
      bytes += out.sizes[n] as number
      n++
    }
    out.sizes.splice(0, n)
    out.bytes -= bytes
    return { messages: out.queue.splice(0, n), bytes }
  }

  /** Drops every queued message of `out` (counted). */
  #dropQueued(out: Outbound): void {
    this.stats.dropped += out.queue.length
    this.#queuedBytes -= out.bytes
    out.queue.length = 0
    out.sizes.length = 0
    out.bytes = 0
  }

  #stream(out: Outbound): ClientWritableStream<RaftBatch> | undefined {
    const address = this.#options.resolve(out.nodeId)
    if (!address) {
      this.#dropQueued(out)
      return undefined
    }
    if (out.stream && out.address === address) return out.stream
    if (out.stream) this.#reset(out, false)
    const now = performance.now()
    if (now < out.retryAtMs) {
      out.retryTimer ??= setTimeout(() => {
        out.retryTimer = undefined
        this.#flush(out)
      }, out.retryAtMs - now)
      return undefined
    }
    if (out.address !== address) {
      out.client?.close()
      out.client = undefined
      out.address = address
    }
    out.client ??= new PeerClient(
      address,
      this.#options.credentials?.(out.nodeId) ?? credentials.createInsecure(),
      PEER_CHANNEL_OPTIONS,
    )
    const metadata = new Metadata()
    if (this.#options.token) metadata.set(PEER_TOKEN_KEY, this.#options.token)
    const stream = out.client.raft(metadata, (error) => {
      // The stream ended: by our close (no error), or by a failure; reopen on the next send.
      // A stream we did not end that fails as a broken connection (reset or refused, or cut off
      // by the peer's shutdown) means the peer is most likely gone.
      if (out.stream === stream && error && PEER_GONE_CODES.has(error.code) && !this.#closed) {
        this.#down.add(out.nodeId)
        this.#options.onPeerDown(out.nodeId)
      }
      if (out.stream === stream) this.#reset(out, Boolean(error))
    })
    out.stream = stream
    return stream
  }

  #reset(out: Outbound, failed: boolean): void {
    const stream = out.stream
    if (stream) {
      // An orderly end, then a cancel should the peer not finish it soon: a stopped peer
      // (SIGSTOP, cut off) never answers, and grpc-js keeps a channel with a call open alive,
      // so a node shutting down would not exit.
      stream.end()
      const timer = setTimeout(() => stream.cancel(), END_GRACE_MS)
      timer.unref?.()
      stream.once('status', () => clearTimeout(timer))
    }
    out.stream = undefined
    out.waitingDrain = false
    // What the old stream was writing is its own now (its callbacks are ignored).
    this.#queuedBytes -= out.writing
    out.writing = 0
    if (failed) {
      this.stats.streamFailures++
      out.retryAtMs = performance.now() + this.#options.reconnectMs
      this.#dropQueued(out)
    }
    if (!failed || this.#closed) {
      out.client?.close()
      out.client = undefined
    }
  }
}
