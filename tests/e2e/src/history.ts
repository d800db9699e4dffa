/**
 * The history of a fault run: every client operation with its start and end time (ms, the
 * test process's wall clock, which on one host is the servers' clock too) and its result.
 *
 * Results follow Jepsen's three kinds: `ok` (the cluster answered and the effect happened),
 * `fail` (the cluster answered that the effect did not happen), `info` (no answer that says:
 * a timeout, a transport failure; the effect may or may not have happened).
 */

/** The kinds of a result. */
export const Outcome = { Ok: 'ok', Fail: 'fail', Info: 'info' } as const
export type Outcome = (typeof Outcome)[keyof typeof Outcome]

/** An enqueue of one message; `body` is unique in the run (`<worker>-<sequence>`). */
export interface EnqueueOp {
  readonly kind: 'enqueue'
  readonly worker: string
  readonly body: string
  readonly startMs: number
  readonly endMs: number
  readonly outcome: Outcome
  /** On ok: where the message was stored. */
  readonly partition?: number
  readonly id?: number
  /** On fail / info: the error code. */
  readonly error?: string
  /** The worker's send number: its sends called producer.send in this order. */
  readonly sendNo?: number
  /** The message's key, when it was sent with one. */
  readonly key?: string
}

/** One message handed out by a lease call. */
export interface LeasedRecord {
  readonly body: string
  readonly partition: number
  readonly id: number
  readonly leaseId: string
  readonly deliveryCount: number
  readonly weight: number
  /** Leader time when the lease ends unless extended (the server's `deadline_ms`). */
  readonly deadlineMs: number
}

/** A lease call on one partition; only ok leases hand out messages. */
export interface LeaseOp {
  readonly kind: 'lease'
  readonly worker: string
  readonly partition: number
  readonly startMs: number
  readonly endMs: number
  readonly outcome: Outcome
  readonly messages: readonly LeasedRecord[]
  /**
   * The visibility the lease call asked for: each message's deadline is the leader's time when
   * it granted the lease plus this (the checker's grant times).
   */
  readonly visibilityMs?: number
  /**
   * When the first call under this call's lease attempt started, if an earlier one failed after
   * it went out (one that could not be sent, or was refused, made nothing): the broker answers a
   * repeated attempt with the leases it made, so they may date from then.
   */
  readonly attemptStartMs?: number
  readonly error?: string
}

/** Per lease id: `ok`, `expired`, `unknown` (the server's outcome for that lease). */
export type SettleResult = 'ok' | 'expired' | 'unknown'

/** An ack or nack of some leases of one partition. */
export interface SettleOp {
  readonly kind: 'ack' | 'nack'
  readonly worker: string
  readonly partition: number
  /** When its first attempt that may have applied went out (else its first attempt's start). */
  readonly startMs: number
  readonly endMs: number
  readonly outcome: Outcome
  readonly leaseIds: readonly string[]
  /**
   * Each lease's result: on ok, and on info after a retry the server answered (error
   * `RETRIED`: an earlier attempt's outcome is unknown). A retry's `ok` is still definite: this
   * attempt settled the lease. So is an ack's `expired`: the lease had ended for good (its
   * deadline passed, or the message was delivered again), and no attempt deleted the message,
   * or the answer would have been `unknown`. A nack's `expired` is not: a nack an earlier
   * attempt applied leaves the message ready, which a retry is told is `expired`.
   */
  readonly results?: Readonly<Record<string, SettleResult>>
  readonly error?: string
}

/**
 * A fault the nemesis injected or healed, or a scaling the scaler started (not checked;
 * printed beside anomalies).
 */
export interface FaultOp {
  readonly kind: 'fault'
  /** `nemesis` (with `--overlap`, also `nemesis2`, `nemesis3`) or `scaler`. */
  readonly worker: `nemesis${'' | '2' | '3'}` | 'scaler'
  readonly startMs: number
  readonly endMs: number
  readonly description: string
}

/**
 * One attempt of the client's that failed or took ATTEMPT_SLOW_MS or more (the SDK's
 * `onAttempt`), kept to explain a stall: which node each try went to and what came back.
 * Not checked.
 */
export interface AttemptOp {
  readonly kind: 'attempt'
  readonly worker: 'client'
  /** A partition's data call, or a Meta call. */
  readonly call: 'partition' | 'meta'
  readonly partition?: number
  readonly address: string
  readonly servedBy?: string
  readonly startMs: number
  readonly endMs: number
  readonly error?: string
}

/** Attempts at least this slow are kept (failed ones always). */
export const ATTEMPT_SLOW_MS = 500

export type Op = EnqueueOp | LeaseOp | SettleOp | FaultOp | AttemptOp

/**
 * An append-only list of operations, bounded by `opsMax` (an append beyond it throws: a run
 * that big is a harness bug, not something to trim silently).
 */
export class History {
  readonly ops: Op[] = []
  readonly opsMax: number

  constructor(opsMax = 2_000_000) {
    this.opsMax = opsMax
  }

  add(op: Op): void {
    if (this.ops.length >= this.opsMax) throw new Error(`history is full (${this.opsMax} ops)`)
    this.ops.push(op)
  }
}
