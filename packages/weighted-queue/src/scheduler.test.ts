import * as fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { VIRTUAL_TIME_RENORMALIZE_AT, WeightedScheduler } from './scheduler'

/** The README's share bound for weight w among k backlogged weights summing to W. */
const shareBound = (w: number, k: number, total: number) => 1 + ((k - 2) * w) / total
/** The README's wait bound: decisions for others between two services of w. */
const waitBound = (w: number, others: readonly number[]) =>
  others.reduce((a, j) => a + Math.floor(j / w) + 1, 0)

const weightSet = fc.uniqueArray(
  fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(1, 2, 3, 1000, 999)),
  { minLength: 1, maxLength: 7 },
)

/**
 * Runs `n` decisions with every weight of `ws` backlogged and returns, for each weight, the
 * spread max(D) − min(D) of D(t) = services(t) − t·w/W, which bounds the deviation in every
 * window of consecutive decisions, and the longest run of decisions without it.
 */
function run(s: WeightedScheduler, ws: readonly number[], n: number) {
  const total = ws.reduce((a, b) => a + b, 0)
  const served = new Map(ws.map((w) => [w, 0]))
  const lo = new Map(ws.map((w) => [w, 0]))
  const hi = new Map(ws.map((w) => [w, 0]))
  const lastAt = new Map(ws.map((w) => [w, -1]))
  const gap = new Map(ws.map((w) => [w, 0]))
  for (let t = 1; t <= n; t++) {
    const w = s.next() as number
    served.set(w, (served.get(w) as number) + 1)
    gap.set(w, Math.max(gap.get(w) as number, t - 1 - (lastAt.get(w) as number) - 1))
    lastAt.set(w, t - 1)
    for (const x of ws) {
      const d = (served.get(x) as number) - (t * x) / total
      lo.set(x, Math.min(lo.get(x) as number, d))
      hi.set(x, Math.max(hi.get(x) as number, d))
    }
  }
  for (const x of ws) gap.set(x, Math.max(gap.get(x) as number, n - 1 - (lastAt.get(x) as number)))
  return {
    total,
    served,
    spread: new Map(ws.map((w) => [w, (hi.get(w) as number) - (lo.get(w) as number)])),
    gap,
  }
}

describe('WeightedScheduler, fair mode', () => {
  it('keeps every weight within its share bound in every window while all are backlogged', () => {
    fc.assert(
      fc.property(weightSet, fc.integer({ min: 1, max: 3000 }), (ws, n) => {
        const s = new WeightedScheduler()
        for (const w of ws) s.activate(w)
        const r = run(s, ws, n)
        for (const w of ws) {
          expect(r.spread.get(w)).toBeLessThanOrEqual(shareBound(w, ws.length, r.total) + 1e-9)
        }
      }),
      { numRuns: 200 },
    )
  })

  it('never starves a weight longer than its wait bound (weight 1 against 1000: 1001 decisions)', () => {
    fc.assert(
      fc.property(weightSet, (ws) => {
        const s = new WeightedScheduler()
        for (const w of ws) s.activate(w)
        const r = run(s, ws, 4000)
        for (const w of ws) {
          const others = ws.filter((x) => x !== w)
          expect(r.gap.get(w)).toBeLessThanOrEqual(waitBound(w, others))
        }
      }),
      { numRuns: 100 },
    )
    const s = new WeightedScheduler()
    s.activate(1)
    s.activate(1000)
    const r = run(s, [1, 1000], 100_100)
    expect(r.gap.get(1)).toBeLessThanOrEqual(1001)
    expect(r.served.get(1)).toBe(100)
  })

  it('gives an idle weight no credit: after it returns, the window bound holds from its return', () => {
    fc.assert(
      fc.property(
        weightSet,
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 1, max: 2000 }),
        (ws, pick, idleN) => {
          if (ws.length < 2) return
          const idle = ws[pick % ws.length] as number
          const s = new WeightedScheduler()
          for (const w of ws) s.activate(w)
          run(s, ws, 50)
          s.deactivate(idle)
          run(
            s,
            ws.filter((w) => w !== idle),
            idleN,
          )
          s.activate(idle)
          const r = run(s, ws, 1000)
          expect(r.spread.get(idle)).toBeLessThanOrEqual(shareBound(idle, ws.length, r.total) + 1e-9)
          expect(r.served.get(idle)).toBeLessThanOrEqual(
            (1000 * idle) / r.total + shareBound(idle, ws.length, r.total),
          )
        },
      ),
      { numRuns: 200 },
    )
  })

  it('does not let a weight that left early jump ahead when it returns', () => {
    const s = new WeightedScheduler()
    s.activate(1)
    s.activate(2)
    const first = [s.next(), s.next(), s.next()]
    expect(first).toEqual([2, 1, 2])
    s.deactivate(1) // 1 was served at pass 0 → its pass is 1; V is 1/2
    s.activate(1)
    expect([s.next(), s.next(), s.next()]).toEqual([2, 1, 2])
  })

  it('is a no-op with nothing backlogged and rejects double activation', () => {
    const s = new WeightedScheduler()
    expect(s.next()).toBeUndefined()
    s.activate(5)
    expect(() => s.activate(5)).toThrow(/invariant/)
    s.deactivate(5)
    expect(() => s.deactivate(5)).toThrow(/invariant/)
  })

  it('renormalizes its virtual time without changing any decision', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('next', 'toggle'), fc.integer({ min: 1, max: 1000 })), {
          maxLength: 300,
        }),
        weightSet,
        (ops, ws) => {
          const k = VIRTUAL_TIME_RENORMALIZE_AT - 3
          const plain = new WeightedScheduler()
          const shifted = new WeightedScheduler()
          shifted.restore({ passes: ws.map((w) => [w, k * w] as const), virtualNum: k, virtualDen: 1 })
          for (const w of ws) {
            plain.activate(w)
            shifted.activate(w)
          }
          for (const [op, w] of ops) {
            if (op === 'next') {
              for (let i = 0; i < 20; i++) expect(shifted.next()).toBe(plain.next())
            } else if (plain.isBacklogged(w)) {
              plain.deactivate(w)
              shifted.deactivate(w)
            } else {
              plain.activate(w)
              shifted.activate(w)
            }
          }
          const [vNum, vDen] = shifted.virtualTime()
          if (ops.filter(([o]) => o === 'next').length * 20 > 2000) expect(vNum / vDen).toBeLessThan(k)
        },
      ),
      { numRuns: 60 },
    )
  })
})

