import { MemoryEngine } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { type CommandResult, DirectPartition, type Lease } from '../src/index'

const body = new Uint8Array(4)

async function fill(q: DirectPartition, counts: Record<number, number>, nowMs: number): Promise<void> {
  for (const [w, n] of Object.entries(counts)) {
    for (let left = n; left > 0; left -= 500) {
      const messages = Array.from({ length: Math.min(500, left) }, () => ({ weight: Number(w), body }))
      const r = await q.apply({ type: 'enqueue', messages }, nowMs)
      expect(r.type).toBe('enqueue')
    }
  }
}

function leases(r: CommandResult): readonly Lease[] {
  if (r.type !== 'lease') throw new Error(`expected a lease result, got ${r.type}`)
  return r.leases
}

describe('weighted fair dequeue through the partition', () => {
  it('shares leases in proportion to weight within the bound, FIFO within a weight, in any batch size', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1), { shareWindowLeases: 1000 })
    await fill(q, { 1: 300, 10: 3000, 100: 30_000 }, 1_000)
    const order: Lease[] = []
    for (const max of [1, 7, 100, 1000, 333, 2, 1000, 1000])
      order.push(
        ...leases(await q.apply({ type: 'lease', consumerId: 'c', max, visibilityMs: 60_000 }, 2_000)),
      )
    expect(order).toHaveLength(3443)
    const total = 111
    const served = new Map<number, number>()
    const lastId = new Map<number, number>()
    let lo = new Map<number, number>()
    let hi = new Map<number, number>()
    order.forEach((l, t) => {
      expect(l.messageId).toBeGreaterThan(lastId.get(l.weight) ?? 0) // FIFO within a weight
      lastId.set(l.weight, l.messageId)
      served.set(l.weight, (served.get(l.weight) ?? 0) + 1)
      for (const w of [1, 10, 100]) {
        const d = (served.get(w) ?? 0) - ((t + 1) * w) / total
        lo = lo.set(w, Math.min(lo.get(w) ?? 0, d))
        hi = hi.set(w, Math.max(hi.get(w) ?? 0, d))
      }
    })
    for (const w of [1, 10, 100])
      expect((hi.get(w) ?? 0) - (lo.get(w) ?? 0)).toBeLessThanOrEqual(1 + w / total + 1e-9)
    const stats = await q.stats(3_000)
    for (const s of stats.weights) {
      expect(s.targetShare).toBeCloseTo(s.weight / total, 9)
      expect(Math.abs(s.achievedShare - s.weight / total)).toBeLessThanOrEqual(2 / 1000)
    }
  })

  it('is work-conserving: a lone weight gets every lease, and an emptied weight drops out', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
    await fill(q, { 1000: 3, 1: 10 }, 1)
    const got = leases(await q.apply({ type: 'lease', consumerId: 'c', max: 13, visibilityMs: 10 }, 2))
    // both start at pass 0: 1000 wins the tie, then 1 (pass 0 < 1/1000); once 1000 is empty, 1 takes all
    expect(got.map((l) => l.weight)).toEqual([1000, 1, 1000, 1000, ...Array(9).fill(1)])
  })

  it('serves weight 1 at least once per 1001 leases against weight 1000', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
    await fill(q, { 1: 20, 1000: 12_000 }, 1)
    const order: Lease[] = []
    for (let i = 0; i < 12; i++)
      order.push(
        ...leases(await q.apply({ type: 'lease', consumerId: 'c', max: 1000, visibilityMs: 60_000 }, 2)),
      )
    const at = order.flatMap((l, i) => (l.weight === 1 ? [i] : []))
    expect(at.length).toBeGreaterThanOrEqual(11)
    for (let i = 1; i < at.length; i++)
      expect((at[i] as number) - (at[i - 1] as number)).toBeLessThanOrEqual(1001)
    expect(at[0]).toBeLessThanOrEqual(1001)
  })

  it('gives a weight that was idle no burst when its messages arrive', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
    await fill(q, { 1: 5000, 4: 4 }, 1)
    leases(await q.apply({ type: 'lease', consumerId: 'c', max: 1000, visibilityMs: 60_000 }, 2)) // weight 4 drains, 1 runs alone
    await fill(q, { 4: 1000 }, 3)
    const next = leases(await q.apply({ type: 'lease', consumerId: 'c', max: 100, visibilityMs: 60_000 }, 4))
    const fours = next.filter((l) => l.weight === 4).length
    expect(fours).toBeGreaterThanOrEqual(79)
    expect(fours).toBeLessThanOrEqual(81)
  })

  it('strict mode serves the highest weight first and can be switched per queue', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1), { scheduling: 'strict' })
    await fill(q, { 1: 5, 2: 5, 3: 5 }, 1)
    const got = leases(await q.apply({ type: 'lease', consumerId: 'c', max: 12, visibilityMs: 60_000 }, 2))
    expect(got.map((l) => l.weight)).toEqual([3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 1, 1])
    expect((await q.stats(2)).weights.map((w) => w.targetShare)).toEqual([1, 0, 0])
    await fill(q, { 3: 10 }, 3)
    expect(await q.apply({ type: 'configure', config: { scheduling: 'fair' } }, 3)).toEqual({
      type: 'configure',
    })
    const fair = leases(await q.apply({ type: 'lease', consumerId: 'c', max: 4, visibilityMs: 60_000 }, 4))
    expect(fair.map((l) => l.weight)).toEqual([3, 1, 3, 3])
  })

  it('keeps the weight of redelivered messages', async () => {
    const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
    await fill(q, { 7: 2, 1: 2 }, 1)
    const first = leases(await q.apply({ type: 'lease', consumerId: 'c', max: 4, visibilityMs: 10 }, 2))
    const again = leases(await q.apply({ type: 'lease', consumerId: 'c', max: 4, visibilityMs: 10 }, 12))
    expect(again.map((l) => [l.messageId, l.weight]).sort()).toEqual(
      first.map((l) => [l.messageId, l.weight]).sort(),
    )
    expect(again.every((l) => l.deliveryCount === 2)).toBe(true)
  })
})
