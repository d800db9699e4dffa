import { isErrorCode, leaseHoldMs } from '@mq/protocol'
import type { EnqueueOp, LeasedRecord, Op, SettleOp } from './history'

/**
 * The checker: pure functions over a history (see history.ts). It knows nothing of the
 * cluster; it judges only what clients saw.
 *
 * Properties:
 * - **lost**: an enqueue that returned ok whose body no lease ever handed out. Meaningful only
 *   after a final drain with no faults.
 * - **unexpected**: a delivered body that no enqueue sent, or whose enqueue definitely failed
 *   (`fail`). An enqueue with unknown outcome (`info`) may or may not be delivered.
 * - **overlaps**: two deliveries of one message held at once. Delivery A holds the message
 *   from its grant until A.end: the lease deadline the server returned or, for a nack of A that
 *   may have taken effect (ok for its lease, or of unknown outcome), the start of that nack if
 *   earlier. An ack never ends the hold early: whether it deleted the message or not, no
 *   other consumer may get it before A's deadline (a server answers an ack of a lease that
 *   ended `expired`). B overlaps A when B was granted more than `clockToleranceMs` before
 *   A.end, comparing like clocks only: the group's clock is not the clients' (a new leader
 *   continues its predecessor's group clock, which its messages told it a transit late, and
 *   makes that up at 1 %; a fault run with `skewMs` runs the nodes' wall clocks apart). B's
 *   stamp, the leader's time when it stamped the lease (B's deadline minus the visibility
 *   asked for; the lease call's end when the history lacks the visibility), is compared with
 *   A's deadline, a leader's time too; a nack's start, the client's time, with when B's lease
 *   answer arrived, the client's time too and the latest B can have been granted. And by the
 *   clients' clock alone: B's answer arrived before A's consumer stopped counting on its lease
 *   (A's lease call start plus the visibility as the group clock may shorten it, protocol's
 *   `leaseHoldMs`: what the SDK counts) — a group clock that jumped forward (a new leader with
 *   its clock ahead, until 2026-12-03) agrees with itself and shows only here. The start of
 *   A's nack makes the check conservative: it flags only overlaps that really happened.
 * - **deliveredAfterAck**: a delivery of a message after an ack returned ok for one of its
 *   leases: one with a higher delivery count (the ack would have been told `expired` had the
 *   message been delivered again before it applied), or granted after the ack returned. The
 *   workloads never give a message back with `release` (which does not count a delivery).
 * - **storedTwice**: one body delivered under two message ids (stored twice), or under an
 *   id other than the one its enqueue returned.
 * - **leaseReused**: one lease id of a partition handed out by two lease calls.
 * - **fifo**: within one partition and weight, message x (smaller id, so enqueued first) and
 *   y: y's first delivery (delivery count 1) was received before the lease call that first
 *   delivered x had started (the first call under its lease attempt, when a repeat did). Messages whose first delivery the history did not see (a lease
 *   call of unknown outcome) are left out.
 * - **producerOrder**: one producer's messages stored in a partition out of the order it sent
 *   them: among its enqueues that returned ok (with a send number), one sent later got a
 *   smaller id in the same partition. The SDK's idempotent producer keeps several batches in
 *   flight per partition and promises their order even across retries.
 * - **keyOrder** (with `orderedKeys`): a key's message handed out before the message before it
 *   was acked. For each key, its messages known to be stored (enqueued ok, or delivered) in id
 *   order; every delivery of y must be received after the start of an ack of x, the one
 *   before it, that may have taken effect (ok for its lease, or of unknown outcome for the
 *   message's last delivery seen: a later delivery shows an earlier ack did not apply). A key's
 *   messages in two partitions are flagged too. With ordered keys, the fifo check leaves keyed
 *   messages out (one waits for its key's turn while later ones of other keys go ahead).
 * - **refused**: an enqueue that failed for good (a definite, non-retriable error, or one that
 *   is no error of the cluster's: a TypeError out of the SDK, whatever it stored). Every
 *   message the workloads send is valid, so no enqueue should ever be refused: a retry
 *   refused as out of order (fault runs 12002 and 13005) shows up here, stored or not. A
 *   send that failed UNAVAILABLE storing nothing (timed out unsent) is retriable, not refused.
 * - counted, allowed: redeliveries (deliveries of a body beyond its first), after a nack or an
 *   expired lease.
 */

