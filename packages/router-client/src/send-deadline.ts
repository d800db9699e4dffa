import { TIMER_MS_MAX } from './option-checks'

const NOTHING = () => {}

/**
 * One send's delivery timeout (the producer's `sendTimeoutMs`, from the send() call). Where the
 * send waits decides what its expiry must undo (leave the waiting list, give its buffer room
 * back, leave its lane): each stage says so with `waiting`. Once the send's batch is sent
 * (`stop`), or the send settled, the deadline no longer applies: a batch in flight ends with
 * the router's answer (its own deadline), and its messages with it. Made by SendDeadlines.
 */
export class SendDeadline {
  /** When it expires (performance.now() ms). */
  readonly dueMs: number
  #expire: () => void
  #stopped: () => void
  #undo: (() => void) | undefined
  #expired = false
  #done = false

  constructor(dueMs: number, expire: () => void, stopped: () => void) {
    this.dueMs = dueMs
    this.#expire = expire
    this.#stopped = stopped
  }

  /** The send passed the deadline (it was rejected, and its stage undone). */
  get expired(): boolean {
    return this.#expired
  }

  /** Stopped, or expired: nothing more to do for it. */
  get done(): boolean {
    return this.#done
  }

  /** The send waits at a new stage: `undo` takes it out of there should the deadline pass. */
  waiting(undo: () => void): void {
    if (!this.#done) this.#undo = undo
  }

  /** The send's batch was sent, or the send settled: the deadline no longer applies. */
  stop(): void {
    if (this.#done) return
    this.#done = true
    this.#undo = undefined
    const stopped = this.#stopped
    this.#release()
    stopped()
  }

  /** Lets go of the send (its promise's callbacks): the FIFO may hold this a while longer. */
  #release(): void {
    this.#expire = NOTHING
    this.#stopped = NOTHING
  }

  /** The deadline passed (SendDeadlines): undoes the stage, then rejects the send. */
  fire(): void {
    if (this.#done) return
    this.#done = true
    this.#expired = true
    const undo = this.#undo
    const expire = this.#expire
    const stopped = this.#stopped
    this.#undo = undefined
    this.#release()
    stopped()
    undo?.()
    expire()
  }
}

/**
 * The delivery timeouts of one producer's sends, on one timer: every send gets the same
 * timeout from its call, so deadlines come due in the order the sends were made, and a FIFO
 * with a timer for its oldest live entry does (a timer per send cost 2–7 µs of a message's
 * ~5 µs of client CPU). Stopped entries are dropped when they reach the head; with no live
 * deadline left the timer is cleared and the FIFO emptied, so it holds no process open.
 */
export class SendDeadlines {
  readonly #ms: number
  readonly #queue: SendDeadline[] = []
  #head = 0
  #live = 0
  #timer: ReturnType<typeof setTimeout> | undefined
  readonly #onStopped = () => {
    if (--this.#live > 0) return
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#queue.length = 0
    this.#head = 0
  }

  /** `ms`: the timeout, Infinity for none (at most TIMER_MS_MAX otherwise). */
  constructor(ms: number) {
    if (ms !== Number.POSITIVE_INFINITY && !(ms >= 0 && ms <= TIMER_MS_MAX))
      throw new RangeError(`a send deadline must be from 0 to ${TIMER_MS_MAX} ms, or Infinity`)
    this.#ms = ms
  }

  /** A deadline for a send made now; `expire` rejects the send. */
  start(expire: () => void): SendDeadline {
    if (this.#ms === Number.POSITIVE_INFINITY)
      return new SendDeadline(Number.POSITIVE_INFINITY, expire, () => {})
    const deadline = new SendDeadline(performance.now() + this.#ms, expire, this.#onStopped)
    this.#dropDone()
    this.#queue.push(deadline)
    this.#live++
    if (this.#timer === undefined) this.#arm()
    return deadline
  }

  /** Live deadlines (not stopped nor expired). */
  get live(): number {
    return this.#live
  }

  /**
   * Passes the stopped deadlines at the head (sends leave roughly in call order: batches go in
   * order), and drops those passed once they are half the FIFO: in a steady flow it holds
   * about the sends under way, not every send since the timer last fired (200,000 of them kept
   * the sends' promises alive: GC took 42 % of a producing client's CPU).
   */
  #dropDone(): void {
    while (this.#head < this.#queue.length && (this.#queue[this.#head] as SendDeadline).done) this.#head++
    if (this.#head > 1024 && this.#head * 2 > this.#queue.length) {
      this.#queue.splice(0, this.#head)
      this.#head = 0
    }
  }

  #arm(): void {
    this.#dropDone()
    const next = this.#queue[this.#head]
    if (!next) return
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, Math.ceil(next.dueMs - performance.now())))
  }

  #fire(): void {
    this.#timer = undefined
    const now = performance.now()
    for (let d = this.#queue[this.#head]; d && (d.done || d.dueMs <= now); d = this.#queue[this.#head]) {
      this.#head++
      d.fire()
    }
    // The last expiry may have emptied it (#onStopped), or a send made meanwhile armed it.
    if (this.#timer === undefined && this.#live > 0) this.#arm()
  }
}
