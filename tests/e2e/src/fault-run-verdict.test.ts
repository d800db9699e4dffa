import { describe, expect, it } from 'vitest'
import { check } from './checker'
import { runFailed } from './fault-run'
import type { EnqueueOp } from './history'

// A run's verdict (runFaults and the faults script share it), on hand-made outcomes.

const send = (body: string, outcome: EnqueueOp['outcome'], extra: Partial<EnqueueOp> = {}): EnqueueOp => ({
  kind: 'enqueue',
  worker: 'p0',
  body,
  startMs: 0,
  endMs: 10,
  outcome,
  ...extra,
})

const clean = { unacked: 0, drained: true, problems: [], crashes: [], faults: 12 }

describe('runFailed', () => {
  it('passes a run that acknowledged enqueues and found nothing wrong, fails one that lost one', () => {
    const report = check([send('a', 'ok', { partition: 0, id: 1 })])
    expect(report.lost).toBe(1)
    expect(runFailed({ ...clean, report })).toBe(true)
    const delivered = check([
      send('a', 'ok', { partition: 0, id: 1 }),
      {
        kind: 'lease',
        worker: 'c0',
        partition: 0,
        startMs: 20,
        endMs: 30,
        outcome: 'ok',
        visibilityMs: 2000,
        messages: [
          { body: 'a', partition: 0, id: 1, leaseId: '1.1', deliveryCount: 1, weight: 1, deadlineMs: 2025 },
        ],
      },
    ])
    expect(runFailed({ ...clean, report: delivered })).toBe(false)
  })

  it('fails a run in which no enqueue was acknowledged: with nothing stored, nothing could be lost', () => {
    // Every send failed storing nothing (UNAVAILABLE: not refused) or ended unknown: the
    // checker finds nothing wrong, the drain finds an empty queue, and the run proved nothing.
    const report = check([
      send('p0-0', 'fail', { error: 'UNAVAILABLE' }),
      send('p0-1', 'info', { error: 'UNAVAILABLE' }),
    ])
    expect(report.anomalies).toEqual([])
    expect(runFailed({ ...clean, report })).toBe(true)
  })
})
