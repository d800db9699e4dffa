import { randomUUID } from 'node:crypto'
import { credentials, Metadata, type ServiceError } from '@grpc/grpc-js'
import {
  fromGrpcError,
  LeaseOutcome,
  type LeaseResponse,
  type LeaseResult,
  type LeaseResultsResponse,
  type MqError,
  QueueClient,
  type QueueRoute,
} from '@mq/protocol'
import type { KeylessPartitioning, MqClient } from '@mq/router-client'
import type { History, LeasedRecord, Outcome, SettleResult } from './history'
import type { Prng } from './prng'

/**
 * Client workers that record every operation into a History: producers through the SDK,
 * consumers through the raw Queue service, so that the history holds each lease's id and the
 * deadline the server returned (the SDK's Delivery does not expose the deadline).
 */

const decoder = new TextDecoder()

/**
 * Error codes that say the request had no effect (the server refused it; the SDK reports a
 * send that may have been stored as SendOutcomeUnknownError, UNAVAILABLE); any other failure
 * is of unknown outcome. (Until 2026-12-06 a limit, a permission or a sequence gap counted as
 * unknown: a message so refused and then delivered passed unnoticed.)
 */
const DEFINITE_FAILURES = new Set([
  'INVALID_ARGUMENT',
  'QUEUE_NOT_FOUND',
  'NOT_LEADER',
  'STALE_ROUTE',
  'LIMIT_EXCEEDED',
  'PERMISSION_DENIED',
  'SEQUENCE_GAP',
])

function errorCode(error: unknown): string {
  return (error as Partial<MqError>)?.code ?? (error instanceof Error ? error.name : String(error))
}

function outcomeOf(error: unknown): Outcome {
  return DEFINITE_FAILURES.has(errorCode(error)) ? 'fail' : 'info'
}

/**
 * A failed send's outcome: the SDK tells one that may have been stored (SendOutcomeUnknownError,
 * `outcomeUnknown`) from an UNAVAILABLE one that stored nothing (SendTimeoutError: it left the
 * buffer unsent; a route it could not read; no attempt that went out unanswered): that one
 * failed, and is not refused (checker.ts). (Until an audit any UNAVAILABLE counted as unknown:
 * a message the SDK said it never stored, then delivered, passed unnoticed.)
 */
function sendOutcomeOf(error: unknown): Outcome {
  if (errorCode(error) === 'UNAVAILABLE' && (error as { outcomeUnknown?: unknown })?.outcomeUnknown !== true)
    return 'fail'
  return outcomeOf(error)
}

/** What the workers share: the history, a stop signal, and live progress for the drain. */
export class Workload {
  readonly history: History
  readonly queue: string
  readonly #enqueued = new Set<string>()
  /**
   * Bodies that must be acked: those enqueued ok, and those delivered whatever their enqueue
   * answered (stored). (Until an audit only ok enqueues counted: a message of unknown enqueue
   * outcome lost after its delivery, nacked or expired and never handed out again, passed as
   * unacked 0, the drain's stats reading an empty queue.)
   */
  readonly #stored = new Set<string>()
  readonly #acked = new Set<string>()
  /**
   * Bodies in #acked by acks of unknown outcome only: the highest delivery count they were
   * for. A later delivery shows that none applied (an ack of a lease that ended is answered
   * `expired`, deleting nothing), so the body must be acked again. (Until an audit it stayed
   * acked: a message redelivered after such an ack and then lost passed as unacked 0.)
   */
  readonly #ackedUnknown = new Map<string, number>()
  /** Per body, the highest delivery count seen. */
  readonly #deliveryCount = new Map<string, number>()
  /** Bodies in #stored and not in #acked, kept as they change (the drain polls it). */
  #unackedCount = 0
  producing = true
  consuming = true
  /** While draining, consumers ack everything (no nacks, no abandoned leases). */
  draining = false
  /**
   * Producers wait while this many enqueued messages are not acked yet (flow control):
   * faults slow consumers more than producers, and an unbounded backlog made the final drain
   * of a long run take minutes (631,618 messages, 4 minutes, in a 6-minute run).
   */
  readonly backlogMax: number

  constructor(history: History, queue: string, backlogMax = 50_000) {
    this.history = history
    this.queue = queue
    this.backlogMax = backlogMax
  }

  /** Bodies whose enqueue returned ok. */
  get enqueued(): ReadonlySet<string> {
    return this.#enqueued
  }

  /** A body's enqueue returned ok. */
  noteEnqueued(body: string): void {
    this.#enqueued.add(body)
    this.#noteStored(body)
  }

