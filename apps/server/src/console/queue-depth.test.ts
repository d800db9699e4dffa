import type { PartitionStats, QueueRoute } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { queueFigures, storedMessages } from './queue-depth'

const weight = (w: number, ready: number, target: number, achieved: number, oldestAgeMs = 0) => ({
  weight: w,
  ready,
  delayed: 1,
  leased: 2,
  dead: 3,
  oldestAgeMs,
  targetShare: target,
  achievedShare: achieved,
})

const stats: PartitionStats[] = [
  {
    queue: 'q',
    partition: 1,
    groupId: 2,
    messages: 20,
    windowLeases: 300,
    waiting: 4,
    weights: [weight(1, 10, 0.25, 0.2, 500), weight(3, 4, 0.75, 0.8)],
  },
  {
    queue: 'q',
    partition: 0,
    groupId: 1,
    messages: 7,
    windowLeases: 100,
    waiting: 1,
    weights: [weight(1, 1, 1, 1, 900)],
  },
]

describe('queueFigures', () => {
  it('adds counts over partitions, keeps the largest oldest age, sorts weights and partitions', () => {
    const f = queueFigures(stats)
    expect(f.weights.map((w) => [w.weight, w.ready, w.delayed, w.leased, w.dead, w.oldestAgeMs])).toEqual([
      [1, 11, 2, 4, 6, 900],
      [3, 4, 1, 2, 3, 0],
    ])
    // Waiting for their key's turn (ordered keys): counted by partition, in no weight.
    expect(f.depth).toEqual({ ready: 15, delayed: 3, leased: 6, dead: 9, waiting: 5, oldestAgeMs: 900 })
    expect(storedMessages(f.depth)).toBe(38)
    expect(f.partitions.map((p) => p.partition)).toEqual([0, 1])
  })

  it("weights each partition's shares by its lease window (a weight missing from a partition counts 0 there)", () => {
    const [w1, w3] = queueFigures(stats).weights
    expect(w1?.targetShare).toBeCloseTo(0.25 * 0.75 + 1 * 0.25)
    expect(w1?.achievedShare).toBeCloseTo(0.2 * 0.75 + 1 * 0.25)
    expect(w3?.targetShare).toBeCloseTo(0.75 * 0.75)
    expect((w1?.achievedShare ?? 0) + (w3?.achievedShare ?? 0)).toBeCloseTo(1)
  })

  it('counts partitions equally when none leased recently, and takes leaders from the route', () => {
    const idle = stats.map((p) => ({ ...p, windowLeases: 0 }))
    const route = {
      partitions: [
        { partition: 0, leaderId: 'n2' },
        { partition: 1, leaderId: 'n3' },
      ],
    } as QueueRoute
    const f = queueFigures(idle, route)
    expect(f.weights[0]?.targetShare).toBeCloseTo((0.25 + 1) / 2)
    expect(f.partitions.map((p) => p.leaderId)).toEqual(['n2', 'n3'])
  })

  it('is all zeros for a queue without partitions', () => {
    expect(queueFigures([])).toEqual({
      depth: { ready: 0, delayed: 0, leased: 0, dead: 0, waiting: 0, oldestAgeMs: 0 },
      weights: [],
      partitions: [],
      counters: { enqueued: 0, delivered: 0, acked: 0, nacked: 0, expired: 0, deadLettered: 0, discarded: 0 },
    })
  })
})
