import { randomUUID } from 'node:crypto'
import {
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_SOURCE_HEADER,
  HEADERS_PER_MESSAGE_MAX,
  IDEMPOTENT_BATCHES_IN_FLIGHT_MAX,
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  MESSAGE_DELAY_MS_MAX,
  MESSAGE_KEY_BYTES_MAX,
  MqError,
  type ProduceMessage,
  type QueueRoute,
} from '@mq/protocol'
import { ClientClosedError } from './client-closed-error'
import { checkBoolean, checkInteger, definedOnly, TIMER_MS_MAX } from './option-checks'
import { type KeylessPartitioning, type LaneLoad, Partitioner } from './partitioner'
import { mayHaveActed, PartitionNotFoundError, type Router } from './router'
import { type SendDeadline, SendDeadlines } from './send-deadline'
import { SendGenerations } from './send-generations'
import { SendOutcomeUnknownError } from './send-outcome-unknown-error'
import { SendTimeoutError } from './send-timeout-error'
import { unary } from './unary'

/** A message to send. `body` strings are sent as UTF-8. */
export interface OutgoingMessage {
  readonly body: Uint8Array | string
  /** 1..1000 (default 1): the message's share of deliveries while its queue is backlogged. */
  readonly weight?: number
  /** Messages with one key go to one partition (FIFO among equal weights). */
  readonly key?: string
  /**
   * Picks the partition as a key would (one partition per value while the partition count
   * holds) without being stored: the message stays keyless for its consumers. `key` wins
   * when both are set.
   */
  readonly partitionKey?: string
  readonly headers?: Readonly<Record<string, string>>
  /** Not deliverable before this many ms from now. */
  readonly delayMs?: number
  /**
   * Within the queue's dedup window, a repeated key is enqueued once. The server remembers it
   * per partition, so without `key` or `partitionKey` the dedup key picks the partition as a
   * partition key would: every send of it, from any producer, lands where the first did (while
   * the partition count holds: a partition added in between may send a repeat elsewhere).
   */
  readonly dedupKey?: string
}

export interface SendResult {
  /** The message id, unique within its partition. */
  readonly id: number
  readonly partition: number
  /** True when the broker had the batch already (an idempotent retry). */
  readonly duplicate: boolean
}

export interface ProducerOptions {
  /**
   * Retries resend the same (producer id, sequence), so the broker enqueues a batch once, and
   * batches of a partition are enqueued in the order they were sent, even when several are
   * in flight and a retry overtakes (the broker refuses a batch that comes before an earlier
   * one still in flight; it is retried after it).
   */
  readonly idempotent: boolean
  /**
   * How long a batch waits for more messages before it goes. 0 (the default): it goes at the
   * end of the current event-loop turn, so a burst of sends shares a batch without delaying a
   * lone message; under load batches still grow while the previous one is in flight.
   * Infinity: a batch goes only when full, when the batch before it returns, or on flush().
   */
  readonly lingerMs: number
  /** Messages per batch, at most (1 to 1,000, the messages one Produce may carry). */
  readonly batchMax: number
  /**
   * Bytes per batch, at most: bodies, header names and values, keys and dedup keys (a bigger
   * single message goes alone).
   */
  readonly batchBytesMax: number
  /** Messages accepted but not yet acknowledged, at most; `send` waits beyond it. */
  readonly bufferMax: number
  /**
   * Their bytes (as `batchBytesMax` counts them), at most; `send` waits beyond it (a message
   * bigger than this alone goes when nothing else is buffered).
   */
  readonly bufferBytesMax: number
  /**
   * Sends waiting for room in the buffer (first come first served), at most: beyond it `send`
   * rejects at once with LimitExceededError, so a caller that does not await its sends cannot
   * grow the list (each holds its message) without bound. 0: `send` never waits, it rejects
   * when the buffer is full (Kafka's `max.block.ms=0`).
   */
  readonly waitingMax: number
  /**
   * Their bytes (as `batchBytesMax` counts them), at most; beyond it `send` rejects at once
   * (a bigger message may still wait when no other send does).
   */
  readonly waitingBytesMax: number
  /**
   * Batches in flight per partition. Idempotent producers: at most
   * IDEMPOTENT_BATCHES_IN_FLIGHT_MAX (5), the batches a broker remembers per producer.
   */
  readonly inFlightMax: number
  /**
   * How messages without a key pick a partition (partitioner.ts): `sticky` (the default) fills
   * one partition's batch (`batchMax`, `batchBytesMax`), then takes the least loaded one;
   * `round-robin` one message per partition in turn.
   */
  readonly keyless: KeylessPartitioning
  /**
   * Sticky: a partition whose batch has been in flight this long is left for another at once,
   * so that a partition failing over or slow does not hold every keyless send.
   */
  readonly stallMs: number
  /**
   * A send's delivery timeout, from the send() call (Kafka's `delivery.timeout.ms`); default:
   * twice the client's `deadlineMs` (30 s with its defaults); Infinity: none. A send still
   * unsent then — waiting for room in the buffer, for its route, or in its partition's queue
   * behind the batches in flight — leaves the buffer and rejects with SendTimeoutError
   * (UNAVAILABLE, retriable); it was not stored. A send whose batch was sent by then ends with
   * that batch (the router gives up on it at `deadlineMs` from its sending), so a send settles
   * within sendTimeoutMs + deadlineMs at most. Only unsent messages are dropped, and a batch's
   * sequence number is taken when it is sent: an idempotent producer's order is unaffected.
   */
  readonly sendTimeoutMs?: number
}