export interface CheckOptions {
  /**
   * Slack for comparing a lease deadline (leader clock) with the client's clock. On one host
   * the clocks are the same; the slack covers ms rounding of timestamps. Default 50 ms.
   */
  readonly clockToleranceMs?: number
  /** The queue has ordered keys: check keyOrder, and FIFO among keyless messages only. */
  readonly orderedKeys?: boolean
}

export const DEFAULT_CLOCK_TOLERANCE_MS = 50

/** One message handed out to one consumer. */
export interface DeliveryRecord extends LeasedRecord {
  readonly worker: string
  /**
   * When the lease call that handed it out started (or the first call under its attempt: it
   * may have made the leases a repeat was answered), and ended.
   */
  readonly leaseStartMs: number
  readonly receivedMs: number
  /** When the leader granted it (see the module comment): at most `receivedMs`. */
  readonly grantedMs: number
  /**
   * The leader's time when it stamped the lease (its deadline minus the visibility asked for;
   * `receivedMs` when the history lacks the visibility): the group's clock, as deadlines are.
   */
  readonly stampedMs: number
  /**
   * How long from `leaseStartMs` the consumer may count on its lease, by its own clock
   * (protocol's leaseHoldMs of the visibility asked for); undefined when the history lacks it.
   */
  readonly holdMs?: number
  /** The ack/nack of this lease, when one was sent. */
  readonly settle?: SettleOp
}

export const AnomalyKind = {
  Lost: 'lost',
  Unexpected: 'unexpected',
  Overlap: 'overlap',
  DeliveredAfterAck: 'delivered-after-ack',
  StoredTwice: 'stored-twice',
  LeaseReused: 'lease-reused',
  Fifo: 'fifo',
  ProducerOrder: 'producer-order',
  KeyOrder: 'key-order',
  Refused: 'refused',
} as const
export type AnomalyKind = (typeof AnomalyKind)[keyof typeof AnomalyKind]

export interface Anomaly {
  readonly kind: AnomalyKind
  readonly body: string
  readonly detail: string
}

export interface CheckReport {
  readonly enqueues: { readonly ok: number; readonly fail: number; readonly info: number }
  /** Enqueues that returned ok (the ones that must not be lost). */
  readonly ackedEnqueues: number
  /** Messages handed out by lease calls, counting every redelivery. */
  readonly deliveries: number
  readonly distinctDelivered: number
  /** deliveries − distinct delivered bodies. */
  readonly redeliveries: number
  /** Deliveries whose lease an ack returned ok for. */
  readonly ackedDeliveries: number
  readonly lost: number
  readonly unexpected: number
  readonly overlaps: number
  readonly deliveredAfterAck: number
  readonly storedTwice: number
  /** One lease id (per partition) handed out by two lease calls. */
  readonly leaseReused: number
  /** First deliveries out of id order within one partition and weight. */
  readonly fifoViolations: number
  /** Messages stored out of their producer's send order within one partition. */
  readonly producerOrder: number
  /** Messages of an ordered key handed out before the one before them was acked. */
  readonly keyOrder: number
  /** Enqueues of valid messages that failed for good. */
  readonly refused: number
  readonly anomalies: readonly Anomaly[]
}

/** Where a lease id is unique: the server numbers leases per partition (`<id>.<delivery>`). */
function leaseKey(partition: number, leaseId: string): string {
  return `${partition}/${leaseId}`
}

/**
 * Every delivery in the history, each joined to the ack/nack of its lease: the first one
 * sent after the delivery was received (workers settle each delivery at most once).
 */
