import {
  InvalidArgumentError,
  LEASE_VISIBILITY_MS_MAX,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseResult,
  MESSAGE_DELAY_MS_MAX,
} from '@mq/protocol'
import type { Settlement } from './settle-batcher'

const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/**
 * Thrown by ack/nack/extend when the lease is no longer held (expired or already settled).
 * Not an MqError: its code, LEASE_LOST, is the SDK's own, not one of the wire's (ErrorCode),
 * which MqError's `code` is typed as.
 */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError'
  readonly code = 'LEASE_LOST'
  readonly retriable = false
}

/**
 * One leased message. Settle it exactly once with `ack()` (done: delete it), `nack()` (a
 * failed delivery: give it back, optionally after a delay) or `release()` (give it back
 * unprocessed, not counted); `extend()` keeps it longer. While it is held,
 * the consumer extends its lease automatically unless that was turned off.
 */
export class Delivery {
  readonly id: number
  readonly partition: number
  readonly body: Uint8Array
  readonly weight: number
  readonly headers: Readonly<Record<string, string>>
  readonly key: string
  /** 1 on the first delivery, then one more on each redelivery. */
  readonly deliveryCount: number
  readonly leaseId: string
  readonly enqueuedAtMs: number
  #settled = false
  readonly #settle: (d: Delivery, s: Settlement) => Promise<LeaseResult>

  constructor(
    partition: number,
    message: LeasedMessage,
    settle: (d: Delivery, s: Settlement) => Promise<LeaseResult>,
  ) {
    this.partition = partition
    this.id = message.id
    this.body = message.body
    this.weight = message.weight
    this.headers = message.headers
    this.key = message.key
    this.deliveryCount = message.deliveryCount
    this.leaseId = message.leaseId
    this.enqueuedAtMs = message.enqueuedAtMs
    this.#settle = settle
  }

  /** The body as UTF-8 text. */
  text(): string {
    return decoder.decode(this.body)
  }

  /** The body parsed as JSON. */
  json<T = unknown>(): T {
    return JSON.parse(this.text()) as T
  }

  get settled(): boolean {
    return this.#settled
  }

  /** Deletes the message. Throws LeaseLostError when the lease had expired or was settled. */
  ack(): Promise<void> {
    return this.#finish(ACK)
  }

  /**
   * Returns the message to its queue as a failed delivery: ready again after `delayMs`, or
   * (0) at once or after the queue's retry backoff; dead-lettered past its max deliveries.
   * Rejects with InvalidArgumentError unless `delayMs` is an integer from 0 to 7 days
   * (MESSAGE_DELAY_MS_MAX, the server's bound; the message stays unsettled).
   */
  nack(delayMs = 0): Promise<void> {
    if (!Number.isInteger(delayMs) || delayMs < 0 || delayMs > MESSAGE_DELAY_MS_MAX)
      return Promise.reject(
        badMs(`nack delayMs must be an integer from 0 to ${MESSAGE_DELAY_MS_MAX} (7 days)`, delayMs),
      )
    return this.#finish(delayMs === 0 ? NACK_NOW : { kind: 'nack', delayMs })
  }

  /**
   * Gives the message back unprocessed (the application never looked at it): ready again at
   * once at the head of its weight, the delivery counted neither towards the queue's max
   * deliveries nor for its retry backoff. A cluster below format level 16 takes it as nack(0).
   */
  release(): Promise<void> {
    return this.#finish(RELEASE)
  }

  /**
   * Keeps the message leased for `ms` more from now. Rejects with InvalidArgumentError unless
   * `ms` is an integer from 1 to 12 h (LEASE_VISIBILITY_MS_MAX, the server's bound).
   */
  async extend(ms: number): Promise<void> {
    if (!Number.isInteger(ms) || ms < 1 || ms > LEASE_VISIBILITY_MS_MAX)
      throw badMs(`extend ms must be an integer from 1 to ${LEASE_VISIBILITY_MS_MAX} (12 h)`, ms)
    if (this.#settled) throw new LeaseLostError(`message ${this.partition}/${this.id} is already settled`)
    check(await this.#settle(this, { kind: 'extend', extendMs: ms }), this)
  }

  // Not async, and one `then`: an ack is made per message, and async frames and their promises
  // were a quarter of a consuming client's allocations.
  /**
   * Settled from the call on (a second ack fails at once), and for good once answered (a
   * lease result: done, or the lease lost). A call that failed without an answer (the router
   * gave up on an unavailable partition; the server refused the request, as a delay past its
   * bound) leaves it unsettled, so that it can be settled again (until 2026-12-04 a refusal
   * left it settled: a later ack or nack failed "already settled", and consume() did not nack
   * it when the handler threw).
   */
  #finish(settlement: Settlement): Promise<void> {
    if (this.#settled) {
      return Promise.reject(new LeaseLostError(`message ${this.partition}/${this.id} is already settled`))
    }
    this.#settled = true
    return this.#settle(this, settlement).then(
      (result) => check(result, this),
      (error: unknown) => {
        this.#settled = false
        throw error
      },
    )
  }
}

const ACK: Settlement = Object.freeze({ kind: 'ack' })
const NACK_NOW: Settlement = Object.freeze({ kind: 'nack', delayMs: 0 })
const RELEASE: Settlement = Object.freeze({ kind: 'nack', delayMs: 0, release: true })

function badMs(problem: string, value: unknown): InvalidArgumentError {
  return new InvalidArgumentError(`${problem}, got ${String(value)}`)
}

function check(result: LeaseResult, d: Delivery): void {
  if (result.outcome === LeaseOutcome.LEASE_OUTCOME_OK) return
  const message = `message ${d.partition}/${d.id}`
  throw new LeaseLostError(
    result.outcome === LeaseOutcome.LEASE_OUTCOME_EXPIRED
      ? `the lease of ${message} expired; it will be (or was) delivered again`
      : `the lease of ${message} is unknown to the broker: the message is gone (acked through a later delivery, or purged) or the partition was recreated`,
  )
}