export const DEFAULT_PRODUCER_OPTIONS: ProducerOptions = {
  idempotent: true,
  lingerMs: 0,
  batchMax: 512,
  batchBytesMax: 1024 * 1024,
  bufferMax: 10_000,
  bufferBytesMax: 64 * 1024 * 1024,
  waitingMax: 10_000,
  waitingBytesMax: 64 * 1024 * 1024,
  inFlightMax: 4,
  keyless: 'sticky',
  stallMs: 200,
}

interface Pending {
  readonly message: ProduceMessage
  readonly bytes: number
  /** Its partition was picked by a key or partition key (else: keyless). */
  readonly keyed: boolean
  /** Its delivery timeout (stopped when its batch is sent, or when it settles). */
  readonly deadline: SendDeadline
  readonly resolve: (r: SendResult) => void
  readonly reject: (e: unknown) => void
}

/** A batch in flight: when it was sent (performance.now()) and its sequence (0: not idempotent). */
interface InFlight {
  readonly sentAtMs: number
  readonly sequence: number
}

interface Lane {
  readonly partition: number
  readonly pending: Pending[]
  pendingBytes: number
  /** Messages in the batches in flight. */
  inFlightMessages: number
  /** The batches in flight, in the order they were sent (so their sequences ascend). */
  readonly inFlight: InFlight[]
  /** The last sequence given to a batch (idempotent producers). */
  sequence: number
  /**
   * The partition's last answer said it keeps pipelined batches in order (ProduceResponse
   * `pipelining`): until then an idempotent lane keeps one batch in flight.
   */
  pipelining: boolean
  /** Cancels the pending dispatch of this lane's batch (undefined: none pending). */
  cancel: (() => void) | undefined
}

const encoder = new TextEncoder()

/**
 * Sends messages to one queue. Messages are batched per partition by linger time and size;
 * `send` resolves once its batch is committed and durable on a majority of the partition's
 * data group, and rejects with a typed error when that cannot happen before the deadline.
 */
export class Producer {
  readonly queue: string
  /** The idempotence identity of this producer ('' when not idempotent). */
  readonly producerId: string
  readonly #router: Router
  readonly #options: ProducerOptions
  readonly #partitioner: Partitioner
  readonly #lanes = new Map<number, Lane>()
  /**
   * Sends waiting for room, first come first served (a later small one does not pass an
   * earlier big one): each is admitted (true) with its room taken, or refused at close (false),
   * or leaves when its send expires (sendTimeoutMs).
   * Invariant: length <= waitingMax, and `#waitingBytes` <= waitingBytesMax unless length is 1.
   */
  readonly #spaceWaiters: SpaceWaiter[] = []
  /** The bytes of the sends in `#spaceWaiters`. */
  #waitingBytes = 0
  /** Settles once the latest send called has joined its lane, or failed (send: call order). */
  #joined: Promise<void> = Promise.resolve()
  /** Sends in #accept not yet joined nor failed: while any is, a send waits its turn there. */
  #joining = 0
  /** The sends each flush() waits for (those called before it). */
  readonly #generations = new SendGenerations()
  /** `sendTimeoutMs`, its default resolved. */
  readonly #sendTimeoutMs: number
  /** The sends' delivery timeouts (one timer). */
  readonly #deadlines: SendDeadlines
  #buffered = 0
  #bufferedBytes = 0
  #closed = false

