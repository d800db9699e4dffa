import { describe, expect, it } from 'vitest'
import type { QueueSample } from '../api-types'
import { shareLines, weightColour } from './chart'

const depth = { ready: 0, delayed: 0, leased: 0, dead: 0, waiting: 0, oldestAgeMs: 0 }
const counters = { enqueued: 0, delivered: 0, acked: 0, nacked: 0, expired: 0, deadLettered: 0, discarded: 0 }
const sample = (atMs: number, weights: [number, number, number][]): QueueSample => ({
  atMs,
  depth,
  counters,
  weights: weights.map(([weight, targetShare, achievedShare]) => ({
    weight,
    ready: 1,
    targetShare,
    achievedShare,
  })),
})

describe('shareLines', () => {
  const box = { width: 100, height: 50, spanMs: 1_000, endMs: 2_000 }

  it('scales time to x and share to y (1 at the top), per weight and kind, sorted', () => {
    const lines = shareLines(
      [
        sample(1_000, [
          [3, 0.75, 0.5],
          [1, 0.25, 0.5],
        ]),
        sample(2_000, [
          [3, 0.75, 0.8],
          [1, 0.25, 0.2],
        ]),
      ],
      box,
    )
    expect(lines).toEqual([
      { weight: 1, kind: 'target', points: '0,37.5 100,37.5' },
      { weight: 1, kind: 'achieved', points: '0,25 100,40' },
      { weight: 3, kind: 'target', points: '0,12.5 100,12.5' },
      { weight: 3, kind: 'achieved', points: '0,25 100,10' },
    ])
  })

  it('leaves out samples older than the span and clamps shares into [0, 1]', () => {
    const lines = shareLines([sample(500, [[1, 0.5, 0.5]]), sample(1_500, [[1, 1.2, -0.1]])], box)
    expect(lines).toEqual([
      { weight: 1, kind: 'target', points: '50,0' },
      { weight: 1, kind: 'achieved', points: '50,50' },
    ])
  })

  it('gives a weight that appears later a line that starts there', () => {
    const lines = shareLines(
      [
        sample(1_000, [[1, 1, 1]]),
        sample(2_000, [
          [1, 0.5, 0.5],
          [2, 0.5, 0.5],
        ]),
      ],
      box,
    )
    expect(lines.find((l) => l.weight === 2 && l.kind === 'target')?.points).toBe('100,25')
  })
})

describe('weightColour', () => {
  it('is stable per weight and differs between neighbouring weights', () => {
    expect(weightColour(7)).toBe(weightColour(7))
    expect(weightColour(1)).not.toBe(weightColour(2))
  })
})
