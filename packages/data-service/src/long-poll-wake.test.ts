import { describe, expect, it } from 'vitest'
import type { DataResult } from './data-group'
import { endsLongPolls, wakesLongPolls } from './long-poll-wake'

const applied = (result: unknown): DataResult => ({ type: 'applied', result }) as DataResult

describe('wakesLongPolls', () => {
  it('wakes on what may make messages ready', () => {
    for (const r of [
      applied({ type: 'enqueue', ids: [1], duplicate: false }),
      applied({ type: 'nack', statuses: ['ok'] }),
      applied({ type: 'redriveDead', ids: [3], deadEnd: 0 }),
      applied({ type: 'tick' }),
      applied({ type: 'configure' }),
      { type: 'opened' } as DataResult,
      { type: 'imported', complete: true } as DataResult,
    ]) {
      expect(wakesLongPolls(r)).toBe(true)
    }
  })

  it('does not wake on leases (empty or not), acks, extends, purges, rejections and refusals', () => {
    for (const r of [
      applied({ type: 'lease', leases: [] }),
      applied({ type: 'ack', statuses: ['ok'] }),
      applied({ type: 'extend', statuses: ['ok'], deadlinesMs: [5] }),
      applied({ type: 'purgeReady', ids: [] }),
      applied({ type: 'rejected', error: new Error('no') }),
      { type: 'refused', reason: 'not-held', message: 'x' } as DataResult,
      { type: 'fenced' } as DataResult,
    ]) {
      expect(wakesLongPolls(r)).toBe(false)
    }
  })

  it("wakes on an ack, lease or purge that handed an ordered key's turn on", () => {
    for (const result of [
      { type: 'ack', statuses: ['ok'] },
      { type: 'lease', leases: [] },
      { type: 'purgeReady', ids: [4] },
    ]) {
      expect(wakesLongPolls({ type: 'applied', result, turnsPassed: 1 } as DataResult)).toBe(true)
    }
  })
})

describe('endsLongPolls', () => {
  it('ends the polls of a partition fenced, dropped or retired (result fenced), and of nothing else', () => {
    expect(endsLongPolls({ type: 'fenced' } as DataResult)).toBe(true)
    expect(endsLongPolls({ type: 'dropped' } as DataResult)).toBe(true)
    for (const r of [
      applied({ type: 'enqueue', ids: [1], duplicate: false }),
      applied({ type: 'lease', leases: [] }),
      { type: 'opened' } as DataResult,
      { type: 'unfenced' } as DataResult,
      { type: 'refused', reason: 'fenced', message: 'x' } as DataResult,
    ]) {
      expect(endsLongPolls(r)).toBe(false)
    }
  })
})