  /** Throws a RangeError naming the first option out of range (undefined ones take defaults). */
  constructor(router: Router, queue: string, options: Partial<ProducerOptions> = {}) {
    this.#router = router
    this.queue = queue
    this.#options = { ...DEFAULT_PRODUCER_OPTIONS, ...definedOnly(options) }
    const o = this.#options
    for (const [k, v] of Object.entries({
      batchMax: o.batchMax,
      bufferMax: o.bufferMax,
      bufferBytesMax: o.bufferBytesMax,
      waitingBytesMax: o.waitingBytesMax,
      inFlightMax: o.inFlightMax,
    })) {
      checkInteger(`producer option ${k}`, v, 1, Number.MAX_SAFE_INTEGER)
    }
    checkInteger('producer option waitingMax', o.waitingMax, 0, Number.MAX_SAFE_INTEGER)
    checkBoolean('producer option idempotent', o.idempotent)
    // Timers go no further than TIMER_MS_MAX (a longer one fires at once).
    checkInteger('producer option lingerMs', o.lingerMs, 0, TIMER_MS_MAX, true)
    checkInteger('producer option stallMs', o.stallMs, 1, TIMER_MS_MAX)
    this.#sendTimeoutMs =
      o.sendTimeoutMs ?? Math.min(TIMER_MS_MAX, SEND_TIMEOUT_DEADLINES * router.options.deadlineMs)
    checkInteger('producer option sendTimeoutMs', this.#sendTimeoutMs, 1, TIMER_MS_MAX, true)
    this.#deadlines = new SendDeadlines(this.#sendTimeoutMs)
    if (!Number.isInteger(o.batchBytesMax) || o.batchBytesMax > PRODUCE_BATCH_BYTES_MAX)
      throw new RangeError(
        `producer option batchBytesMax must be from 1 to ${PRODUCE_BATCH_BYTES_MAX} (a batch is one Raft entry, and a server takes entries of at most 32 MiB), got ${o.batchBytesMax}`,
      )
    if (o.batchMax > PRODUCE_BATCH_MAX)
      throw new RangeError(
        `producer option batchMax must be at most ${PRODUCE_BATCH_MAX} (the messages one Produce may carry), got ${o.batchMax}`,
      )
    if (o.idempotent && o.inFlightMax > IDEMPOTENT_BATCHES_IN_FLIGHT_MAX)
      throw new RangeError(
        `producer option inFlightMax must be at most ${IDEMPOTENT_BATCHES_IN_FLIGHT_MAX} for an idempotent producer (the batches a broker remembers per producer), got ${o.inFlightMax}`,
      )
    if (o.keyless !== 'sticky' && o.keyless !== 'round-robin')
      throw new RangeError(
        `producer option keyless must be 'sticky' or 'round-robin', got ${String(o.keyless)}`,
      )
    this.#partitioner = new Partitioner({
      keyless: o.keyless,
      batchMax: o.batchMax,
      batchBytesMax: o.batchBytesMax,
    })
    this.producerId = o.idempotent ? randomUUID() : ''
  }

  /**
   * Sends one message; resolves when it is durable. While the buffer is full (`bufferMax`,
   * `bufferBytesMax`) it waits for room; rejects at once with LimitExceededError (retriable)
   * when the waiting list is full too (`waitingMax`, `waitingBytesMax`), and with
   * SendTimeoutError when it is still unsent `sendTimeoutMs` after the call.
   */
  async send(message: OutgoingMessage): Promise<SendResult> {
    if (this.#closed) throw this.#closedError()
    // Checked and sized before its deadline starts: a bad message leaves no timer behind.
    const wire = toWire(message)
    const bytes = wireBytes(wire)
    const key = message.key || message.partitionKey || message.dedupKey || undefined
    const generation = this.#generations.begin()
    try {
      return await new Promise<SendResult>((resolve, reject) => {
        const deadline = this.#deadlines.start(() => reject(this.#timedOut()))
        const pending: Pending = {
          message: wire,
          bytes,
          keyed: key !== undefined,
          deadline,
          resolve: (r) => {
            deadline.stop()
            resolve(r)
          },
          reject: (e) => {
            deadline.stop()
            reject(e)
          },
        }
        if (!this.#acceptNow(pending, key)) void this.#accept(pending, key)
      })
    } finally {
      this.#generations.end(generation)
    }
  }

  /**
   * Takes `p` into the buffer and adds it to its partition's lane at once, when nothing need
   * be waited for: no send ahead of it still joining (#accept), room in the buffer, and the
   * route cached. Whether it did; fails `p` rather than throwing. Most sends go this way: the
   * waits of #accept (an async step and a promise per send) took about a third of a producing
   * client's CPU, its garbage included (2026-12-07).
   */
  #acceptNow(p: Pending, key: string | undefined): boolean {
    if (this.#joining > 0 || this.#spaceWaiters.length > 0 || !this.#hasRoom(p.bytes)) return false
    const route = this.#router.usedRoute(this.queue)
    if (!route) return false
    try {
      this.#takeRoom(p)
      this.#join(p, key, route)
    } catch (error) {
      p.reject(error)
    }
    return true
  }

  /** Takes `p`'s room in the buffer; it goes back should `p`'s deadline pass before it is sent. */
  #takeRoom(p: Pending): void {
    this.#take(p.bytes)
    p.deadline.waiting(() => this.#release(1, p.bytes))
  }

  /** Adds `p`, which holds its room, to the lane of the partition of `route` it goes to. */
  #join(p: Pending, key: string | undefined, route: QueueRoute): void {
    const partition = this.#partitioner.choose(route.partitions.length, key, p.bytes, (q) => this.#load(q))
    this.#enqueue(partition, p)
  }

  /**
   * Takes `p` into the buffer (waiting for room if need be), then adds it to its partition's
   * lane. Fails `p` rather than throwing; one that expired on the way is already failed.
   */
  async #accept(p: Pending, key: string | undefined): Promise<void> {
    this.#joining++
    // Sends join their lanes in call order, whatever order their route lookups end in: a
    // lane's order is the order of its sequence numbers. (Route lookups that wait on a fetch
    // under way can end out of order: one that retried after a failed fetch ended after a
    // later send's — a send stored ahead of three sent before it, in the fault run of seed
    // 25004.) Each send waits for the one before it to join, or to fail.
    const before = this.#joined
    let joined!: () => void
    this.#joined = new Promise<void>((resolve) => {
      joined = resolve
    })
    try {
      if (this.#spaceWaiters.length > 0 || !this.#hasRoom(p.bytes)) {
        // With lingerMs Infinity a partial batch goes only when full: a buffer full of partial
        // batches (bufferMax below batchMax, or below partitions × batchMax) waited for sends
        // that waited for room (or refused them all: waitingMax 0), and every send timed out.
        // They go now, as flush() sends them.
        if (this.#options.lingerMs === Number.POSITIVE_INFINITY)
          for (const lane of this.#lanes.values()) this.#dispatch(lane)
        if (!this.#hasWaitingRoom(p.bytes)) throw this.#full(p.bytes)
        if (!(await this.#waitForRoom(p))) return
      } else this.#takeRoom(p)
      let route: QueueRoute
      try {
        route = await this.#router.route(this.queue)
        await before
      } catch (error) {
        if (!p.deadline.expired) this.#release(1, p.bytes)
        throw error
      }
      // Expired meanwhile: its room went back then.
      if (p.deadline.expired) return
      this.#join(p, key, route)
    } catch (error) {
      p.reject(error)
    } finally {
      this.#joining--
      joined()
    }
  }

  /**
   * Waits, first come first served, until the buffer has room for `p` and takes it: true.
   * False when `p` expired first (it left the list); rejects when the producer closed.
   */
  #waitForRoom(p: Pending): Promise<boolean> {
    this.#waitingBytes += p.bytes
    return new Promise<boolean>((resolve, reject) => {
      const waiter: SpaceWaiter = {
        bytes: p.bytes,
        admit: (admitted) => {
          if (!admitted) {
            reject(this.#closedError())
            return
          }
          // Its room is taken (#admitWaiters): the deadline gives it back from now on.
          p.deadline.waiting(() => this.#release(1, p.bytes))
          resolve(true)
        },
      }
      this.#spaceWaiters.push(waiter)
      p.deadline.waiting(() => {
        this.#spaceWaiters.splice(this.#spaceWaiters.indexOf(waiter), 1)
        this.#waitingBytes -= p.bytes
        // The sends behind it may fit now (it may have been a big one).
        this.#admitWaiters()
        resolve(false)
      })
    })
  }

  #closedError(): ClientClosedError {
    return new ClientClosedError(`producer for ${this.queue} is closed`)
  }

  #timedOut(): SendTimeoutError {
    return new SendTimeoutError(
      `producer for ${this.queue}: the message was not sent within sendTimeoutMs (${this.#sendTimeoutMs} ms) — it waited for room in the buffer, for its route, or behind its partition's batches in flight (a partition unavailable or slow); it was not stored`,
    )
  }

  /** Adds `p` to its partition's lane and sees that the lane's batch goes (full: now). */
  #enqueue(partition: number, p: Pending): void {
    const lane = this.#lane(partition)
    lane.pending.push(p)
    lane.pendingBytes += p.bytes
    p.deadline.waiting(() => this.#drop(lane, p))
    if (
      lane.pending.length >= this.#batchMax() ||
      lane.pendingBytes >= this.#options.batchBytesMax ||
      // A flush waits: it must not wait out a linger (nor for ever: lingerMs Infinity).
      this.#generations.flushing ||
      // The buffer is full (sends wait for room, or would be refused: waitingMax 0), and only
      // this batch's going can free it (lingerMs Infinity: #accept).
      (this.#options.lingerMs === Number.POSITIVE_INFINITY &&
        (this.#spaceWaiters.length > 0 || !this.#hasRoom(1)))
    ) {
      this.#dispatch(lane)
    } else if (!lane.cancel && this.#options.lingerMs !== Number.POSITIVE_INFINITY) {
      const fire = () => {
        lane.cancel = undefined
        this.#dispatch(lane)
      }
      if (this.#options.lingerMs > 0) {
        const timer = setTimeout(fire, this.#options.lingerMs)
        lane.cancel = () => clearTimeout(timer)
      } else {
        const immediate = setImmediate(fire)
        lane.cancel = () => clearImmediate(immediate)
      }
    }
  }

  /**
   * The lane's partition is gone (PartitionNotFoundError: the queue was deleted and created
   * again with fewer partitions since these messages were routed by its cached route): the
   * batch that found it so (`failed`) and what waits in the lane leave it. Keyless messages go
   * again to partitions of the current route; keyed ones (key, partition key or dedup key) fail with the
   * error: their key, hashed on the old count, picked the partition, and the application
   * decides where (and in which order) they go now. Returns those of `failed` that failed.
   */
  #reroute(lane: Lane, failed: readonly Pending[], error: PartitionNotFoundError): Pending[] {
    const waiting = lane.pending.splice(0)
    lane.pendingBytes = 0
    lane.cancel?.()
    lane.cancel = undefined
    // The lanes that take messages of the failed batch: sent once, their delivery timeouts
    // stopped then, they must not wait for a linger (lingerMs Infinity: for ever, the send
    // never settled; until an audit).
    const resent = new Set<number>()
    const again = (p: Pending, sent: boolean): boolean => {
      if (p.keyed) {
        p.reject(error)
        return false
      }
      const partition = this.#partitioner.choose(error.partitions, undefined, p.bytes, (q) => this.#load(q))
      this.#enqueue(partition, p)
      if (sent) resent.add(partition)
      return true
    }
    const lost = failed.filter((p) => !again(p, true))
    // Those of the batch leave the buffer with it (#produce); those that waited, here.
    for (const p of waiting) if (!again(p, false)) this.#release(1, p.bytes)
    for (const partition of resent) {
      const to = this.#lanes.get(partition)
      if (to) this.#dispatch(to)
    }
    // The lane goes with its last batch in flight (this one): a partition of its number that
    // is added later starts afresh.
    if (lane.inFlight.length <= 1 && this.#lanes.get(lane.partition) === lane)
      this.#lanes.delete(lane.partition)
    return lost
  }

  /** `p` expired unsent in `lane`'s queue: it leaves the lane and the buffer. */
  #drop(lane: Lane, p: Pending): void {
    lane.pending.splice(lane.pending.indexOf(p), 1)
    lane.pendingBytes -= p.bytes
    this.#release(1, p.bytes)
  }

  /**
   * Sends everything buffered now (without lingering) and resolves once every send called
   * before it has settled (acknowledged, failed or timed out: at most `sendTimeoutMs` plus the
   * deadline). Sends called after it do not hold it up (until 2026-12-02 it waited for an empty
   * buffer, for ever under senders that kept sending).
   */
  async flush(): Promise<void> {
    const flushed = this.#generations.flushed()
    for (const lane of this.#lanes.values()) this.#dispatch(lane)
    await flushed
  }

  /**
   * Refuses further sends (and those still waiting for room), then flushes what was accepted:
   * resolves once every accepted message is acknowledged or failed (bounded by `sendTimeoutMs`
   * plus the deadline), however busy its senders.
   */
  async close(): Promise<void> {
    this.#closed = true
    for (const waiter of this.#spaceWaiters.splice(0)) waiter.admit(false)
    this.#waitingBytes = 0
    await this.flush()
  }

  /** Whether a message of `bytes` fits the buffer now (one always does in an empty buffer). */
  #hasRoom(bytes: number): boolean {
    if (this.#buffered === 0) return true
    return (
      this.#buffered < this.#options.bufferMax && this.#bufferedBytes + bytes <= this.#options.bufferBytesMax
    )
  }

  /**
   * Whether a send of `bytes` may join the waiting list (one always may join an empty list,
   * unless waitingMax is 0).
   */
  #hasWaitingRoom(bytes: number): boolean {
    const waiting = this.#spaceWaiters.length
    if (waiting >= this.#options.waitingMax) return false
    return waiting === 0 || this.#waitingBytes + bytes <= this.#options.waitingBytesMax
  }

  /** The error of a send of `bytes` that found the buffer and the waiting list full. */
  #full(bytes: number): LimitExceededError {
    const o = this.#options
    return new LimitExceededError(
      `producer for ${this.queue}: its buffer (${this.#buffered} of bufferMax ${o.bufferMax} messages, ${this.#bufferedBytes} of bufferBytesMax ${o.bufferBytesMax} bytes) and its list of sends waiting for room (${this.#spaceWaiters.length} of waitingMax ${o.waitingMax} sends, ${this.#waitingBytes} of waitingBytesMax ${o.waitingBytesMax} bytes) are full; this send of ${bytes} bytes was not accepted: await send() (or flush()) before sending more, or raise those limits`,
    )
  }

  /** A partition's load as the partitioner sees it. */
  #load(partition: number): LaneLoad {
    const lane = this.#lanes.get(partition)
    if (!lane) return { queued: 0, stalled: false }
    const oldest = lane.inFlight[0]?.sentAtMs ?? Number.POSITIVE_INFINITY
    return {
      queued: lane.pending.length + lane.inFlightMessages,
      stalled: performance.now() - oldest >= this.#options.stallMs,
    }
  }

  #lane(partition: number): Lane {
    let lane = this.#lanes.get(partition)
    if (!lane) {
      lane = {
        partition,
        pending: [],
        pendingBytes: 0,
        inFlightMessages: 0,
        inFlight: [],
        sequence: 0,
        pipelining: false,
        cancel: undefined,
      }
      this.#lanes.set(partition, lane)
    }
    return lane
  }

  #dispatch(lane: Lane): void {
    lane.cancel?.()
    lane.cancel = undefined
    const { batchBytesMax } = this.#options
    const batchMax = this.#batchMax()
    // An idempotent lane pipelines only towards a partition that said it keeps the order.
    const inFlightMax = this.#options.idempotent && !lane.pipelining ? 1 : this.#options.inFlightMax
    while (lane.pending.length > 0 && lane.inFlight.length < inFlightMax) {
      // A batch joins others in flight only when it is full: partial ones would carry the same
      // messages in more requests and Raft entries; they go when nothing is in flight.
      if (lane.inFlight.length > 0 && lane.pending.length < batchMax && lane.pendingBytes < batchBytesMax)
        break
      // The sequences in flight span fewer than IDEMPOTENT_BATCHES_IN_FLIGHT_MAX, the batches a
      // broker remembers: later batches can be answered while an earlier one (its reply lost)
      // is retried, and that retry must still find its batch among the remembered ones.
      const oldest = lane.inFlight[0]?.sequence
      if (oldest && lane.sequence + 1 - oldest >= IDEMPOTENT_BATCHES_IN_FLIGHT_MAX) break
      let bytes = 0
      let count = 0
      while (count < lane.pending.length && count < batchMax) {
        const next = (lane.pending[count] as Pending).bytes
        if (count > 0 && bytes + next > batchBytesMax) break
        bytes += next
        count++
      }
      const batch = lane.pending.splice(0, count)
      // Sent: their outcome is the batch's from now on (see sendTimeoutMs).
      for (const p of batch) p.deadline.stop()
      lane.pendingBytes -= bytes
      lane.inFlightMessages += batch.length
      const flight = { sentAtMs: performance.now(), sequence: this.#options.idempotent ? ++lane.sequence : 0 }
      lane.inFlight.push(flight)
      void this.#produce(lane, batch, flight)
    }
  }

  /**
   * `batchMax`, or fewer when a partition of the queue holds fewer messages in all (its share
   * of the queue's `queueLengthMax`, as the route's config says): a larger batch could never
   * be stored, and the partition refuses it for good.
   */
  #batchMax(): number {
    const config = this.#router.cachedRoute(this.queue)?.config
    if (!config || !(config.queueLengthMax > 0)) return this.#options.batchMax
    const room = Math.ceil(config.queueLengthMax / Math.max(1, config.partitions))
    return Math.max(1, Math.min(this.#options.batchMax, room))
  }

  async #produce(lane: Lane, sent: Pending[], flight: InFlight): Promise<void> {
    let batch = sent
    const messages = batch.map((p) => p.message)
    const { sequence } = flight
    // Whether an attempt went out and ended without an answer that says it stored nothing.
    let uncertain = false
    // Attempts sent and not answered yet. One the router left behind (a silent leader's, when
    // a replica probed meanwhile named another leader) may still store the batch: the
    // outcome is as uncertain as after a lost answer (found by an audit: the other messages
    // of a batch the next leader refused for one were sent again under a new sequence).
    let outstanding = 0
    const counted = <T>(attempt: Promise<T>): Promise<T> => {
      outstanding++
      return attempt.finally(() => {
        outstanding--
      })
    }
    try {
      const response = await this.#router.partition(this.queue, lane.partition, (connection, target, ms) =>
        noteUnanswered(
          () => {
            uncertain = true
          },
          counted(
            unary(
              connection.queue,
              connection.queue.produce,
              // The base is read at each attempt: a batch before this one that failed for good
              // leaves the window, and the broker then accepts this one after the gap.
              sequence > 0
                ? {
                    target,
                    producerId: this.producerId,
                    sequence,
                    sequenceBase: (lane.inFlight[0] as InFlight).sequence,
                    messages,
                  }
                : { target, producerId: this.producerId, sequence, messages },
              ms,
            ),
          ),
        ),
      )
      if (response.ids.length !== batch.length) {
        throw new InternalError(
          `the broker returned ${response.ids.length} ids for a batch of ${batch.length}`,
        )
      }
      lane.pipelining = response.pipelining
      for (const [i, p] of batch.entries()) {
        p.resolve({ id: response.ids[i] as number, partition: lane.partition, duplicate: response.duplicate })
      }
    } catch (error) {
      if (outstanding > 0) uncertain = true
      if (error instanceof PartitionNotFoundError) {
        batch = this.#reroute(lane, batch, error)
        return
      }
      const bad = error instanceof InvalidArgumentError ? error.facts.messageIndex : undefined
      // The partition refused the batch whole for one message (over the queue's size limit,
      // say), storing none of it, and named it: that send fails, the others go again ahead of
      // what waits — when no later batch is in flight, which could be stored before them, and
      // no attempt of it went unanswered: one may have been stored before the queue's limits
      // were lowered, and the others sent again under a new sequence would be stored twice.
      if (
        bad !== undefined &&
        bad < batch.length &&
        batch.length > 1 &&
        lane.inFlight.length === 1 &&
        !uncertain
      ) {
        const others = batch.filter((_, i) => i !== bad)
        batch = [batch[bad] as Pending]
        lane.pending.unshift(...others)
        lane.pendingBytes += others.reduce((n, p) => n + p.bytes, 0)
      }
      const failure = uncertain ? outcomeUnknown(error) : error
      for (const p of batch) p.reject(failure)
    } finally {
      lane.inFlightMessages -= messages.length
      lane.inFlight.splice(lane.inFlight.indexOf(flight), 1)
      this.#release(
        batch.length,
        batch.reduce((n, p) => n + p.bytes, 0),
      )
      if (lane.pending.length > 0) this.#dispatch(lane)
    }
  }

  /** Takes room in the buffer for a message of `bytes`. */
  #take(bytes: number): void {
    this.#buffered++
    this.#bufferedBytes += bytes
  }

  /** Gives back the room of `count` messages of `bytes` in all; waiting sends may take it. */
  #release(count: number, bytes: number): void {
    this.#buffered -= count
    this.#bufferedBytes -= bytes
    this.#admitWaiters()
  }

  /** Lets the sends waiting for room in, first come first served, while they fit. */
  #admitWaiters(): void {
    for (let head = this.#spaceWaiters[0]; head && this.#hasRoom(head.bytes); head = this.#spaceWaiters[0]) {
      this.#spaceWaiters.shift()
      this.#waitingBytes -= head.bytes
      this.#take(head.bytes)
      head.admit(true)
    }
  }
}

