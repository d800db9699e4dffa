import type { LeaseResult } from '@mq/protocol'
import { LeaseOutcome } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { resentResults, SettleBatcher, type Settlement } from './settle-batcher'

const ok = (leaseId: string): LeaseResult => ({
  leaseId,
  outcome: LeaseOutcome.LEASE_OUTCOME_OK,
  deadlineMs: 0,
})
const turn = () => new Promise((r) => setImmediate(r))

/** A send whose requests are answered by hand. */
function manualSend() {
  const sent: { settlement: Settlement; ids: string[]; answer: () => void; fail: (e: Error) => void }[] = []
  const send = (settlement: Settlement, ids: string[]) =>
    new Promise<LeaseResult[]>((resolve, reject) =>
      sent.push({ settlement, ids, answer: () => resolve(ids.map(ok)), fail: reject }),
    )
  return { sent, send }
}

describe('SettleBatcher', () => {
  it('sends what is settled in one turn as one request and answers each caller', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send)
    const results = ['a', 'b', 'c'].map((id) => b.settle(id, { kind: 'ack' }))
    expect(sent).toHaveLength(0) // not before the end of the turn
    await turn()
    expect(sent.map((r) => r.ids)).toEqual([['a', 'b', 'c']])
    sent[0]?.answer()
    expect((await Promise.all(results)).map((r) => r.leaseId)).toEqual(['a', 'b', 'c'])
  })

  it('holds acks for a request that carries them while told to, and sends them once resumed', async () => {
    const { sent, send } = manualSend()
    let hold = true
    const b = new SettleBatcher(send, { holdAcks: () => hold })
    let told = 0
    const acks = ['a', 'b'].map((id) => b.settle(id, { kind: 'ack' }, () => told++))
    const nack = b.settle('n', { kind: 'nack', delayMs: 0 })
    await turn()
    // Nacks are not held.
    expect(sent.map((r) => r.ids)).toEqual([['n']])
    const carried = b.takeAcks()
    expect(carried?.leaseIds).toEqual(['a', 'b'])
    expect(told, 'taken acks count as sent once their request answers').toBe(0)
    expect(b.takeAcks(), 'nothing left to take').toBeUndefined()
    let drained = false
    const draining = b.drain().then(() => {
      drained = true
    })
    sent[0]?.answer()
    await nack
    await turn()
    expect(drained, 'drain waits for the carried acks').toBe(false)
    carried?.answer([ok('b'), { ...ok('a'), outcome: LeaseOutcome.LEASE_OUTCOME_UNKNOWN }], false)
    carried?.fail(new Error('ignored: already answered'))
    expect(told).toBe(2)
    expect((await Promise.all(acks)).map((r) => r.outcome)).toEqual([
      LeaseOutcome.LEASE_OUTCOME_UNKNOWN,
      LeaseOutcome.LEASE_OUTCOME_OK,
    ])
    await draining
    // Held while told to; sent once resumed.
    const later = b.settle('c', { kind: 'ack' })
    await turn()
    expect(sent).toHaveLength(1)
    hold = false
    b.resume()
    expect(sent.map((r) => r.ids)).toEqual([['n'], ['c']])
    sent[1]?.answer()
    expect((await later).outcome).toBe(LeaseOutcome.LEASE_OUTCOME_OK)
  })

  it('answers carried acks as resent, fails them, or sends them alone, as the carrying request ends', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send, { holdAcks: () => true })
    const unknown = (id: string) => ({ ...ok(id), outcome: LeaseOutcome.LEASE_OUTCOME_UNKNOWN })
    // Resent: UNKNOWN is an earlier copy's work.
    const a = b.settle('a', { kind: 'ack' })
    b.takeAcks()?.answer([unknown('a')], true)
    expect((await a).outcome).toBe(LeaseOutcome.LEASE_OUTCOME_OK)
    // Failed: every ack hears of it.
    const failed = b.settle('f', { kind: 'ack' })
    b.takeAcks()?.fail(new Error('lost'))
    await expect(failed).rejects.toThrow('lost')
    // Not taken (an older server): an Ack call of their own, whatever the hold.
    const alone = b.settle('s', { kind: 'ack' })
    b.takeAcks()?.sendAlone(false)
    expect(sent.map((r) => [r.settlement.kind, r.ids])).toEqual([['ack', ['s']]])
    sent[0]?.answer()
    expect((await alone).outcome).toBe(LeaseOutcome.LEASE_OUTCOME_OK)
    await b.drain()
  })

  it('holds what comes while a request is out and sends it together when it returns', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send, { inFlightMax: 1 })
    const first = b.settle('a', { kind: 'ack' })
    await turn()
    const later = ['b', 'c', 'd'].map((id) => b.settle(id, { kind: 'ack' }))
    await turn()
    await turn()
    expect(sent).toHaveLength(1)
    expect(b.inFlight).toBe(1)
    sent[0]?.answer()
    await first
    await turn()
    expect(sent.map((r) => r.ids)).toEqual([['a'], ['b', 'c', 'd']])
    sent[1]?.answer()
    expect(await Promise.all(later)).toHaveLength(3)
    await turn()
    expect(b.inFlight).toBe(0)
  })

  it('does not hold an extend behind an ack still out', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send, { inFlightMax: 1 })
    void b.settle('a', { kind: 'ack' })
    await turn()
    void b.settle('b', { kind: 'extend', extendMs: 10 })
    await turn()
    expect(sent.map((r) => [r.settlement.kind, r.ids])).toEqual([
      ['ack', ['a']],
      ['extend', ['b']],
    ])
  })

  it('rejects the callers of an answer it cannot read, and goes on', async () => {
    const b = new SettleBatcher(async () => 'garbage' as unknown as LeaseResult[], { inFlightMax: 1 })
    await expect(b.settle('a', { kind: 'ack' })).rejects.toThrow()
    await turn()
    expect(b.inFlight).toBe(0)
  })

  it('keeps settlements of different kinds apart and splits at batchMax', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send, { inFlightMax: 4, batchMax: 2 })
    for (const id of ['a', 'b', 'c']) void b.settle(id, { kind: 'ack' })
    void b.settle('x', { kind: 'nack', delayMs: 5 })
    await turn()
    expect(sent.map((r) => [r.settlement.kind, r.ids])).toEqual([
      ['ack', ['a', 'b']],
      ['ack', ['c']],
      ['nack', ['x']],
    ])
  })

  it('rejects every caller of a failed request and goes on with the next', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send, { inFlightMax: 1 })
    const failed = [b.settle('a', { kind: 'ack' }), b.settle('b', { kind: 'ack' })]
    await turn()
    const next = b.settle('c', { kind: 'ack' })
    sent[0]?.fail(new Error('down'))
    for (const f of failed) await expect(f).rejects.toThrow('down')
    expect(sent[1]?.ids).toEqual(['c'])
    sent[1]?.answer()
    expect((await next).leaseId).toBe('c')
  })

  it('flushAll sends everything at once, whatever is in flight', async () => {
    const { sent, send } = manualSend()
    const b = new SettleBatcher(send, { inFlightMax: 1 })
    void b.settle('a', { kind: 'ack' })
    await turn()
    void b.settle('b', { kind: 'extend', extendMs: 10 })
    b.flushAll()
    expect(sent.map((r) => r.ids)).toEqual([['a'], ['b']])
  })
})