export function deliveries(ops: readonly Op[]): DeliveryRecord[] {
  const settles = new Map<string, SettleOp[]>()
  for (const op of ops) {
    if (op.kind !== 'ack' && op.kind !== 'nack') continue
    for (const leaseId of op.leaseIds) {
      const key = leaseKey(op.partition, leaseId)
      const list = settles.get(key)
      if (list) list.push(op)
      else settles.set(key, [op])
    }
  }
  const out: DeliveryRecord[] = []
  for (const op of ops) {
    if (op.kind !== 'lease' || op.outcome !== 'ok') continue
    for (const m of op.messages) {
      const settle = settles
        .get(leaseKey(m.partition, m.leaseId))
        ?.filter((s) => s.startMs >= op.endMs)
        .sort((a, b) => a.startMs - b.startMs)[0]
      const stampedMs = op.visibilityMs === undefined ? op.endMs : m.deadlineMs - op.visibilityMs
      out.push({
        ...m,
        worker: op.worker,
        leaseStartMs: op.attemptStartMs ?? op.startMs,
        receivedMs: op.endMs,
        grantedMs: Math.min(op.endMs, stampedMs),
        stampedMs,
        ...(op.visibilityMs === undefined ? {} : { holdMs: leaseHoldMs(op.visibilityMs) }),
        ...(settle ? { settle } : {}),
      })
    }
  }
  return out
}

/** The end of the window in which `d` holds its message (see the module comment). */
export function holdEndMs(d: DeliveryRecord): number {
  return Math.min(d.deadlineMs, nackStartMs(d) ?? Number.POSITIVE_INFINITY)
}

/** When a nack of `d` that may have taken effect started (the client's clock), if one did. */
function nackStartMs(d: DeliveryRecord): number | undefined {
  const s = d.settle
  if (!s || s.kind === 'ack' || s.outcome === 'fail') return undefined
  if (s.outcome === 'ok' && s.results?.[d.leaseId] !== 'ok') return undefined
  return s.startMs
}

/**
 * How `b` was granted while `a` held the message (see the module comment: like clocks only),
 * in words; undefined when it was not. `b` is taken to have been granted after `a`; with
 * `groupClockOnly` (the group's clock says so, the list's order does not), only that clock
 * judges.
 */
function overlap(
  b: DeliveryRecord,
  a: DeliveryRecord,
  toleranceMs: number,
  groupClockOnly = false,
): string | undefined {
  const nackMs = nackStartMs(a) ?? Number.POSITIVE_INFINITY
  const lease = `${a.worker}'s lease ${a.leaseId}`
  // By the group's clock: B stamped before A's deadline (and answered before A's nack began:
  // both the clients' clock, one process's, so without the slack; an audit).
  if (b.stampedMs + toleranceMs < a.deadlineMs && b.receivedMs < nackMs) {
    const endMs = holdEndMs(a)
    return `${b.worker} was granted lease ${b.leaseId} at ${b.stampedMs} (received ${b.receivedMs}), ${endMs - b.stampedMs} ms before ${lease} (granted ${a.grantedMs}) ended at ${endMs}`
  }
  // By the clients' clock: B answered while A's consumer could still count on its lease.
  if (a.holdMs === undefined || groupClockOnly) return undefined
  const countedMs = Math.min(a.leaseStartMs + a.holdMs, nackMs)
  if (b.receivedMs + toleranceMs >= a.leaseStartMs + a.holdMs || b.receivedMs >= nackMs) return undefined
  return `${b.worker} received lease ${b.leaseId} at ${b.receivedMs} (stamped ${b.stampedMs}), ${countedMs - b.receivedMs} ms before ${lease} (asked for at ${a.leaseStartMs}, stamped ${a.stampedMs}, deadline ${a.deadlineMs}) stopped counting at ${countedMs} by the clients' clock`
}

/** True when an ack of `d` returned ok for its lease (a retried one too: history.ts). */
function ackedOk(d: DeliveryRecord): boolean {
  return d.settle?.kind === 'ack' && d.settle.outcome !== 'fail' && d.settle.results?.[d.leaseId] === 'ok'
}