/** A send waiting for room: admitted (true) with its room taken, or refused at close (false). */
interface SpaceWaiter {
  readonly bytes: number
  readonly admit: (admitted: boolean) => void
}

/** The default `sendTimeoutMs`, in the client's deadlines: one for waiting, one for the batch. */
const SEND_TIMEOUT_DEADLINES = 2

/** The most messages one Produce may carry (a partition's enqueue batch limit). */
const PRODUCE_BATCH_MAX = 1000
/**
 * The bytes of one batch at most (`batchBytesMax`; a single message bigger than it still goes
 * alone, up to a queue's 16 MiB limit): a batch is one Raft entry, which servers take up to
 * 32 MiB (mq-server's ENTRY_BYTES_MAX).
 */
const PRODUCE_BATCH_BYTES_MAX = 16 * 1024 * 1024

/**
 * The headers a produced message may have besides the two the dead-letter forwarder adds to its
 * copy (the partitions' bound: data-service's checkProduce).
 */
const PRODUCED_HEADERS_MAX = HEADERS_PER_MESSAGE_MAX - 2

/** A message's bytes as a batch counts them: what grows its Produce request. */
function wireBytes(m: ProduceMessage): number {
  let n = m.body.length + Buffer.byteLength(m.key) + Buffer.byteLength(m.dedupKey)
  for (const name in m.headers) n += Buffer.byteLength(name) + Buffer.byteLength(m.headers[name] as string)
  return n
}

