import { describe, expect, it } from 'vitest'
import {
  check,
  errorCounts,
  excerpt,
  faultsDuring,
  holdEndMs,
  longestEnqueueStall,
  deliveries as toDeliveries,
} from './checker'
import type { EnqueueOp, LeaseOp, Op, SettleOp } from './history'

// Hand-made histories: each property must pass on a good history and fail on a bad one.

const enq = (body: string, outcome: EnqueueOp['outcome'] = 'ok', id = 1, endMs = 10): EnqueueOp => ({
  kind: 'enqueue',
  worker: 'p1',
  body,
  startMs: endMs - 5,
  endMs,
  outcome,
  ...(outcome === 'ok'
    ? { partition: 0, id }
    : { error: outcome === 'fail' ? 'INVALID_ARGUMENT' : 'UNAVAILABLE' }),
})

const lease = (
  worker: string,
  receivedMs: number,
  msgs: { body: string; leaseId: string; deadlineMs: number; id?: number; count?: number; weight?: number }[],
  visibilityMs?: number,
): LeaseOp => ({
  kind: 'lease',
  worker,
  partition: 0,
  startMs: receivedMs - 3,
  endMs: receivedMs,
  outcome: 'ok',
  ...(visibilityMs === undefined ? {} : { visibilityMs }),
  messages: msgs.map((m) => ({
    body: m.body,
    partition: 0,
    id: m.id ?? 1,
    leaseId: m.leaseId,
    deliveryCount: m.count ?? 1,
    weight: m.weight ?? 1,
    deadlineMs: m.deadlineMs,
  })),
})

const settle = (
  kind: 'ack' | 'nack',
  leaseId: string,
  startMs: number,
  result: 'ok' | 'expired' | 'unknown' | 'timeout' = 'ok',
  /** Answered after a retry (an earlier attempt's outcome unknown): info, with the results. */
  retried = false,
): SettleOp => ({
  kind,
  worker: 'c',
  partition: 0,
  startMs,
  endMs: startMs + 4,
  leaseIds: [leaseId],
  ...(result === 'timeout'
    ? { outcome: 'info', error: 'UNAVAILABLE' }
    : retried
      ? { outcome: 'info', error: 'RETRIED', results: { [leaseId]: result } }
      : { outcome: 'ok', results: { [leaseId]: result } }),
})