/** Checks `ops` (see the module comment); returns counts and every anomaly found. */
export function check(ops: readonly Op[], options: CheckOptions = {}): CheckReport {
  const toleranceMs = options.clockToleranceMs ?? DEFAULT_CLOCK_TOLERANCE_MS
  const enqueues = new Map<string, EnqueueOp>()
  const counts = { ok: 0, fail: 0, info: 0 }
  for (const op of ops) {
    if (op.kind !== 'enqueue') continue
    if (enqueues.has(op.body)) throw new Error(`body ${op.body} enqueued twice: bodies must be unique`)
    enqueues.set(op.body, op)
    counts[op.outcome]++
  }
  const all = deliveries(ops)
  const byBody = groupBy(all, (d) => d.body)
  const anomalies: Anomaly[] = []
  for (const [body, e] of enqueues) {
    // UNAVAILABLE: a send that stored nothing and may be sent again (workers.ts), not refused.
    // One that failed with no error code of the cluster's (a TypeError: the SDK's or the
    // harness's bug, recorded of unknown outcome) failed for good too (until an audit it passed).
    if (
      (e.outcome === 'fail' && e.error !== 'UNAVAILABLE') ||
      (e.outcome === 'info' && !isErrorCode(e.error ?? ''))
    )
      anomalies.push({ kind: AnomalyKind.Refused, body, detail: `enqueue failed for good: ${e.error}` })
    if (e.outcome === 'ok' && !byBody.has(body)) {
      anomalies.push({
        kind: AnomalyKind.Lost,
        body,
        detail: `enqueue ok at ${e.endMs} as ${e.partition}/${e.id}, never delivered`,
      })
    }
  }
  for (const [body, list] of byBody) {
    const e = enqueues.get(body)
    if (!e || e.outcome === 'fail') {
      anomalies.push({
        kind: AnomalyKind.Unexpected,
        body,
        detail: e ? `delivered, but its enqueue failed with ${e.error}` : 'delivered, never enqueued',
      })
    }
    const ids = new Set(list.map((d) => `${d.partition}/${d.id}`))
    if (e?.outcome === 'ok') ids.add(`${e.partition}/${e.id}`)
    if (ids.size > 1) {
      anomalies.push({ kind: AnomalyKind.StoredTwice, body, detail: `under ids ${[...ids].join(', ')}` })
    }
    list.sort((a, b) => a.grantedMs - b.grantedMs)
    const leaseIds = new Set<string>()
    for (const d of list) {
      const key = leaseKey(d.partition, d.leaseId)
      if (leaseIds.has(key)) {
        anomalies.push({ kind: AnomalyKind.LeaseReused, body, detail: `lease ${key} handed out twice` })
      }
      leaseIds.add(key)
    }
    for (let j = 1; j < list.length; j++) {
      const b = list[j] as DeliveryRecord
      for (let i = 0; i < j; i++) {
        const a = list[i] as DeliveryRecord
        // The list is in grant order as far as `grantedMs` tells, which dates a lease stamped
        // ahead of the clients' clock (a group clock ahead: a skewed run) by its answer; a slow
        // answer then puts it after one the group granted later. When the group's clock says
        // `a` came second, `a` is checked against `b`'s hold too, by that clock (the clients'
        // alone cannot order them): until an audit, `a` granted while `b` held the message
        // went unseen once `b` was nacked before `a`'s answer came.
        const detail =
          overlap(b, a, toleranceMs) ??
          (a.stampedMs > b.stampedMs ? overlap(a, b, toleranceMs, true) : undefined)
        if (detail !== undefined) anomalies.push({ kind: AnomalyKind.Overlap, body, detail })
      }
    }
    for (const a of list) {
      if (!ackedOk(a) || !a.settle) continue
      for (const b of list) {
        // Also by the clients' clock alone: a lease call (its attempt's first) that started
        // after the ack returned was granted after it, whatever the group clock says (it may
        // run behind the clients' in a skewed run; an audit).
        if (
          b === a ||
          (b.deliveryCount <= a.deliveryCount &&
            b.grantedMs <= a.settle.endMs &&
            b.leaseStartMs <= a.settle.endMs)
        )
          continue
        anomalies.push({
          kind: AnomalyKind.DeliveredAfterAck,
          body,
          detail: `${b.worker} was granted delivery ${b.deliveryCount} (lease ${b.leaseId}) at ${b.grantedMs}; lease ${a.leaseId} (delivery ${a.deliveryCount}) was acked ok at ${a.settle.endMs}`,
        })
      }
    }
  }
  anomalies.push(...sharedIdAnomalies(enqueues.values(), all))
  const keyed = (d: DeliveryRecord) => enqueues.get(d.body)?.key !== undefined
  anomalies.push(...fifoAnomalies(options.orderedKeys ? all.filter((d) => !keyed(d)) : all))
  // An enqueue of unknown outcome that was stored (delivered) takes part in its producer's
  // order too, where its first delivery found it (a timed-out batch during a failover is what
  // the check is for; only those that returned ok took part until an audit).
  const firstDelivery = new Map<string, DeliveryRecord>()
  for (const d of all) if (!firstDelivery.has(d.body)) firstDelivery.set(d.body, d)
  const located = [...enqueues.values()].map((e) => {
    const d = firstDelivery.get(e.body)
    return e.outcome === 'info' && d ? { ...e, outcome: 'ok' as const, partition: d.partition, id: d.id } : e
  })
  anomalies.push(...producerOrderAnomalies(located))
  if (options.orderedKeys) anomalies.push(...keyOrderAnomalies(all, enqueues, ops))
  const countOf = (kind: AnomalyKind) => anomalies.filter((a) => a.kind === kind).length
  return {
    enqueues: counts,
    ackedEnqueues: counts.ok,
    deliveries: all.length,
    distinctDelivered: byBody.size,
    redeliveries: all.length - byBody.size,
    ackedDeliveries: all.filter(ackedOk).length,
    lost: countOf(AnomalyKind.Lost),
    unexpected: countOf(AnomalyKind.Unexpected),
    overlaps: countOf(AnomalyKind.Overlap),
    deliveredAfterAck: countOf(AnomalyKind.DeliveredAfterAck),
    storedTwice: countOf(AnomalyKind.StoredTwice),
    leaseReused: countOf(AnomalyKind.LeaseReused),
    fifoViolations: countOf(AnomalyKind.Fifo),
    producerOrder: countOf(AnomalyKind.ProducerOrder),
    keyOrder: countOf(AnomalyKind.KeyOrder),
    refused: countOf(AnomalyKind.Refused),
    anomalies,
  }
}