/** The fields of a message that must be strings, and those of them bounded in UTF-8 bytes. */
const STRING_FIELDS = ['key', 'partitionKey', 'dedupKey'] as const
const BOUNDED_FIELDS = ['key', 'dedupKey'] as const

function toWire(message: OutgoingMessage): ProduceMessage {
  // `send(null)` threw a bare TypeError (reading `body` of null) until 2026-12-07 (an audit).
  if (typeof message !== 'object' || message === null || Array.isArray(message))
    throw new InvalidArgumentError(
      `a message must be an object ({ body, weight?, key?, headers?, … }), got ${message === null ? 'null' : Array.isArray(message) ? 'an array' : typeof message}`,
    )
  const body = typeof message.body === 'string' ? encoder.encode(message.body) : message.body
  if (!(body instanceof Uint8Array))
    throw new InvalidArgumentError('message body must be a Uint8Array or a string')
  const weight = message.weight ?? 1
  if (!Number.isInteger(weight) || weight < 1 || weight > 1000) {
    throw new InvalidArgumentError(`weight must be an integer from 1 to 1000, got ${String(message.weight)}`)
  }
  for (const field of STRING_FIELDS) {
    const value = message[field]
    if (value !== undefined && typeof value !== 'string')
      throw new InvalidArgumentError(`${field} must be a string, got ${typeof value}`)
  }
  // Past a partition's own bounds (whatever the queue's settings) the message would refuse its
  // whole batch there, and with later batches in flight every send of that batch failed with it.
  for (const field of BOUNDED_FIELDS) {
    const text = message[field] ?? ''
    // A UTF-16 unit is at most 3 UTF-8 bytes (a pair, two units, is 4): a short one is not counted.
    if (text.length * 3 <= MESSAGE_KEY_BYTES_MAX) continue
    const bytes = Buffer.byteLength(text)
    if (bytes > MESSAGE_KEY_BYTES_MAX)
      throw new InvalidArgumentError(
        `${field} is ${bytes} UTF-8 bytes long; the limit is ${MESSAGE_KEY_BYTES_MAX}`,
      )
  }
  const headers = message.headers ?? {}
  // A Map is an object too, but its entries are no properties: they were dropped without a word.
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers) || headers instanceof Map)
    throw new InvalidArgumentError(
      `headers must be an object of strings, got ${headers instanceof Map ? 'a Map' : typeof headers}`,
    )
  let own = 0
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string')
      throw new InvalidArgumentError(`header ${JSON.stringify(name)} must be a string, got ${typeof value}`)
    if (name !== DEAD_LETTER_SOURCE_HEADER && name !== DEAD_LETTER_DELIVERIES_HEADER) own++
  }
  if (own > PRODUCED_HEADERS_MAX)
    throw new InvalidArgumentError(
      `the message has ${own} headers; the limit is ${PRODUCED_HEADERS_MAX} (besides ${DEAD_LETTER_SOURCE_HEADER} and ${DEAD_LETTER_DELIVERIES_HEADER}, which its copy to a dead-letter queue gets)`,
    )
  const delayMs = message.delayMs ?? 0
  if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > MESSAGE_DELAY_MS_MAX) {
    throw new InvalidArgumentError(
      `delayMs must be an integer from 0 to ${MESSAGE_DELAY_MS_MAX} (7 days), got ${String(message.delayMs)}`,
    )
  }
  return {
    body,
    weight,
    headers: { ...headers },
    key: message.key ?? '',
    delayMs,
    dedupKey: message.dedupKey ?? '',
  }
}

/**
 * `attempt` with `unanswered` called when it fails without an answer that says it stored
 * nothing: UNAVAILABLE (a lost reply, a timeout, a proposal dropped after it was made) but for
 * a call never sent (its connection refused, or none to send it on). Any other error is the broker's refusal.
 */
function noteUnanswered<T>(unanswered: () => void, attempt: Promise<T>): Promise<T> {
  return attempt.catch((error: unknown) => {
    if (mayHaveActed(error)) unanswered()
    throw error
  })
}

/**
 * The failure of a batch an attempt of which went out and was not answered: it may have been
 * stored, whatever the last attempt said (a limit, a closed client), and says so.
 */
function outcomeUnknown(error: unknown): SendOutcomeUnknownError {
  if (error instanceof SendOutcomeUnknownError) return error
  const message = error instanceof Error ? error.message : String(error)
  return new SendOutcomeUnknownError(
    `${message}; the batch was sent and an attempt went unanswered, so it may have been stored: sending it again may store it twice (a dedupKey makes a resend safe)`,
    error instanceof MqError ? error.facts : {},
    { cause: error },
  )
}