describe('check', () => {
  it('passes a clean history: enqueue, lease, ack', () => {
    const ops: Op[] = [
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1020 }]),
      settle('ack', 'L1', 25),
    ]
    const r = check(ops)
    expect(r).toMatchObject({ ackedEnqueues: 1, deliveries: 1, redeliveries: 0, ackedDeliveries: 1, lost: 0 })
    expect(r.anomalies).toEqual([])
  })

  it('finds a lost acknowledged enqueue, not an unknown one, and a refused one as refused', () => {
    const r = check([enq('a'), enq('b', 'info'), enq('c', 'fail')])
    expect(r.lost).toBe(1)
    expect(r.refused).toBe(1)
    expect(r.anomalies).toEqual([
      expect.objectContaining({ kind: 'lost', body: 'a' }),
      expect.objectContaining({
        kind: 'refused',
        body: 'c',
        detail: 'enqueue failed for good: INVALID_ARGUMENT',
      }),
    ])
    expect(r.enqueues).toEqual({ ok: 1, fail: 1, info: 1 })
  })

  it('allows delivering an enqueue of unknown outcome, flags a never-sent or failed one', () => {
    const ok = check([enq('u', 'info'), lease('c1', 20, [{ body: 'u', leaseId: 'L1', deadlineMs: 900 }])])
    expect(ok.anomalies).toEqual([])
    const bad = check([
      enq('f', 'fail'),
      lease('c1', 20, [
        { body: 'f', leaseId: 'L1', deadlineMs: 900 },
        { body: 'ghost', leaseId: 'L2', deadlineMs: 900, id: 2 },
      ]),
    ])
    expect(bad.unexpected).toBe(2)
    expect(bad.refused).toBe(1)
    expect(
      bad.anomalies
        .filter((a) => a.kind === 'unexpected')
        .map((a) => a.body)
        .sort(),
    ).toEqual(['f', 'ghost'])
  })

  it('allows a redelivery after the lease expired, and counts it', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      lease('c2', 1010, [{ body: 'a', leaseId: 'L2', deadlineMs: 2010, count: 2 }]),
      settle('ack', 'L2', 1020),
    ])
    expect(r.anomalies).toEqual([])
    expect(r.redeliveries).toBe(1)
  })

  it('allows a redelivery right after a nack, before the lease deadline', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      settle('nack', 'L1', 30),
      lease('c2', 40, [{ body: 'a', leaseId: 'L2', deadlineMs: 1040, count: 2 }]),
    ])
    expect(r.overlaps).toBe(0)
    expect(r.redeliveries).toBe(1)
  })

  it('allows a redelivery after a nack that timed out (it may have taken effect)', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      settle('nack', 'L1', 30, 'timeout'),
      lease('c2', 40, [{ body: 'a', leaseId: 'L2', deadlineMs: 1040, count: 2 }]),
    ])
    expect(r.overlaps).toBe(0)
  })

  it('flags two consumers holding one message inside its lease', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      lease('c2', 500, [{ body: 'a', leaseId: 'L2', deadlineMs: 1500, count: 2 }]),
    ])
    expect(r.overlaps).toBe(1)
    expect(r.anomalies[0]?.detail).toMatch(
      /c2 was granted lease L2 at 500 \(received 500\), 500 ms before c1's lease L1/,
    )
  })

  it("dates a lease by the leader's grant, not by when its answer arrived", () => {
    const r = (receivedMs: number, grantedMs: number) =>
      check([
        enq('a'),
        lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 2020 }], 2_000),
        // Granted at `grantedMs` (its deadline minus the 2 s asked for), answered at `receivedMs`.
        lease(
          'c2',
          receivedMs,
          [{ body: 'a', leaseId: 'L2', deadlineMs: grantedMs + 2_000, count: 2 }],
          2_000,
        ),
      ]).overlaps
    // A slow answer (a commit under faults) no longer hides a lease granted 1.4 s early.
    expect(r(2100, 600)).toBe(1)
    expect(r(2100, 2020)).toBe(0)
    // A stamp later than its answer (a group clock that jumped ahead): by the group's clock B
    // came after A's deadline, but its answer arrived while c1 could still count on its lease.
    expect(r(900, 5000)).toBe(1)
  })

  it('holds a message to its deadline through an ack, whatever the ack did', () => {
    for (const result of ['timeout', 'unknown', 'expired', 'ok'] as const) {
      const r = check([
        enq('a'),
        lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 2020 }]),
        settle('ack', 'L1', 250, result),
        lease('c2', 1000, [{ body: 'a', leaseId: 'L2', deadlineMs: 3000, count: 2 }]),
      ])
      expect(r.overlaps, result).toBe(1)
    }
  })

  it('flags an overlap when the nack that would have freed the lease was refused', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      settle('nack', 'L1', 30, 'unknown'),
      lease('c2', 40, [{ body: 'a', leaseId: 'L2', deadlineMs: 1040, count: 2 }]),
    ])
    expect(r.overlaps).toBe(1)
  })

  it("compares a nack's start with when the next lease's answer came, not with the leader's time", () => {
    // The group's clock 150 ms behind the clients' (a leader change under a slow network): c2's
    // lease is stamped 150 (its deadline minus the 1 s asked for), answered at 320, after c1's
    // nack started at 300. Not an overlap; one answered at 200, before the nack, is.
    const at = (receivedMs: number) =>
      check([
        enq('a'),
        lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1020 }], 1_000),
        settle('nack', 'L1', 300),
        lease('c2', receivedMs, [{ body: 'a', leaseId: 'L2', deadlineMs: 1150, count: 2 }], 1_000),
      ]).overlaps
    expect(at(320)).toBe(0)
    expect(at(200)).toBe(1)
  })

  it("flags a lease answered before the first consumer's nack went out, however shortly before", () => {
    // Both are the clients' clock (one process's Date.now()): no slack between them. c2's lease
    // answered 20 ms before c1's nack of its own went out, while c1 still held the message. Until
    // an audit the 50-ms slack for the group's clock was applied here too: no overlap seen.
    const at = (receivedMs: number, stampedMs: number) =>
      check([
        enq('a'),
        lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1020 }], 1_000),
        lease(
          'c2',
          receivedMs,
          [{ body: 'a', leaseId: 'L2', deadlineMs: stampedMs + 1_000, count: 2 }],
          1_000,
        ),
        settle('nack', 'L1', 300),
      ]).overlaps
    expect(at(280, 250)).toBe(1)
    // Stamped past c1's deadline (a group clock that jumped ahead): the clients' clock alone.
    expect(at(280, 1100)).toBe(1)
    // Answered once the nack went out: no overlap, by either clock.
    expect(at(300, 250)).toBe(0)
    expect(at(300, 1100)).toBe(0)
    // The other way round, when the group's clock says the first answer came second (a group
    // clock ahead): c2's lease, stamped 1400, held until c2's nack went out at 1050; c1's,
    // stamped 1500, answered at 1010, 40 ms before that (c1 nacked it at 1020).
    const reversed = check([
      enq('a'),
      lease('c1', 1010, [{ body: 'a', leaseId: 'L1', deadlineMs: 3500 }], 2_000),
      settle('nack', 'L1', 1020),
      lease('c2', 1040, [{ body: 'a', leaseId: 'L2', deadlineMs: 3400, count: 2 }], 2_000),
      settle('nack', 'L2', 1050),
    ])
    expect(reversed.overlaps).toBe(1)
  })

  it("flags a lease answered while the first consumer could still count on its own, whatever the group's clock says", () => {
    // The group's clock jumped 60 s forward between the two leases (a new leader with its clock
    // ahead, before 2026-12-03): c2's stamp is past c1's deadline, but c2's answer came 500 ms
    // into c1's 2-s lease. A lease answered after c1's 2 s / 1.01 is not flagged.
    const at = (receivedMs: number) =>
      check([
        enq('a'),
        lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 2020 }], 2_000),
        lease('c2', receivedMs, [{ body: 'a', leaseId: 'L2', deadlineMs: 64_000, count: 2 }], 2_000),
      ]).overlaps
    expect(at(520)).toBe(1)
    expect(at(2_100)).toBe(0)
  })

  it("flags a lease granted while another was held when the earlier grant's answer came last (a group clock ahead)", () => {
    // The group's clock 500 ms ahead of the clients' (a skewed run): leases are dated by their
    // answers. c1's lease is stamped 1500 (client time 1000) but answered only at 2500 (a slow
    // commit); c2's is stamped 1600, while c1 held the message to 3500, answered at 1110 and
    // nacked at 1200. By the answers c2 came first, and c1's late answer is after c2's nack.
    const ops: Op[] = [
      enq('a'),
      { ...lease('c1', 2500, [{ body: 'a', leaseId: 'L1', deadlineMs: 3500 }], 2_000), startMs: 990 },
      lease('c2', 1110, [{ body: 'a', leaseId: 'L2', deadlineMs: 3600, count: 2 }], 2_000),
      settle('nack', 'L2', 1200),
    ]
    expect(check(ops).overlaps).toBe(1)
    // Stamped past c1's deadline (client time 3050), c2's lease is none.
    const after: Op[] = [
      ...ops.slice(0, 2),
      lease('c2', 3060, [{ body: 'a', leaseId: 'L2', deadlineMs: 5550, count: 2 }], 2_000),
      settle('nack', 'L2', 3100),
    ]
    expect(check(after).overlaps).toBe(0)
  })

  it('tolerates the stated clock slack at the deadline, and no more', () => {
    const at = (receivedMs: number) =>
      check(
        [
          enq('a'),
          lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
          lease('c2', receivedMs, [{ body: 'a', leaseId: 'L2', deadlineMs: 3000, count: 2 }]),
        ],
        { clockToleranceMs: 50 },
      ).overlaps
    expect(at(950)).toBe(0)
    expect(at(949)).toBe(1)
  })

  it('flags a delivery after an acknowledged ack', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      settle('ack', 'L1', 30),
      lease('c2', 2000, [{ body: 'a', leaseId: 'L2', deadlineMs: 3000, count: 2 }]),
    ])
    expect(r.deliveredAfterAck).toBe(1)
    expect(r.overlaps).toBe(0)
  })

  it('flags a later delivery of a message whose ack answered ok, whenever it was granted', () => {
    // A stale ack accepted: delivery 2 was granted after delivery 1's deadline, then the ack of
    // delivery 1 answered ok (it deleted the message delivery 2 held).
    const stale = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      lease('c2', 1100, [{ body: 'a', leaseId: 'L2', deadlineMs: 3100, count: 2 }]),
      settle('ack', 'L1', 1200),
    ])
    expect(stale.deliveredAfterAck).toBe(1)
    expect(stale.overlaps).toBe(0)
  })

  it("takes a retried ack's ok and expired as definite", () => {
    const after = (result: 'ok' | 'expired' | 'unknown') =>
      check([
        enq('a'),
        lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
        settle('ack', 'L1', 30, result, true),
        lease('c2', 2000, [{ body: 'a', leaseId: 'L2', deadlineMs: 3000, count: 2 }]),
      ])
    expect(after('ok').deliveredAfterAck).toBe(1)
    expect(after('ok').ackedDeliveries).toBe(1)
    expect(after('expired').anomalies).toEqual([])
    expect(after('unknown').anomalies).toEqual([])
  })

  it('allows a delivery after an ack that answered expired', () => {
    const r = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      settle('ack', 'L1', 1100, 'expired'),
      lease('c2', 1050, [{ body: 'a', leaseId: 'L2', deadlineMs: 3000, count: 2 }]),
    ])
    expect(r.anomalies).toEqual([])
  })

  it('flags one body stored under two ids', () => {
    const r = check([
      enq('a', 'ok', 1),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000, id: 1 }]),
      lease('c2', 2000, [{ body: 'a', leaseId: 'L2', deadlineMs: 3000, id: 7 }]),
    ])
    expect(r.storedTwice).toBe(1)
    expect(r.anomalies[0]?.detail).toBe('under ids 0/1, 0/7')
  })

  it('flags a lease id handed out twice, and tells partitions apart', () => {
    const twice = check([
      enq('a'),
      lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000 }]),
      lease('c2', 2000, [{ body: 'a', leaseId: '1.1', deadlineMs: 3000 }]),
    ])
    expect(twice.leaseReused).toBe(1)
    const other: LeaseOp = {
      ...lease('c2', 20, [{ body: 'b', leaseId: '1.1', deadlineMs: 1000 }]),
      partition: 1,
    }
    const apart = check([
      enq('a'),
      { ...enq('b', 'ok', 1), partition: 1 },
      lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000 }]),
      { ...other, messages: other.messages.map((m) => ({ ...m, partition: 1 })) },
      settle('ack', '1.1', 30),
    ])
    expect(apart.anomalies).toEqual([])
    expect(apart.ackedDeliveries).toBe(1)
  })

  it('checks FIFO of first deliveries within a partition and weight', () => {
    const base: Op[] = [enq('a', 'ok', 1), enq('b', 'ok', 2)]
    const inOrder = check([
      ...base,
      lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]),
      lease('c2', 30, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
    ])
    expect(inOrder.fifoViolations).toBe(0)
    // b (id 2) received at 20, but a (id 1) leased only by a call that started at 97.
    const outOfOrder = check([
      ...base,
      lease('c2', 20, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
      lease('c1', 100, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]),
    ])
    expect(outOfOrder.fifoViolations).toBe(1)
    expect(outOfOrder.anomalies[0]).toMatchObject({ kind: 'fifo', body: 'b' })
    // Unless that call repeated a lease attempt whose first call started before b was
    // received: a may have been leased then, and only answered now.
    const repeated = check([
      ...base,
      lease('c2', 20, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
      { ...lease('c1', 100, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]), attemptStartMs: 10 },
    ])
    expect(repeated.fifoViolations).toBe(0)
    // Other weights are other sub-queues; redeliveries (count 2) do not take part.
    const otherWeight = check([
      ...base,
      lease('c2', 20, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2, weight: 5 }]),
      lease('c1', 100, [{ body: 'a', leaseId: '1.2', deadlineMs: 1000, id: 1, count: 2 }]),
    ])
    expect(otherWeight.fifoViolations).toBe(0)
  })

  it("checks that a producer's messages are stored in a partition in the order it sent them", () => {
    const sent = (body: string, sendNo: number, id: number, partition = 0, worker = 'p1'): EnqueueOp => ({
      ...enq(body, 'ok', id),
      worker,
      partition,
      sendNo,
    })
    const inOrder = check([sent('a', 0, 1), sent('b', 1, 5), sent('c', 2, 2, 1), sent('d', 3, 7)])
    expect(inOrder.producerOrder).toBe(0)
    // d was sent after b but stored below it; other producers and partitions do not count.
    const swapped = check([sent('a', 0, 1), sent('b', 1, 5), sent('d', 2, 3), sent('e', 0, 2, 0, 'p2')])
    expect(swapped.producerOrder).toBe(1)
    expect(swapped.anomalies.filter((a) => a.kind === 'producer-order')).toEqual([
      expect.objectContaining({ body: 'd' }),
    ])
    // A failed send is not stored: it takes no part.
    expect(check([sent('a', 0, 4), { ...enq('b', 'info'), sendNo: 1 }, sent('c', 2, 5)]).producerOrder).toBe(
      0,
    )
  })

  it("checks that an ordered key's message is handed out only after the one before it was acked", () => {
    const keyed = (body: string, id: number, key = 'k'): EnqueueOp => ({ ...enq(body, 'ok', id), key })
    const base: Op[] = [keyed('a', 1), keyed('b', 2), keyed('c', 3, 'other'), enq('n', 'ok', 4)]
    const inTurn = check(
      [
        ...base,
        lease('c1', 20, [
          { body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 },
          { body: 'c', leaseId: '3.1', deadlineMs: 1000, id: 3 },
          { body: 'n', leaseId: '4.1', deadlineMs: 1000, id: 4 },
        ]),
        settle('ack', '1.1', 30),
        lease('c2', 40, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
        settle('ack', '2.1', 50),
        settle('ack', '3.1', 50),
        settle('ack', '4.1', 50),
      ],
      { orderedKeys: true },
    )
    expect(inTurn.anomalies).toEqual([])
    // b handed out while a was still held (its ack started later), and c, another key, is fine.
    const early = check(
      [
        ...base,
        lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]),
        lease('c2', 25, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
        settle('ack', '1.1', 30),
        settle('ack', '2.1', 50),
        lease('c2', 60, [
          { body: 'c', leaseId: '3.1', deadlineMs: 1000, id: 3 },
          { body: 'n', leaseId: '4.1', deadlineMs: 1000, id: 4 },
        ]),
      ],
      { orderedKeys: true },
    )
    expect(early.keyOrder).toBe(1)
    expect(early.anomalies).toEqual([expect.objectContaining({ kind: 'key-order', body: 'b' })])
    // An ack that answered expired does not count; one of unknown outcome does.
    const expired = check(
      [
        ...base,
        lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]),
        settle('ack', '1.1', 30, 'expired'),
        lease('c2', 40, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
      ],
      { orderedKeys: true },
    )
    expect(expired.keyOrder).toBe(1)
    const unknown = check(
      [
        ...base,
        lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]),
        settle('ack', '1.1', 30, 'timeout'),
        lease('c2', 40, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
      ],
      { orderedKeys: true },
    )
    expect(unknown.keyOrder).toBe(0)
    // An ack of unknown outcome that a later delivery of a shows did not apply does not count.
    const redelivered = check(
      [
        ...base,
        lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 100, id: 1 }]),
        settle('ack', '1.1', 30, 'timeout'),
        lease('c1', 130, [{ body: 'a', leaseId: '1.2', deadlineMs: 1000, id: 1, count: 2 }]),
        lease('c2', 150, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
        settle('ack', '1.2', 250),
      ],
      { orderedKeys: true },
    )
    expect(redelivered.keyOrder).toBe(1)
    // Keyed messages take no part in FIFO with ordered keys: b waits for its key, c goes first.
    const fifo = [...base, lease('c1', 20, [{ body: 'c', leaseId: '3.1', deadlineMs: 1000, id: 3 }])]
    fifo.push(lease('c1', 100, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]))
    expect(check(fifo).fifoViolations).toBe(1)
    expect(check(fifo, { orderedKeys: true }).fifoViolations).toBe(0)
    // A key stored in two partitions is flagged.
    const split = check([keyed('a', 1), { ...keyed('b', 2), partition: 1 }], { orderedKeys: true })
    expect(split.anomalies.filter((x) => x.kind === 'key-order')).toEqual([
      expect.objectContaining({ detail: 'key k stored in partitions 0, 1' }),
    ])
  })

  it("takes a retried ack's expired as definite for key order: it did not let the key's next message go", () => {
    const keyed = (body: string, id: number): EnqueueOp => ({ ...enq(body, 'ok', id), key: 'k' })
    // a's first ack attempt went unanswered, the retry was told expired: no attempt deleted a
    // (history.ts), yet b, the key's next message, was handed out.
    const r = check(
      [
        keyed('a', 1),
        keyed('b', 2),
        lease('c1', 20, [{ body: 'a', leaseId: '1.1', deadlineMs: 1000, id: 1 }]),
        settle('ack', '1.1', 30, 'expired', true),
        lease('c2', 40, [{ body: 'b', leaseId: '2.1', deadlineMs: 1000, id: 2 }]),
        settle('ack', '2.1', 50),
      ],
      { orderedKeys: true },
    )
    expect(r.anomalies).toEqual([expect.objectContaining({ kind: 'key-order', body: 'b' })])
  })

  it('rejects a history whose bodies are not unique', () => {
    expect(() => check([enq('a'), enq('a')])).toThrow(/enqueued twice/)
  })
})