/** `items` grouped by `keyOf` (in their order); an item whose key is undefined is left out. */
function groupBy<T>(items: Iterable<T>, keyOf: (item: T) => string | undefined): Map<string, T[]> {
  const groups = new Map<string, T[]>()
  for (const item of items) {
    const key = keyOf(item)
    if (key === undefined) continue
    const group = groups.get(key)
    if (group) group.push(item)
    else groups.set(key, [item])
  }
  return groups
}

/**
 * One partition/id, or one lease id, names one body (the per-body checks cannot see two bodies
 * sharing one: a next-id counter rolled back, and an ack of one's stale lease deletes the
 * other; an audit). Stored twice, resp. lease reused.
 */
function sharedIdAnomalies(enqueues: Iterable<EnqueueOp>, all: readonly DeliveryRecord[]): Anomaly[] {
  const bodiesOf = new Map<string, Set<string>>()
  const note = (key: string, body: string) => {
    const bodies = bodiesOf.get(key) ?? new Set<string>()
    bodies.add(body)
    bodiesOf.set(key, bodies)
  }
  for (const e of enqueues)
    if (e.outcome === 'ok' && e.partition !== undefined && e.id !== undefined)
      note(`id ${e.partition}/${e.id}`, e.body)
  for (const d of all) {
    note(`id ${d.partition}/${d.id}`, d.body)
    note(`lease ${leaseKey(d.partition, d.leaseId)}`, d.body)
  }
  const out: Anomaly[] = []
  for (const [key, bodies] of bodiesOf) {
    if (bodies.size < 2) continue
    out.push({
      kind: key.startsWith('lease') ? AnomalyKind.LeaseReused : AnomalyKind.StoredTwice,
      body: [...bodies][1] as string,
      detail: `${key} names bodies ${[...bodies].join(', ')}`,
    })
  }
  return out
}

/** FIFO of first deliveries within a partition and weight (see the module comment). */
function fifoAnomalies(all: readonly DeliveryRecord[]): Anomaly[] {
  const lanes = groupBy(all, (d) => (d.deliveryCount === 1 ? `${d.partition}/${d.weight}` : undefined))
  const out: Anomaly[] = []
  for (const lane of lanes.values()) {
    lane.sort((a, b) => a.id - b.id)
    // The latest lease start among smaller ids: y must not have been received before it.
    let latest: DeliveryRecord | undefined
    for (const y of lane) {
      if (latest && y.receivedMs < latest.leaseStartMs) {
        out.push({
          kind: AnomalyKind.Fifo,
          body: y.body,
          detail:
            `${y.partition}/${y.id} (weight ${y.weight}) first delivered at ${y.receivedMs}, before ` +
            `${latest.partition}/${latest.id} was leased (call started ${latest.leaseStartMs})`,
        })
      }
      if (!latest || y.leaseStartMs > latest.leaseStartMs) latest = y
    }
  }
  return out
}

