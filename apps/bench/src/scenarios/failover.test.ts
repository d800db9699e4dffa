import { describe, expect, it } from 'vitest'
import type { ScenarioResult } from '../result'
import { failoverFailures } from './failover'

const result = (metrics: Record<string, number>): ScenarioResult => ({
  scenario: 'failover',
  params: {},
  metrics: { sent: 100, acked: 100, failedSends: 0, unrecoveredPartitions: 0, lost: 0, ...metrics },
  latency: {},
})

describe('failoverFailures', () => {
  it('passes a run where every send was acked, every partition recovered and nothing was lost', () => {
    expect(failoverFailures(result({}))).toEqual([])
  })

  // The audit's case: only `lost` failed a run; failed sends and a partition that never
  // recovered read as a pass.
  it('fails a run with failed sends or a partition that never acked after the fault', () => {
    expect(failoverFailures(result({ failedSends: 12 }))).toEqual(['12 sends failed'])
    expect(failoverFailures(result({ unrecoveredPartitions: 1 }))).toEqual([
      '1 partition(s) never acked after the fault',
    ])
  })

  it('fails on lost messages, and on a drain that stopped before it could tell (not counted as lost)', () => {
    expect(failoverFailures(result({ lost: 3 }))).toEqual(['3 acknowledged messages lost'])
    const { lost: _, ...capped } = result({}).metrics
    expect(failoverFailures({ ...result({}), metrics: { ...capped, unseenAtDrainEnd: 40 } })).toEqual([
      'loss not determined: the drain stopped with 40 acknowledged messages not yet seen',
    ])
  })
})