describe('helpers', () => {
  it('ends a hold at the earlier of the deadline and a settle that may have applied', () => {
    const ops: Op[] = [
      lease('c1', 20, [
        { body: 'a', leaseId: 'L1', deadlineMs: 1000 },
        { body: 'b', leaseId: 'L2', deadlineMs: 1000, id: 2 },
        { body: 'c', leaseId: 'L3', deadlineMs: 1000, id: 3 },
      ]),
      settle('nack', 'L1', 100),
      settle('nack', 'L2', 100, 'expired'),
      settle('ack', 'L3', 100),
    ]
    expect(toDeliveries(ops).map(holdEndMs)).toEqual([100, 1000, 1000])
  })

  it('measures the longest stretch without an acknowledged enqueue', () => {
    const ops: Op[] = [
      enq('a', 'ok', 1, 100),
      enq('b', 'ok', 2, 400),
      enq('c', 'info', 3, 900),
      enq('d', 'ok', 4, 1000),
    ]
    expect(longestEnqueueStall(ops, 0, 1200)).toEqual({ ms: 600, fromMs: 400, toMs: 1000 })
    const fault = (startMs: number, endMs: number, description: string): Op => ({
      kind: 'fault',
      worker: 'nemesis',
      startMs,
      endMs,
      description,
    })
    const faults = [fault(100, 300, 'early'), fault(350, 450, 'kill n1'), fault(1100, 1150, 'late')]
    expect(faultsDuring([...ops, ...faults], 400, 1000, 100)).toEqual(['250..350 ms: nemesis kill n1'])
  })

  it('counts failures by kind, outcome and error code', () => {
    expect(errorCounts([enq('a'), enq('b', 'info'), enq('c', 'info'), enq('d', 'fail')])).toEqual({
      'enqueue info UNAVAILABLE': 2,
      'enqueue fail INVALID_ARGUMENT': 1,
    })
  })

  it('excerpts the operations of one body', () => {
    const ops: Op[] = [
      enq('a'),
      enq('b', 'ok', 2),
      lease('c1', 20, [{ body: 'a', leaseId: 'L1', deadlineMs: 1000 }]),
      settle('ack', 'L1', 30),
    ]
    expect(excerpt(ops, 'a').map((o) => o.kind)).toEqual(['enqueue', 'lease', 'ack'])
    // A settle of the same lease id on another partition is not part of it.
    expect(excerpt([...ops, { ...settle('nack', 'L1', 40), partition: 2 }], 'a')).toHaveLength(3)
  })
})
