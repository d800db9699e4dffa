import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net'

/**
 * A TCP proxy in front of one node: every connection to the node's advertised address (from
 * peers and from clients alike) goes through it. `delay(ms)` delays every byte; `hold()` stops carrying bytes in both
 * directions of every connection, new ones included, as a network that drops every packet
 * to the node would (TCP would retransmit them later); `release()` delivers what was held, in
 * order, and carries on. A held connection keeps at most `heldBytesMax` per direction; beyond
 * it both sockets are destroyed (a connection reset).
 *
 * It sees only connections *to* its node: the node's own outbound connections go through the
 * other nodes' proxies, so holding one proxy cuts the node off one way (nobody reaches it; it
 * still reaches everyone, and gets no answer on those connections either when the answers
 * travel as requests to it, as Raft's do).
 */
export class FaultProxy {
  readonly port: number
  readonly targetPort: number
  readonly heldBytesMax: number
  readonly #server: Server
  readonly #pairs = new Set<Pair>()
  /** Connections accepted while held, not yet carried to the node. */
  readonly #waiting = new Set<Socket>()
  /** Pairs one end of which closed while held: destroyed on release. */
  readonly #closing = new Set<Pair>()
  #held = false
  #delayMs = 0

  private constructor(server: Server, port: number, targetPort: number, heldBytesMax: number) {
    this.#server = server
    this.port = port
    this.targetPort = targetPort
    this.heldBytesMax = heldBytesMax
    server.on('connection', (down) => {
      // While held, no SYN reaches the node either: the connection waits (unread) for release.
      if (!this.#held) return this.#accept(down)
      down.on('error', () => {})
      // Gone before the release (its client gave up): forgotten, so the set holds only open ones.
      down.once('close', () => this.#waiting.delete(down))
      this.#waiting.add(down)
    })
  }

  /** Listens on 127.0.0.1:`port` (0 = any free port) and forwards to 127.0.0.1:`targetPort`. */
  static start(port: number, targetPort: number, heldBytesMax = 64 * 1024 * 1024): Promise<FaultProxy> {
    const server = createServer({ noDelay: true })
    return new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(port, '127.0.0.1', () => {
        const a = server.address()
        if (typeof a !== 'object' || !a) return reject(new Error('proxy has no address'))
        resolve(new FaultProxy(server, a.port, targetPort, heldBytesMax))
      })
    })
  }

  get held(): boolean {
    return this.#held
  }

  /** Stops carrying bytes (both directions, every connection). */
  hold(): void {
    this.#held = true
  }

  /** Delays every byte by `ms` from now on (0 = none), both directions; order is kept. */
  delay(ms: number): void {
    if (!Number.isInteger(ms) || ms < 0)
      throw new RangeError(`delay must be a non-negative integer, got ${ms}`)
    this.#delayMs = ms
  }

  get delayMs(): number {
    return this.#delayMs
  }

  /** Delivers the held bytes in order, then carries bytes again. */
  release(): void {
    this.#held = false
    for (const p of this.#pairs) {
      p.toUp.flush()
      p.toDown.flush()
    }
    for (const p of this.#closing) p.destroy()
    this.#closing.clear()
    for (const down of this.#waiting) if (!down.destroyed) this.#accept(down)
    this.#waiting.clear()
  }

  /** Closes every connection and the listener. */
  async close(): Promise<void> {
    for (const p of this.#pairs) p.destroy()
    this.#closing.clear()
    for (const down of this.#waiting) down.destroy()
    this.#waiting.clear()
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }

  #accept(down: Socket): void {
    down.setNoDelay(true)
    const up = tcpConnect({ port: this.targetPort, host: '127.0.0.1', noDelay: true })
    const state = (): LaneState => ({ held: this.#held, delayMs: this.#delayMs })
    const pair: Pair = {
      toUp: new Lane(down, up, state, this.heldBytesMax, () => pair.destroy()),
      toDown: new Lane(up, down, state, this.heldBytesMax, () => pair.destroy()),
      destroy: () => {
        pair.toUp.stop()
        pair.toDown.stop()
        down.destroy()
        up.destroy()
        this.#pairs.delete(pair)
      },
    }
    this.#pairs.add(pair)
    // While held, a close (FIN, reset) is dropped like the bytes: it reaches the other end on
    // release (an audit: a client that went away during a cut was seen by the node at once).
    const closed = () => {
      if (this.#held) this.#closing.add(pair)
      else pair.destroy()
    }
    for (const s of [down, up]) {
      s.on('error', closed)
      s.on('close', closed)
    }
  }
}

interface Pair {
  readonly toUp: Lane
  readonly toDown: Lane
  destroy(): void
}

/** What a lane asks its proxy before it carries a chunk. */
interface LaneState {
  readonly held: boolean
  readonly delayMs: number
}

/**
 * One direction of a proxied connection: carries bytes at once, after the proxy's delay, or
 * keeps them while held; always in order.
 */
class Lane {
  readonly #from: Socket
  readonly #to: Socket
  readonly #state: () => LaneState
  readonly #bytesMax: number
  readonly #overflow: () => void
  readonly #queue: { chunk: Buffer; dueMs: number }[] = []
  #bytes = 0
  #timer: ReturnType<typeof setTimeout> | undefined

  constructor(from: Socket, to: Socket, state: () => LaneState, bytesMax: number, overflow: () => void) {
    this.#from = from
    this.#to = to
    this.#state = state
    this.#bytesMax = bytesMax
    this.#overflow = overflow
    from.on('data', (chunk: Buffer) => this.#carry(chunk))
    from.on('end', () => this.flush())
    to.on('close', () => this.stop())
  }

  /** Writes every chunk that is due, in order, unless held; schedules the rest. */
  flush(): void {
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
    if (this.#state().held) return
    const now = Date.now()
    while (this.#queue.length > 0 && (this.#queue[0]?.dueMs ?? 0) <= now) {
      const { chunk } = this.#queue.shift() as { chunk: Buffer }
      this.#bytes -= chunk.length
      this.#write(chunk)
    }
    const next = this.#queue[0]
    if (next) this.#timer = setTimeout(() => this.flush(), Math.max(1, next.dueMs - now))
    else if (this.#from.readableEnded && !this.#to.destroyed) this.#to.end()
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer)
    this.#timer = undefined
    this.#queue.length = 0
  }

  #carry(chunk: Buffer): void {
    const { held, delayMs } = this.#state()
    if (!held && delayMs === 0 && this.#queue.length === 0) {
      this.#write(chunk)
      return
    }
    this.#queue.push({ chunk, dueMs: Date.now() + delayMs })
    this.#bytes += chunk.length
    if (this.#bytes > this.#bytesMax) this.#overflow()
    else if (!held && !this.#timer) this.flush()
  }

  #write(chunk: Buffer): void {
    if (this.#to.destroyed) return
    if (!this.#to.write(chunk)) {
      this.#from.pause()
      this.#to.once('drain', () => this.#from.resume())
    }
  }
}
