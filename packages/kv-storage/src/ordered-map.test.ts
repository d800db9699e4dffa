import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compareKeys } from './engine'
import { OrderedMap } from './ordered-map'

const k16 = (n: number) => Uint8Array.of(n >>> 8, n & 0xff)

describe('OrderedMap', () => {
  it('agrees with a Map model through splits, merges and frozen views', () => {
    const cmd = fc.oneof(
      fc.record({ t: fc.constant('set' as const), k: fc.nat({ max: 3000 }) }),
      fc.record({ t: fc.constant('del' as const), k: fc.nat({ max: 3000 }) }),
      fc.record({ t: fc.constant('clear' as const), k: fc.nat({ max: 3000 }), n: fc.nat({ max: 400 }) }),
      fc.record({ t: fc.constant('freeze' as const) }),
    )
    fc.assert(
      fc.property(fc.array(cmd, { minLength: 1, maxLength: 600 }), fc.integer(), (cmds, seed) => {
        const map = new OrderedMap()
        const model = new Map<number, number>()
        const views: { view: ReturnType<OrderedMap['freeze']>; model: Map<number, number> }[] = []
        let v = seed
        for (const c of cmds) {
          if (c.t === 'set') {
            // Bulk inserts make the tree several levels deep.
            for (let i = 0; i < 20; i++) {
              const key = (c.k + i * 7) % 3001
              v++
              map.set(k16(key), Uint8Array.of(v & 0xff))
              model.set(key, v & 0xff)
            }
          } else if (c.t === 'del') {
            expect(map.delete(k16(c.k))).toBe(model.delete(c.k))
          } else if (c.t === 'clear') {
            const n = map.deleteRange(k16(c.k), k16(c.k + c.n))
            let m = 0
            for (const key of [...model.keys()])
              if (key >= c.k && key < c.k + c.n) {
                model.delete(key)
                m++
              }
            expect(n).toBe(m)
          } else {
            views.push({ view: map.freeze(), model: new Map(model) })
          }
          expect(map.size).toBe(model.size)
        }
        const expectSame = (
          got: readonly (readonly [Uint8Array, Uint8Array])[],
          want: Map<number, number>,
        ) => {
          const sorted = [...want.entries()].sort((a, b) => a[0] - b[0])
          expect(got.map(([k, val]) => [(k[0] as number) * 256 + (k[1] as number), val[0]])).toEqual(sorted)
        }
        expectSame(map.range({}), model)
        for (const { view, model: m } of views) {
          expectSame(OrderedMap.collect(view.root, {}), m)
          expect(view.size).toBe(m.size)
        }
        const rev = map.range({ reverse: true })
        for (let i = 1; i < rev.length; i++) {
          expect(compareKeys(rev[i - 1]![0], rev[i]![0])).toBeGreaterThan(0)
        }
        for (const key of [0, 17, 1500, 3000]) {
          const got = map.get(k16(key))
          expect(got === undefined ? undefined : got[0]).toBe(model.get(key))
        }
      }),
      { numRuns: 60 },
    )
  })

  it('handles 100k sequential inserts and head deletes in well under a second', () => {
    const map = new OrderedMap()
    const t0 = performance.now()
    const n = 100_000
    for (let i = 0; i < n; i++) map.set(Uint8Array.of(i >>> 16, (i >>> 8) & 0xff, i & 0xff), Uint8Array.of(1))
    for (let i = 0; i < n / 2; i++) map.delete(Uint8Array.of(i >>> 16, (i >>> 8) & 0xff, i & 0xff))
    expect(map.size).toBe(n / 2)
    expect(map.range({ limit: 1 })[0]?.[0]).toEqual(Uint8Array.of(0, 0xc3, 0x50))
    expect(performance.now() - t0).toBeLessThan(5000)
  })
})