/** Each producer's ok enqueues in one partition, by send number, must have rising ids. */
function producerOrderAnomalies(enqueues: Iterable<EnqueueOp>): Anomaly[] {
  const lanes = groupBy(enqueues, (e) =>
    e.outcome === 'ok' && e.sendNo !== undefined && e.id !== undefined
      ? `${e.worker}/${e.partition}`
      : undefined,
  )
  const out: Anomaly[] = []
  for (const lane of lanes.values()) {
    lane.sort((a, b) => (a.sendNo as number) - (b.sendNo as number))
    let highest: EnqueueOp | undefined
    for (const e of lane) {
      if (highest && (e.id as number) < (highest.id as number)) {
        out.push({
          kind: AnomalyKind.ProducerOrder,
          body: e.body,
          detail: `${e.worker}'s send ${e.sendNo} stored as ${e.partition}/${e.id}, below its earlier send ${highest.sendNo} (${highest.partition}/${highest.id})`,
        })
      }
      if (!highest || (e.id as number) > (highest.id as number)) highest = e
    }
  }
  return out
}

/** A key's messages in id order, each acked before the next is handed out (module comment). */
function keyOrderAnomalies(
  all: readonly DeliveryRecord[],
  enqueues: ReadonlyMap<string, EnqueueOp>,
  ops: readonly Op[],
): Anomaly[] {
  /** key → partition → id → body, of the messages known to be stored. */
  const stored = new Map<string, Map<number, Map<number, string>>>()
  const note = (
    key: string | undefined,
    partition: number | undefined,
    id: number | undefined,
    body: string,
  ) => {
    if (key === undefined || partition === undefined || id === undefined) return
    const parts = stored.get(key) ?? new Map<number, Map<number, string>>()
    stored.set(key, parts)
    const ids = parts.get(partition) ?? new Map<number, string>()
    parts.set(partition, ids)
    ids.set(id, body)
  }
  for (const e of enqueues.values()) if (e.outcome === 'ok') note(e.key, e.partition, e.id, e.body)
  for (const d of all) note(enqueues.get(d.body)?.key, d.partition, d.id, d.body)
  /**
   * Per body, the earliest start of an ack that may have taken effect: ok for its lease, or of
   * unknown outcome for the body's last delivery seen (a later delivery shows that an ack of an
   * earlier one did not delete the message).
   */
  const ackedFrom = new Map<string, number>()
  const leased = new Map(all.map((d) => [leaseKey(d.partition, d.leaseId), d]))
  const lastDelivery = new Map<string, number>()
  for (const d of all) lastDelivery.set(d.body, Math.max(lastDelivery.get(d.body) ?? 0, d.deliveryCount))
  for (const op of ops) {
    if (op.kind !== 'ack' || op.outcome === 'fail') continue
    for (const leaseId of op.leaseIds) {
      const d = leased.get(leaseKey(op.partition, leaseId))
      if (d === undefined) continue
      // A retried ack's `expired` is definite too: no attempt deleted the message (history.ts).
      if (
        op.outcome === 'ok'
          ? op.results?.[leaseId] !== 'ok'
          : op.results?.[leaseId] === 'expired' || d.deliveryCount < (lastDelivery.get(d.body) ?? 0)
      )
        continue
      ackedFrom.set(d.body, Math.min(ackedFrom.get(d.body) ?? op.startMs, op.startMs))
    }
  }
  const deliveriesOf = groupBy(all, (d) => d.body)
  const out: Anomaly[] = []
  for (const [key, parts] of stored) {
    if (parts.size > 1) {
      const where = [...parts.keys()].join(', ')
      const body = [...(parts.values().next().value as Map<number, string>).values()][0] as string
      out.push({ kind: AnomalyKind.KeyOrder, body, detail: `key ${key} stored in partitions ${where}` })
    }
    for (const [partition, ids] of parts) {
      const line = [...ids].sort((a, b) => a[0] - b[0])
      for (let i = 1; i < line.length; i++) {
        const [xId, x] = line[i - 1] as [number, string]
        const [yId, y] = line[i] as [number, string]
        const from = ackedFrom.get(x)
        for (const d of deliveriesOf.get(y) ?? []) {
          if (from !== undefined && d.receivedMs >= from) continue
          out.push({
            kind: AnomalyKind.KeyOrder,
            body: y,
            detail:
              `key ${key}: ${partition}/${yId} handed to ${d.worker} at ${d.receivedMs}, ` +
              (from === undefined
                ? `${partition}/${xId} before it never acked`
                : `before ${partition}/${xId}'s ack at ${from}`),
          })
        }
      }
    }
  }
  return out
}

