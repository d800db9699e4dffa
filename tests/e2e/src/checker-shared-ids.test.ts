import { describe, expect, it } from 'vitest'
import { check } from './checker'
import type { EnqueueOp, LeaseOp, Op, SettleOp } from './history'

// Hand-made histories with a real anomaly that the per-body checks alone missed (an audit,
// 2026-12-05): each fails with the fix it names taken out.

const enq = (body: string, id: number, extra: Partial<EnqueueOp> = {}): EnqueueOp => ({
  kind: 'enqueue',
  worker: 'p1',
  body,
  startMs: 0,
  endMs: 5,
  outcome: 'ok',
  partition: 0,
  id,
  ...extra,
})

const lease = (
  worker: string,
  startMs: number,
  endMs: number,
  msgs: { body: string; id: number; leaseId: string; count?: number; stampedMs: number; weight?: number }[],
  extra: Partial<LeaseOp> = {},
): LeaseOp => ({
  kind: 'lease',
  worker,
  partition: 0,
  startMs,
  endMs,
  outcome: 'ok',
  visibilityMs: 2000,
  messages: msgs.map((m) => ({
    body: m.body,
    partition: 0,
    id: m.id,
    leaseId: m.leaseId,
    deliveryCount: m.count ?? 1,
    weight: m.weight ?? 1,
    deadlineMs: m.stampedMs + 2000,
  })),
  ...extra,
})

const ack = (worker: string, leaseId: string, startMs: number, endMs = startMs + 4): SettleOp => ({
  kind: 'ack',
  worker,
  partition: 0,
  startMs,
  endMs,
  outcome: 'ok',
  leaseIds: [leaseId],
  results: { [leaseId]: 'ok' },
})

describe('the checker, past the per-body checks', () => {
  it('flags one partition/id (and lease id) handed out for two different bodies', () => {
    // Two producers' messages both stored as 0/5 (an id given twice: a next-id counter rolled
    // back, e.g. after a snapshot or a move). Each consumer gets lease "5.1" of a different
    // body. README: lease reused = "one lease id (per partition) handed out by two lease calls".
    const ops: Op[] = [
      enq('a', 5),
      enq('b', 5, { worker: 'p2', startMs: 3000, endMs: 3005 }),
      lease('c1', 10, 20, [{ body: 'a', id: 5, leaseId: '5.1', stampedMs: 15 }]),
      ack('c1', '5.1', 30),
      lease('c2', 4000, 4010, [{ body: 'b', id: 5, leaseId: '5.1', stampedMs: 4005 }]),
      ack('c2', '5.1', 4020),
    ]
    const r = check(ops)
    expect(r.leaseReused + r.storedTwice).toBeGreaterThan(0)
  })

  it('puts a send whose answer was lost but which was stored (seen delivered) in its producer order', () => {
    // p0 pipelines sends 0..2 to partition 0. Send 1 timed out (info) but was stored as id 9,
    // AFTER send 2 (id 7): the pipelining order the check exists for, broken exactly in the
    // failover case. The delivery of 'p0-1' shows where it was stored.
    const ops: Op[] = [
      enq('p0-0', 3, { worker: 'p0', sendNo: 0 }),
      {
        kind: 'enqueue',
        worker: 'p0',
        body: 'p0-1',
        startMs: 0,
        endMs: 10_000,
        outcome: 'info',
        error: 'DEADLINE_EXCEEDED',
        sendNo: 1,
      },
      enq('p0-2', 7, { worker: 'p0', sendNo: 2 }),
      lease('c1', 11_000, 11_010, [
        { body: 'p0-0', id: 3, leaseId: '3.1', stampedMs: 11_005 },
        { body: 'p0-2', id: 7, leaseId: '7.1', stampedMs: 11_005 },
        { body: 'p0-1', id: 9, leaseId: '9.1', stampedMs: 11_005 },
      ]),
      ack('c1', '3.1', 11_020),
      ack('c1', '7.1', 11_020),
      ack('c1', '9.1', 11_020),
    ]
    expect(check(ops).producerOrder).toBeGreaterThan(0)
  })

  it("flags a delivery to a lease call started after the ack returned ok, with the group's clock behind", () => {
    // The group clock runs 4.1 s behind the clients' (a group started on a node whose wall
    // clock is behind, as in --skew-ms runs; the group clock continues its first leader's).
    // Delivery 2 of m acked ok (returned at 1004). Then the message comes back as delivery 1
    // (lease id 5.1, whose first grant the history never saw: that lease call's answer was
    // lost), in a lease call that STARTED at 4990, long after the ack returned. (If c2's ack
    // answered ok the pair is flagged the other way round, by delivery count; it timed out.)
    const skew = -4100
    const ops: Op[] = [
      enq('m', 5),
      {
        kind: 'lease',
        worker: 'c3',
        partition: 0,
        startMs: 10,
        endMs: 200,
        outcome: 'info',
        messages: [],
        error: 'UNAVAILABLE',
      },
      lease('c1', 490, 500, [{ body: 'm', id: 5, leaseId: '5.2', count: 2, stampedMs: 495 + skew }]),
      ack('c1', '5.2', 1000),
      lease('c2', 4990, 5000, [{ body: 'm', id: 5, leaseId: '5.1', count: 1, stampedMs: 4995 + skew }]),
      // c2's ack times out (outcome unknown): the redelivery itself is not acked ok.
      {
        kind: 'ack',
        worker: 'c2',
        partition: 0,
        startMs: 5010,
        endMs: 15_010,
        outcome: 'info',
        error: 'DEADLINE_EXCEEDED',
        leaseIds: ['5.1'],
      },
    ]
    const r = check(ops)
    expect(r.deliveredAfterAck + r.leaseReused + r.overlaps).toBeGreaterThan(0)
  })
})
