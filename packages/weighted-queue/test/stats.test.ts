import { MemoryEngine } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { DirectPartition, STATS_AGES_MAX } from '../src/index'

const body = new Uint8Array(4)

describe('stats of a partition with many weights', () => {
  it(`reads the oldest age of ${STATS_AGES_MAX} ready weights only, the lightest and the heaviest (one engine read each)`, async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
    const weights = Array.from({ length: 100 }, (_, i) => 10 * (i + 1)) // 10, 20, …, 1000
    const r = await q.apply({ type: 'enqueue', messages: weights.map((weight) => ({ weight, body })) }, 1_000)
    expect(r.type).toBe('enqueue')
    const stats = await q.stats(4_000)
    expect(stats.weights).toHaveLength(100)
    // The lightest weights get the smallest share: their heads are the ones that grow old.
    const read = new Set([...weights.slice(0, STATS_AGES_MAX / 2), ...weights.slice(-STATS_AGES_MAX / 2)])
    for (const w of stats.weights) {
      expect(w.ready, `weight ${w.weight}`).toBe(1)
      expect(w.oldestAgeMs, `weight ${w.weight}`).toBe(read.has(w.weight) ? 3_000 : 0)
      expect(w.targetShare).toBeGreaterThan(0)
    }
  })

  it('reads every ready weight while there are no more than the bound', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
    await q.apply({ type: 'enqueue', messages: [{ weight: 1, body }] }, 1_000)
    await q.apply({ type: 'enqueue', messages: [{ weight: 1000, body }] }, 2_000)
    const ages = (await q.stats(5_000)).weights.map((w) => [w.weight, w.oldestAgeMs])
    expect(ages).toEqual([
      [1, 4_000],
      [1000, 3_000],
    ])
  })
})
