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

/**
 * The scheduler's rules in exact arithmetic without renormalisation (bigint numerators, a
 * pass may fall any distance below V): what WeightedScheduler computes, shifted by the
 * integers its renormalisations took off, but for the passes those clamped at 0.
 */
class ExactScheduler {
  /** Pass numerators over their weight; absent: 0. */
  readonly passNum = new Map<number, bigint>()
  vNum: bigint
  vDen: bigint
  readonly backlogged = new Set<number>()

  constructor(
    public mode: 'fair' | 'strict',
    vNum: number,
    vDen: number,
  ) {
    this.vNum = BigInt(vNum)
    this.vDen = BigInt(vDen)
  }

  pass(w: number): bigint {
    return this.passNum.get(w) ?? 0n
  }

  activate(w: number): void {
    const start = (this.vNum * BigInt(w) + this.vDen - 1n) / this.vDen
    if (this.pass(w) < start) this.passNum.set(w, start)
    this.backlogged.add(w)
  }

  /** The weight the next decision serves. */
  peek(): number | undefined {
    let best: number | undefined
    for (const w of this.backlogged) {
      if (best === undefined) best = w
      else if (this.mode === 'strict') best = Math.max(best, w)
      else {
        const l = this.pass(w) * BigInt(best)
        const r = this.pass(best) * BigInt(w)
        if (l < r || (l === r && w > best)) best = w
      }
    }
    return best
  }

  next(): number | undefined {
    const w = this.peek()
    if (w === undefined) return undefined
    const m = this.pass(w)
    if (m * this.vDen > this.vNum * BigInt(w)) {
      this.vNum = m
      this.vDen = BigInt(w)
    }
    this.passNum.set(w, m + 1n)
    return w
  }

  setMode(mode: 'fair' | 'strict'): void {
    if (mode === this.mode) return
    this.mode = mode
    for (const w of this.backlogged) this.activate(w)
  }
}

describe('WeightedScheduler, renormalisation (README, "State")', () => {
  const WEIGHTS = [1, 2, 3, 7, 500, 999, 1000] as const
  const op = fc.oneof(
    { weight: 6, arbitrary: fc.tuple(fc.constant('next' as const), fc.integer({ min: 1, max: 60 })) },
    { weight: 3, arbitrary: fc.tuple(fc.constant('toggle' as const), fc.constantFrom(...WEIGHTS)) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('fair' as const, 'strict' as const), fc.constant(0)) },
    { weight: 1, arbitrary: fc.tuple(fc.constant('restart' as const), fc.constant(0)) },
  )

  it('changes no strict decision, nor a fair one until strict mode serves a weight whose pass it clamped at 0', () => {
    /** Runs that renormalised; activations in fair mode of a weight whose pass was clamped. */
    let renormalised = 0
    let clampedThenActivated = 0
    fc.assert(
      fc.property(
        fc.array(op, { minLength: 40, maxLength: 150 }),
        fc.integer({ min: 1, max: 3000 }),
        fc.constantFrom('fair' as const, 'strict' as const),
        (ops, below, mode) => {
          // V starts up to 3 below the renormalisation point: (2^24·1000 − below) / 1000.
          const start = VIRTUAL_TIME_RENORMALIZE_AT * 1000 - below
          let s = new WeightedScheduler(mode)
          s.restore({ passes: [], virtualNum: start, virtualDen: 1000 })
          const exact = new ExactScheduler(mode, start, 1000)
          /** Whether strict mode served a weight whose pass a renormalisation clamped. */
          let tainted = false
          /** The integer part renormalisations took off V so far (exact V − the scheduler's). */
          const shift = () => {
            const [num, den] = s.virtualTime()
            const diff = exact.vNum * BigInt(den) - BigInt(num) * exact.vDen
            const d = exact.vDen * BigInt(den)
            expect(diff % d).toBe(0n)
            return diff / d
          }
          /** What the scheduler holds for weight w: the exact pass shifted, or 0 if below. */
          const expectedPassNum = (w: number, k: bigint) => {
            const m = exact.pass(w) - k * BigInt(w)
            return Number(m > 0n ? m : 0n)
          }
          for (const [kind, arg] of ops) {
            if (kind === 'next') {
              for (let i = 0; i < arg; i++) {
                const w = exact.peek()
                if (
                  !tainted &&
                  w !== undefined &&
                  s.mode === 'strict' &&
                  exact.pass(w) < shift() * BigInt(w)
                ) {
                  tainted = true
                }
                if (!tainted || s.mode === 'strict') expect(s.next()).toBe(exact.next())
                else {
                  s.next()
                  exact.next()
                }
              }
            } else if (kind === 'toggle') {
              if (exact.backlogged.has(arg)) {
                s.deactivate(arg)
                exact.backlogged.delete(arg)
              } else {
                const p = exact.pass(arg)
                if (!tainted && s.mode === 'fair' && p > 0n && p < shift() * BigInt(arg))
                  clampedThenActivated++
                s.activate(arg)
                exact.activate(arg)
              }
            } else if (kind === 'restart') {
              const restored = new WeightedScheduler(s.mode)
              restored.restore(s.state(), [...exact.backlogged])
              s = restored
            } else {
              s.setMode(kind)
              exact.setMode(kind)
            }
            if (tainted) continue
            const k = shift()
            for (const w of WEIGHTS) expect(s.passNumOf(w)).toBe(expectedPassNum(w, k))
          }
          const [num, den] = s.virtualTime()
          if (BigInt(num) * exact.vDen < exact.vNum * BigInt(den)) renormalised++
        },
      ),
      { numRuns: 150 },
    )
    // The runs reached the cases the claim is about.
    expect(renormalised).toBeGreaterThan(0)
    expect(clampedThenActivated).toBeGreaterThan(0)
  })

  it('clamps a strict-mode loser: served later, V moves earlier and fair decisions after a switch differ', () => {
    const decide = (startV: number) => {
      const s = new WeightedScheduler('strict')
      s.restore({ passes: [], virtualNum: startV, virtualDen: 1 })
      s.activate(3)
      s.activate(2) // both at V; weight 3 is served four times, weight 2 lags V by 1
      for (let i = 0; i < 4; i++) expect(s.next()).toBe(3)
      s.deactivate(3)
      for (let i = 0; i < 2; i++) expect(s.next()).toBe(2)
      s.setMode('fair')
      s.activate(3)
      return [s.next(), s.next(), s.next()]
    }
    // From V = 3 nothing is renormalised: fair mode starts weight 2 at 4, weight 3 at 4 1/3.
    expect(decide(3)).toEqual([2, 3, 2])
    // From V = 2^24 − 1 the fourth decision renormalises to V = 0: weight 2's pass, 1 below V,
    // would be −1 and is 0, so its two strict services take V to 1/2 (exactly, it stays at 0)
    // and fair mode starts weight 2 at 1, weight 3 at 2/3 (exactly: 0 and 1/3, as above).
    expect(decide(VIRTUAL_TIME_RENORMALIZE_AT - 1)).toEqual([3, 3, 2])
  })
})
