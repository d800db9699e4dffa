import type { Http2Session, Http2Stream } from 'node:http2'
import { ServerInterceptingCall, type ServerInterceptor } from '@grpc/grpc-js'

/**
 * Bounds on answers written but not yet taken by their client. grpc-js writes an answer into
 * its HTTP/2 stream at once, whatever the stream's flow-control window, and the node holds
 * what the client does not read (HTTP/2 flow control, a full TCP window) without limit: one
 * connection that asked for 300 ListReady answers of 4 MiB and never read them held ~2.4 GB of
 * the node's memory, and a connection may keep 1,000 calls open (`GRPC_LIMITS`).
 */
export interface UnsentLimits {
  /**
   * One connection's unsent answers past this: the connection is closed (a slow reader, as
   * NATS closes a slow consumer). An answer just written counts in full until the socket has
   * taken it, so keep this well above what a client asks for at once on one connection: a
   * consumer's leases bring at most its prefetch × the queue's largest message, a lease
   * answer at most 16 MiB of bodies, a peek 8 answers of up to 4 MiB.
   */
  readonly connectionBytesMax: number
  /** Every connection's together past this: the connections holding the most are closed until under. */
  readonly totalBytesMax: number
}

/** An answer this large (its stream's unsent bytes) measures its connection at once. */
const MEASURE_FROM_BYTES = 64 * 1024
/** Smaller answers measure their connection every this many. */
const MEASURE_EVERY = 64

/** A connection closed for what it left unread. */
export interface SlowReader {
  /** `address:port` of the client. */
  readonly remote: string
  readonly unsentBytes: number
  /** Which bound it went past: its own, or the node's total (it held the most). */
  readonly limit: 'connection' | 'total'
}

interface Connection {
  readonly session: Http2Session
  /** Its streams that carried an answer and are still open. */
  readonly streams: Set<Http2Stream>
  /** Unsent bytes when last measured. */
  unsent: number
  answersSinceMeasure: number
}

/**
 * Keeps count of each connection's unsent answers (its open streams' `writableLength`) as
 * answers are written, and closes the connections past the limits. A connection is measured
 * when an answer of 64 KiB or more is written on it, and every 64 answers: what grows between
 * two measures is at most 64 small answers (4 MiB). The node's total is the sum of the last
 * measures (an over-estimate: answers drain in between), and every connection is measured
 * again before one is closed for it. Closing a connection ends its calls: what they had leased
 * is delivered again after its visibility timeout, as for any consumer that went away.
 */
export class UnsentAnswers {
  readonly #connections = new Map<Http2Session, Connection>()
  #measuredTotal = 0
  #closed = 0

  constructor(
    private readonly limits: UnsentLimits,
    private readonly onClose: (reader: SlowReader) => void,
  ) {}

  /** Connections closed as slow readers since the start. */
  get closed(): number {
    return this.#closed
  }

  /** The unsent bytes of every connection as last measured. */
  get unsentBytes(): number {
    return this.#measuredTotal
  }

  /** Called right after an answer was written on `stream`. */
  written(stream: Http2Stream): void {
    const session = stream.session
    if (session === undefined || session.destroyed) return
    let c = this.#connections.get(session)
    if (c === undefined) {
      const added: Connection = { session, streams: new Set(), unsent: 0, answersSinceMeasure: 0 }
      this.#connections.set(session, added)
      session.once('close', () => this.#forget(added))
      c = added
    }
    if (!c.streams.has(stream)) {
      const streams = c.streams
      streams.add(stream)
      stream.once('close', () => streams.delete(stream))
    }
    if (stream.writableLength < MEASURE_FROM_BYTES && ++c.answersSinceMeasure < MEASURE_EVERY) return
    this.#measure(c)
    if (c.unsent > this.limits.connectionBytesMax) this.#close(c, 'connection')
    else if (this.#measuredTotal > this.limits.totalBytesMax) this.#shed()
  }

  #measure(c: Connection): void {
    let unsent = 0
    for (const s of c.streams) unsent += s.writableLength
    this.#measuredTotal += unsent - c.unsent
    c.unsent = unsent
    c.answersSinceMeasure = 0
  }

  /** Measures every connection, then closes the largest until the total is within its bound. */
  #shed(): void {
    for (const c of this.#connections.values()) this.#measure(c)
    while (this.#measuredTotal > this.limits.totalBytesMax) {
      let worst: Connection | undefined
      for (const c of this.#connections.values())
        if (worst === undefined || c.unsent > worst.unsent) worst = c
      if (worst === undefined || worst.unsent === 0) return
      this.#close(worst, 'total')
    }
  }

  #forget(c: Connection): void {
    if (this.#connections.get(c.session) !== c) return
    this.#connections.delete(c.session)
    this.#measuredTotal -= c.unsent
  }

  #close(c: Connection, limit: SlowReader['limit']): void {
    const unsentBytes = c.unsent
    this.#forget(c)
    this.#closed++
    const socket = c.session.socket
    const remote = socket?.remoteAddress ? `${socket.remoteAddress}:${socket.remotePort}` : 'unknown'
    c.session.destroy()
    this.onClose({ remote, unsentBytes, limit })
  }
}

/**
 * The HTTP/2 stream under a grpc-js server call: grpc-js's BaseServerInterceptingCall keeps it
 * as `stream` (not part of its typed surface; undefined if a version stops doing so, and then
 * `onMissing` is told once and answers go unmeasured).
 */
function streamOf(call: unknown): Http2Stream | undefined {
  const stream = (call as { stream?: unknown }).stream as Http2Stream | undefined
  return stream !== undefined && typeof stream.writableLength === 'number' && 'session' in stream
    ? stream
    : undefined
}

/**
 * A server interceptor that reports every answer written to `answers`. It must be the first
 * in the server's list (grpc-js wraps the call in them in order): it reads the HTTP/2 stream
 * off the call it is given.
 */
export function unsentAnswersInterceptor(answers: UnsentAnswers, onMissing: () => void): ServerInterceptor {
  let missingTold = false
  return (_descriptor, call) => {
    const stream = streamOf(call)
    if (stream === undefined) {
      if (!missingTold) {
        missingTold = true
        onMissing()
      }
      return new ServerInterceptingCall(call)
    }
    return new ServerInterceptingCall(call, {
      sendMessage: (message, next) => {
        next(message)
        answers.written(stream)
      },
    })
  }
}