/**
 * The longest time during [fromMs, toMs] in which no enqueue returned ok (how long producers
 * stalled, across faults and recoveries), and where it lies.
 */
export function longestEnqueueStall(
  ops: readonly Op[],
  fromMs: number,
  toMs: number,
): { readonly ms: number; readonly fromMs: number; readonly toMs: number } {
  const ends = ops
    .filter((o) => o.kind === 'enqueue' && o.outcome === 'ok' && o.endMs >= fromMs && o.endMs <= toMs)
    .map((o) => o.endMs)
    .sort((a, b) => a - b)
  let prev = fromMs
  let longest = { ms: 0, fromMs, toMs: fromMs }
  for (const t of [...ends, toMs]) {
    if (t - prev > longest.ms) longest = { ms: t - prev, fromMs: prev, toMs: t }
    prev = t
  }
  return longest
}

/** The faults and scalings that overlap [fromMs, toMs], as "start..end ms: description" (relative to `zeroMs`). */
export function faultsDuring(ops: readonly Op[], fromMs: number, toMs: number, zeroMs: number): string[] {
  return ops.flatMap((o) =>
    o.kind === 'fault' && o.startMs <= toMs && o.endMs >= fromMs
      ? [`${o.startMs - zeroMs}..${o.endMs - zeroMs} ms: ${o.worker} ${o.description}`]
      : [],
  )
}

/** The operations that concern `body` (its enqueue, its leases and their settles), by start time. */
export function excerpt(ops: readonly Op[], body: string): Op[] {
  const leases = new Set<string>()
  const out: Op[] = []
  for (const op of ops) {
    if (op.kind === 'enqueue' && op.body === body) out.push(op)
    if (op.kind === 'lease' && op.messages.some((m) => m.body === body)) {
      out.push({ ...op, messages: op.messages.filter((m) => m.body === body) })
      for (const m of op.messages) if (m.body === body) leases.add(leaseKey(m.partition, m.leaseId))
    }
  }
  for (const op of ops) {
    if (op.kind !== 'ack' && op.kind !== 'nack') continue
    if (op.leaseIds.some((id) => leases.has(leaseKey(op.partition, id)))) out.push(op)
  }
  return out.sort((a, b) => a.startMs - b.startMs)
}

/** How many operations of each kind failed or timed out, by error code ("enqueue info UNAVAILABLE": 12). */
export function errorCounts(ops: readonly Op[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const op of ops) {
    if (op.kind === 'fault' || op.kind === 'attempt' || op.outcome === 'ok') continue
    const key = `${op.kind} ${op.outcome} ${op.error ?? '?'}`
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

/** A one-line summary of a report. */
export function summarize(r: CheckReport): string {
  return (
    `enqueues ok=${r.enqueues.ok} fail=${r.enqueues.fail} info=${r.enqueues.info}; ` +
    `deliveries=${r.deliveries} distinct=${r.distinctDelivered} redeliveries=${r.redeliveries} ` +
    `acked=${r.ackedDeliveries}; lost=${r.lost} unexpected=${r.unexpected} overlaps=${r.overlaps} ` +
    `deliveredAfterAck=${r.deliveredAfterAck} storedTwice=${r.storedTwice} leaseReused=${r.leaseReused} fifo=${r.fifoViolations} producerOrder=${r.producerOrder} keyOrder=${r.keyOrder} refused=${r.refused}`
  )
}