  /**
   * A body was delivered (`deliveryCount`: the server's count): it is stored whatever its
   * enqueue answered, so it must be acked too, again if only acks of earlier deliveries of
   * unknown outcome acked it.
   */
  noteDelivered(body: string, deliveryCount = 1): void {
    this.#noteStored(body)
    this.#deliveryCount.set(body, Math.max(this.#deliveryCount.get(body) ?? 0, deliveryCount))
    const unknownOf = this.#ackedUnknown.get(body)
    if (unknownOf !== undefined && deliveryCount > unknownOf) {
      this.#ackedUnknown.delete(body)
      this.#acked.delete(body)
      if (this.#stored.has(body)) this.#unackedCount++
    }
  }

  #noteStored(body: string): void {
    if (this.#stored.has(body)) return
    this.#stored.add(body)
    if (!this.#acked.has(body)) this.#unackedCount++
  }

  /**
   * A body was acked ok, or acked with an unknown outcome (`unknownOf`: the delivery count of
   * the lease it acked); an ack may come before its enqueue's answer.
   */
  noteAcked(body: string, unknownOf?: number): void {
    if (unknownOf === undefined) this.#ackedUnknown.delete(body)
    else {
      // A later delivery already showed that this ack did not apply.
      if ((this.#deliveryCount.get(body) ?? 0) > unknownOf) return
      if (!this.#acked.has(body) || this.#ackedUnknown.has(body))
        this.#ackedUnknown.set(body, Math.max(this.#ackedUnknown.get(body) ?? 0, unknownOf))
    }
    if (this.#acked.has(body)) return
    this.#acked.add(body)
    if (this.#stored.has(body)) this.#unackedCount--
  }

  /** How many ok-enqueued or delivered bodies are not acked yet. */
  get unackedCount(): number {
    return this.#unackedCount
  }

  /** Ok-enqueued or delivered bodies not yet acked. */
  unacked(): string[] {
    return [...this.#stored].filter((b) => !this.#acked.has(b))
  }
}

export interface ProducerWorkerOptions {
  readonly worker: string
  /** Sends in flight at once (each waits for its answer before the next). */
  readonly concurrency: number
  /** Sends of this worker, at most. */
  readonly opsMax: number
  /** How keyless sends pick partitions (default the SDK's, sticky). */
  readonly keyless?: KeylessPartitioning
  /**
   * Send every message with the worker's name as its key, in one-message batches: the
   * worker's `concurrency` sends then fly to one partition as that many batches in flight,
   * which puts the SDK's idempotent pipelining (order kept across retries) under the faults.
   */
  readonly pipelined?: boolean
  /**
   * With `pipelined`: send under this many keys in turn (`<worker>-k<n>`) instead of one, so
   * that a queue with ordered keys, which hands out one message per key at a time, keeps up.
   */
  readonly keys?: number
}

/** Sends unique bodies `<worker>-<seq>` through an SDK producer until `producing` turns false. */
export async function runProducer(
  client: MqClient,
  load: Workload,
  prng: Prng,
  options: ProducerWorkerOptions,
): Promise<void> {
  const producer = client.producer(load.queue, {
    ...(options.keyless ? { keyless: options.keyless } : {}),
    ...(options.pipelined ? { batchMax: 1 } : {}),
  })
  const keyOf = (sendNo: number): string | undefined =>
    !options.pipelined
      ? undefined
      : options.keys === undefined
        ? options.worker
        : `${options.worker}-k${sendNo % options.keys}`
  let seq = 0
  const lane = async (): Promise<void> => {
    while (load.producing && seq < options.opsMax) {
      if (load.unackedCount >= load.backlogMax) {
        await new Promise((r) => setTimeout(r, 50))
        continue
      }
      const sendNo = seq++
      const body = `${options.worker}-${sendNo}`
      const weight = prng.int(1, 3)
      const key = keyOf(sendNo)
      const keyed = key === undefined ? {} : { key }
      const startMs = Date.now()
      try {
        const r = await producer.send({ body, weight, ...keyed })
        load.history.add({
          kind: 'enqueue',
          worker: options.worker,
          body,
          startMs,
          endMs: Date.now(),
          outcome: 'ok',
          partition: r.partition,
          id: r.id,
          sendNo,
          ...keyed,
        })
        load.noteEnqueued(body)
      } catch (error) {
        load.history.add({
          kind: 'enqueue',
          worker: options.worker,
          body,
          startMs,
          endMs: Date.now(),
          outcome: sendOutcomeOf(error),
          error: errorCode(error),
          sendNo,
          ...keyed,
        })
      }
    }
  }
  await Promise.all(Array.from({ length: options.concurrency }, lane))
  await producer.close()
}

export interface ConsumerWorkerOptions {
  readonly worker: string
  /** Messages per lease call. */
  readonly leaseMax: number
  /** The visibility timeout asked for. */
  readonly visibilityMs: number
  /** Long poll of one lease call. */
  readonly waitMs: number
  /** One call's deadline beyond its long poll. */
  readonly attemptMs: number
  /** Share of leased messages nacked, and left to expire, outside the drain. */
  readonly nackRatio: number
  readonly abandonRatio: number
  /** A batch is "processed" for a random 0..holdMsMax before it is settled (not while draining). */
  readonly holdMsMax: number
  /** Lease calls per partition, at most. */
  readonly opsMax: number
  /**
   * Share of lease rounds whose acks wait for the partition's next lease, which carries them
   * (`ack_lease_ids`, as the SDK's consumer sends a busy partition's acks); 0 when unset.
   */
  readonly carryAcksRatio?: number
}

/** Where each partition's leader is, as far as this worker knows. */
class RawRouter {
  readonly #client: MqClient
  readonly #queue: string
  readonly #stubs = new Map<string, QueueClient>()
  #route: QueueRoute | undefined
  readonly #leaders = new Map<number, string>()

  constructor(client: MqClient, queue: string) {
    this.#client = client
    this.#queue = queue
  }

  async refresh(): Promise<void> {
    this.#route = await this.#client.admin.describeQueue(this.#queue)
    for (const p of this.#route.partitions)
      if (p.leaderAddress) this.#leaders.set(p.partition, p.leaderAddress)
  }

  async partitions(): Promise<number[]> {
    if (!this.#route) await this.refresh()
    return this.known()
  }

  /** The partitions of the route last fetched (more once partitions were added to the queue). */
  known(): number[] {
    return (this.#route?.partitions ?? []).map((p) => p.partition)
  }

  target(partition: number) {
    return { queue: this.#queue, partition, routeEpoch: this.#route?.routeEpoch ?? 0 }
  }

  stub(partition: number): QueueClient | undefined {
    const address = this.#leaders.get(partition)
    if (!address) return undefined
    let s = this.#stubs.get(address)
    if (!s) {
      s = new QueueClient(address, credentials.createInsecure())
      this.#stubs.set(address, s)
    }
    return s
  }

  /** Follows a NOT_LEADER hint; otherwise forgets the leader so that the next call refreshes. */
  onError(partition: number, error: MqError): void {
    const hint = error.facts?.leaderAddress
    if (error.code === 'NOT_LEADER' && hint) this.#leaders.set(partition, hint)
    else this.#leaders.delete(partition)
  }

  close(): void {
    for (const s of this.#stubs.values()) s.close()
    this.#stubs.clear()
  }
}

function call<Req, Res>(
  stub: QueueClient,
  method: (
    req: Req,
    md: Metadata,
    opts: { deadline: number },
    cb: (e: ServiceError | null, r: Res) => void,
  ) => unknown,
  request: Req,
  deadlineMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    method.call(stub, request, new Metadata(), { deadline: Date.now() + deadlineMs }, (e, r) =>
      e ? reject(fromGrpcError(e)) : resolve(r),
    )
  })
}

const RESULT: Record<number, SettleResult> = {
  [LeaseOutcome.LEASE_OUTCOME_OK]: 'ok',
  [LeaseOutcome.LEASE_OUTCOME_EXPIRED]: 'expired',
  [LeaseOutcome.LEASE_OUTCOME_UNKNOWN]: 'unknown',
}

/**
 * Leases from every partition of the queue (one loop per partition) until `consuming` turns
 * false; acks most messages, nacks some, lets some expire (none while draining).
 */
export async function runConsumer(
  client: MqClient,
  load: Workload,
  prng: Prng,
  options: ConsumerWorkerOptions,
): Promise<void> {
  const router = new RawRouter(client, load.queue)
  const backoffMs = (failures: number) => Math.min(500, 20 * 2 ** Math.min(failures, 5))
  const pauseMs = (ms: number) => new Promise((r) => setTimeout(r, ms))

  /**
   * Fetches the route again and starts a lease loop for each partition it adds: whichever call
   * refreshes (a lease, or an ack after STALE_ROUTE), the new epoch it sends from then on no
   * longer earns the STALE_ROUTE that would make a lease loop refresh. (Only the lease loops
   * started new loops: an ack that refreshed after partitions were added, while the leases had
   * nothing to fail on (a paused queue), left the new partitions unconsumed for good.)
   */
  const refresh = async (): Promise<void> => {
    await router.refresh()
    follow()
  }
  /**
   * Records a settle op answered `results` (by lease id), its effect dated from `effectMs`;
   * `indeterminate`: an earlier attempt may have applied it (history.ts, SettleOp.results).
   */
  const settled = (
    kind: 'ack' | 'nack',
    partition: number,
    leases: LeasedRecord[],
    effectMs: number,
    answered: readonly LeaseResult[],
    indeterminate: boolean,
  ): void => {
    const results: Record<string, SettleResult> = {}
    for (const r of answered) results[r.leaseId] = RESULT[r.outcome] ?? 'unknown'
    load.history.add({
      kind,
      worker: options.worker,
      partition,
      startMs: effectMs,
      endMs: Date.now(),
      leaseIds: leases.map((l) => l.leaseId),
      results,
      ...(indeterminate ? { outcome: 'info', error: 'RETRIED' } : { outcome: 'ok' }),
    })
    if (kind === 'ack') {
      for (const l of leases) {
        const r = results[l.leaseId]
        // An ack answered "expired" did not apply: the drain waits for the message again.
        if (r === 'ok') load.noteAcked(l.body)
        else if (indeterminate && r !== 'expired') load.noteAcked(l.body, l.deliveryCount)
      }
    }
  }
  /**
   * Acks or nacks `leases` (one partition), retrying a definite refusal; records one op.
   * `mayHaveAppliedAtMs`: a lease that carried these acks and failed may have applied them
   * (sent then).
   */
  const settle = async (
    kind: 'ack' | 'nack',
    partition: number,
    leases: LeasedRecord[],
    mayHaveAppliedAtMs?: number,
  ) => {
    if (leases.length === 0) return
    const leaseIds = leases.map((l) => l.leaseId)
    const startMs = mayHaveAppliedAtMs ?? Date.now()
    /**
     * When the first attempt that may have applied went out (answered, or of unknown outcome):
     * the op's start, from which the checker takes the settle to have had its effect (a nack
     * ends its lease's hold there, an ack lets the key's next message go). Attempts not sent, or
     * refused, did nothing: dated from the first of them, a nack refused by a former leader
     * ended the hold a route read and more early, and an overlap meanwhile went unseen (an audit).
     */
    let effectMs: number | undefined = mayHaveAppliedAtMs
    let indeterminate = mayHaveAppliedAtMs !== undefined
    let lastError: unknown
    for (let attempt = 0; attempt < 5; attempt++) {
      const stub = router.stub(partition)
      /** This attempt's call went out: only then may its failure have left an effect. */
      let sent = false
      let sentMs = 0
      try {
        if (!stub) await refresh()
        const s = router.stub(partition)
        if (!s) throw new Error(`no leader known for partition ${partition}`)
        const request = { target: router.target(partition), leaseIds, delayMs: 0, release: false }
        sent = true
        sentMs = Date.now()
        const response: LeaseResultsResponse =
          kind === 'ack'
            ? await call(s, s.ack, request, options.attemptMs)
            : await call(s, s.nack, request, options.attemptMs)
        effectMs ??= sentMs
        // After an attempt of unknown outcome, "unknown lease" may mean that attempt applied;
        // "ok" and "expired" are still definite (history.ts, SettleOp.results).
        settled(kind, partition, leases, effectMs, response.results, indeterminate)
        return
      } catch (error) {
        lastError = error
        // A route that could not be read, or no leader to ask, sent nothing: no effect.
        if (sent && outcomeOf(error) === 'info') {
          indeterminate = true
          effectMs ??= sentMs
        }
        router.onError(partition, error as MqError)
        await pauseMs(backoffMs(attempt))
      }
    }
    load.history.add({
      kind,
      worker: options.worker,
      partition,
      startMs: effectMs ?? startMs,
      endMs: Date.now(),
      leaseIds,
      outcome: indeterminate ? 'info' : 'fail',
      error: errorCode(lastError),
    })
    if (kind === 'ack' && indeterminate) for (const l of leases) load.noteAcked(l.body, l.deliveryCount)
  }

  /** One lease loop per partition, started as routes show partitions (added to the queue, too). */
  const loops = new Map<number, Promise<void>>()
  const follow = () => {
    for (const p of router.known()) if (!loops.has(p) && load.consuming) loops.set(p, loop(p))
  }
  const loop = async (partition: number): Promise<void> => {
    let failures = 0
    // Kept while leases fail (the answer of one may have been lost), as the SDK does: the
    // broker answers again the leases it made under it that are still held.
    let attempt = randomUUID()
    /** When the first call under `attempt` started, once one failed. */
    let attemptStartMs: number | undefined
    /** Acks kept for this partition's next lease, which carries them (carryAcksRatio). */
    let carried: LeasedRecord[] = []
    for (let n = 0; n < options.opsMax && load.consuming; n++) {
      let startMs = Date.now()
      let response: LeaseResponse
      /** This call went out: only then may it have made leases under `attempt`. */
      let sent = false
      const carrying = carried
      carried = []
      try {
        if (!router.stub(partition)) await refresh()
        const s = router.stub(partition)
        if (!s) throw new Error(`no leader known for partition ${partition}`)
        // Dated from when the call goes out, not from before the route read it waited for (up
        // to the client's deadline while the meta group is down): the checker takes a lease's
        // start as the earliest its leases can date from, and an early one hid violations
        // (fifo, the clients'-clock overlap, delivered after ack; an audit).
        startMs = Date.now()
        sent = true
        response = await call(
          s,
          s.lease,
          {
            target: router.target(partition),
            consumerId: options.worker,
            max: options.leaseMax,
            visibilityMs: options.visibilityMs,
            waitMs: options.waitMs,
            attempt,
            attemptRepeat: attemptStartMs !== undefined,
            ackLeaseIds: carrying.map((l) => l.leaseId),
          },
          options.attemptMs + options.waitMs,
        )
      } catch (error) {
        // A route that could not be read, or no leader to ask, sent nothing: no lease dates from
        // it; nor from a call refused (NOT_LEADER, STALE_ROUTE: it leased nothing, as the SDK's
        // consumer counts it), which dated the next answer's leases from before it (an audit).
        if (sent && outcomeOf(error) === 'info') attemptStartMs ??= startMs
        load.history.add({
          kind: 'lease',
          worker: options.worker,
          partition,
          startMs,
          endMs: Date.now(),
          outcome: outcomeOf(error),
          messages: [],
          error: errorCode(error),
        })
        router.onError(partition, error as MqError)
        // Its acks go on their own; the call may have applied them (any error but a refusal).
        await settle('ack', partition, carrying, sent && outcomeOf(error) === 'info' ? startMs : undefined)
        await pauseMs(backoffMs(failures++))
        continue
      }
      failures = 0
      if (carrying.length > 0) {
        // Applied before the lease, answered with it; none answered: sent on their own.
        if (response.ackResults.length > 0)
          settled('ack', partition, carrying, startMs, response.ackResults, false)
        else await settle('ack', partition, carrying)
      }
      const since = attemptStartMs
      attempt = randomUUID()
      attemptStartMs = undefined
      const messages: LeasedRecord[] = response.messages.map((m) => ({
        body: decoder.decode(m.body),
        partition,
        id: m.id,
        leaseId: m.leaseId,
        deliveryCount: m.deliveryCount,
        weight: m.weight,
        deadlineMs: m.deadlineMs,
      }))
      for (const m of messages) load.noteDelivered(m.body, m.deliveryCount)
      load.history.add({
        kind: 'lease',
        worker: options.worker,
        partition,
        startMs,
        endMs: Date.now(),
        outcome: 'ok',
        messages,
        visibilityMs: options.visibilityMs,
        ...(since === undefined ? {} : { attemptStartMs: since }),
      })
      const acks: LeasedRecord[] = []
      const nacks: LeasedRecord[] = []
      for (const m of messages) {
        const r = prng.next()
        if (load.draining || r >= options.nackRatio + options.abandonRatio) acks.push(m)
        else if (r < options.nackRatio) nacks.push(m)
        // else: abandoned, its lease expires and the message is delivered again.
      }
      if (!load.draining && messages.length > 0) await pauseMs(prng.int(0, options.holdMsMax))
      const carry = acks.length > 0 && prng.next() < (options.carryAcksRatio ?? 0)
      if (carry) carried = acks
      await Promise.all([
        carry ? undefined : settle('ack', partition, acks),
        settle('nack', partition, nacks),
      ])
    }
    // The loop ended with acks kept for a lease that will not come.
    await settle('ack', partition, carried)
  }

  try {
    await router.partitions()
    follow()
    // Loops started meanwhile (partitions added) are waited for too.
    for (let seen = 0; seen < loops.size; ) {
      seen = loops.size
      await Promise.all(loops.values())
    }
  } finally {
    router.close()
  }
}