describe('resentResults', () => {
  const r = (outcome: LeaseOutcome): LeaseResult => ({ leaseId: 'x', outcome, deadlineMs: 0 })
  const { OK, UNKNOWN, EXPIRED } = {
    OK: LeaseOutcome.LEASE_OUTCOME_OK,
    UNKNOWN: LeaseOutcome.LEASE_OUTCOME_UNKNOWN,
    EXPIRED: LeaseOutcome.LEASE_OUTCOME_EXPIRED,
  }
  const outcomes = (s: Settlement) => resentResults(s, [r(OK), r(UNKNOWN), r(EXPIRED)]).map((x) => x.outcome)

  it('counts what an earlier copy of an ack or nack did as done, and nothing else', () => {
    // An ack: the lease is gone (that copy deleted the message); an expired lease stays lost.
    expect(outcomes({ kind: 'ack' })).toEqual([OK, OK, EXPIRED])
    // A nack: gone or expired, the message was or will be delivered again, as asked.
    expect(outcomes({ kind: 'nack', delayMs: 0 })).toEqual([OK, OK, OK])
    // An extend: its retry applies again and answers for itself.
    expect(outcomes({ kind: 'extend', extendMs: 100 })).toEqual([OK, UNKNOWN, EXPIRED])
  })
})
