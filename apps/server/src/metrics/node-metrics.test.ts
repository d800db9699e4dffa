import type { PartitionStats } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import type { NodeView } from '../node-view'
import { NodeMetrics } from './node-metrics'

const PARTITIONS = 4

/** One event-loop turn. */
const turn = () => new Promise<void>((r) => setImmediate(r))

/** A view leading PARTITIONS partitions of queue `q`, each one's stats answered a turn after asked. */
function fakeView(): { view: NodeView; statsCalls: () => number } {
  let calls = 0
  const stats = async (): Promise<PartitionStats> => {
    calls++
    await turn()
    return {
      weights: [
        {
          weight: 1,
          ready: 5,
          delayed: 0,
          leased: 0,
          dead: 0,
          oldestAgeMs: 0,
          targetShare: 1,
          achievedShare: 1,
        },
      ],
      messages: 5,
      waiting: 0,
      windowLeases: 0,
    } as unknown as PartitionStats
  }
  const partitions = Array.from({ length: PARTITIONS }, (_, partition) => ({
    groupId: 1,
    queue: 'q',
    partition,
    stats,
  }))
  const view = {
    nodeId: 'n1',
    serving: () => true,
    failed: () => false,
    groups: () => [],
    ledPartitions: () => partitions,
    metaLeaderId: () => 'n1',
  } as unknown as NodeView
  return { view, statsCalls: () => calls }
}

const readySeries = (text: string) =>
  text.split('\n').filter((l) => l.startsWith('mq_queue_messages{') && l.includes('state="ready"')).length

describe('NodeMetrics.render', () => {
  it('gives concurrent scrapes every series: they share one collection', async () => {
    const metrics = new NodeMetrics('n1')
    const { view, statsCalls } = fakeView()
    expect(readySeries(await metrics.render(view))).toBe(PARTITIONS)
    const before = statsCalls()
    const first = metrics.render(view)
    // The first scrape has read some partitions and waits for the next one's stats.
    for (let i = 0; i < 3; i++) await turn()
    const second = metrics.render(view)
    const [a, b] = await Promise.all([first, second])
    expect([readySeries(a), readySeries(b)]).toEqual([PARTITIONS, PARTITIONS])
    // One collection for both.
    expect(statsCalls() - before).toBe(PARTITIONS)
    // Once it is done, a scrape collects afresh.
    await metrics.render(view)
    expect(statsCalls() - before).toBe(2 * PARTITIONS)
  })
})