describe('WeightedScheduler, strict mode', () => {
  it('always serves the highest backlogged weight', () => {
    fc.assert(
      fc.property(weightSet, (ws) => {
        const s = new WeightedScheduler('strict')
        for (const w of ws) s.activate(w)
        const top = Math.max(...ws)
        for (let i = 0; i < 50; i++) expect(s.next()).toBe(top)
        s.deactivate(top)
        if (ws.length > 1) expect(s.next()).toBe(Math.max(...ws.filter((w) => w !== top)))
      }),
    )
  })

  it('restores backlogged weights with their passes as stored: a restarted copy decides alike', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom('next', 'next', 'next', 'toggle', 'toggle', 'fair', 'strict', 'restart'),
            fc.constantFrom(1, 2, 3, 7),
          ),
          { maxLength: 200 },
        ),
        (ops) => {
          const live = new WeightedScheduler('strict')
          let copy = new WeightedScheduler('strict')
          for (const [op, w] of ops) {
            if (op === 'next') expect(copy.next()).toBe(live.next())
            else if (op === 'fair' || op === 'strict') {
              live.setMode(op)
              copy.setMode(op)
            } else if (op === 'restart') {
              // What QueuePartition.open does: passes and V as stored, the ready weights back.
              const restored = new WeightedScheduler(copy.mode)
              restored.restore(
                copy.state(),
                [...copy.backloggedWeights()].sort((a, b) => b - a),
              )
              expect(restored.takeDirty()).toEqual({ weights: [], virtual: false })
              copy = restored
            } else if (live.isBacklogged(w)) {
              live.deactivate(w)
              copy.deactivate(w)
            } else {
              live.activate(w)
              copy.activate(w)
            }
            expect(copy.state()).toEqual(live.state())
            // Dirty weights in one order on both: persist writes their records in it.
            expect(copy.takeDirty()).toEqual(live.takeDirty())
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('lifts the lagging passes on entering fair mode in ascending weight order, whatever the heap order', () => {
    const live = new WeightedScheduler('strict')
    for (const w of [1, 2, 3]) live.activate(w)
    for (let i = 0; i < 3; i++) expect(live.next()).toBe(3) // V = 2/3: weights 1 and 2 lag behind
    live.takeDirty()
    const restored = new WeightedScheduler('strict')
    restored.restore(live.state(), [3, 2, 1]) // its heap is laid out otherwise
    for (const s of [live, restored]) {
      s.setMode('fair')
      expect(s.takeDirty()).toEqual({ weights: [1, 2], virtual: false })
      expect(s.state().passes).toEqual([
        [1, 1],
        [2, 2],
        [3, 3],
      ])
    }
  })

  it('switching back to fair mode gives strict mode losers no burst', () => {
    const s = new WeightedScheduler('strict')
    s.activate(1)
    s.activate(3)
    for (let i = 0; i < 300; i++) s.next()
    s.setMode('fair')
    const r = run(s, [1, 3], 400)
    expect(r.spread.get(1)).toBeLessThanOrEqual(shareBound(1, 2, 4) + 1e-9)
    expect(r.served.get(1)).toBeLessThanOrEqual(101)
  })
})
