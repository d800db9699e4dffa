import { type BatchOp, MemoryEngine } from '@mq/kv-storage'
import * as fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { keyString, Overlay } from './overlay'

const TAG_AT = 1
const key = (tag: number, n: number) => Uint8Array.of(0x07, tag, n)

type Step =
  | { readonly kind: 'apply'; readonly writes: readonly (readonly [number, number, number | undefined])[] }
  | { readonly kind: 'flush'; readonly upTo: number }
  | { readonly kind: 'read'; readonly tag: number; readonly n: number; readonly limit: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('apply' as const),
    writes: fc.array(
      fc.tuple(
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 0, max: 7 }),
        fc.option(fc.nat(99), { nil: undefined }),
      ),
      { maxLength: 5 },
    ),
  }),
  fc.record({ kind: fc.constant('flush' as const), upTo: fc.nat(4) }),
  fc.record({
    kind: fc.constant('read' as const),
    tag: fc.integer({ min: 1, max: 3 }),
    n: fc.integer({ min: 0, max: 7 }),
    limit: fc.integer({ min: 1, max: 9 }),
  }),
)

describe('Overlay', () => {
  it('reads like the engine with every applied op written, whatever was flushed and released', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { maxLength: 60, size: 'max' }), async (steps) => {
        const engine = new MemoryEngine()
        const overlay = new Overlay(engine, TAG_AT)
        const truth = new Map<string, [Uint8Array, Uint8Array]>()
        const unwritten: { generation: number; ops: BatchOp[] }[] = []
        let generation = 0
        for (const s of steps) {
          if (s.kind === 'apply') {
            const ops: BatchOp[] = []
            overlay.track(++generation, ops)
            unwritten.push({ generation, ops })
            for (const [tag, n, v] of s.writes) {
              const k = key(tag, n)
              // ops are appended after track(), as an apply does
              if (v === undefined) {
                ops.push({ type: 'del', key: k })
                truth.delete(keyString(k))
              } else {
                ops.push({ type: 'put', key: k, value: Uint8Array.of(v) })
                truth.set(keyString(k), [k, Uint8Array.of(v)])
              }
            }
          } else if (s.kind === 'flush') {
            // write the oldest applies, in order, then release up to the last written one
            const batch = unwritten.splice(0, Math.min(s.upTo, unwritten.length))
            for (const b of batch) await engine.write(b.ops, { sync: false })
            const last = batch[batch.length - 1]
            if (last) overlay.release(last.generation)
          } else {
            const k = key(s.tag, s.n)
            expect(await overlay.get(k)).toEqual(truth.get(keyString(k))?.[1])
            const many = await overlay.getMany([key(s.tag, s.n), key(s.tag, (s.n + 3) % 8)])
            expect(many).toEqual([
              truth.get(keyString(key(s.tag, s.n)))?.[1],
              truth.get(keyString(key(s.tag, (s.n + 3) % 8)))?.[1],
            ])
            const span = { gte: key(s.tag, s.n), lt: Uint8Array.of(0x07, s.tag + 1) }
            const want = [...truth.values()]
              .filter(([kk]) => kk[TAG_AT] === s.tag && (kk[2] as number) >= s.n)
              .sort((a, b) => (a[0][2] as number) - (b[0][2] as number))
              .slice(0, s.limit)
            expect(await overlay.range(span, s.limit)).toEqual(want)
          }
        }
      }),
      { numRuns: 300 },
    )
  })

  it('indexes a newer apply from its start after an older, partly indexed one is released', async () => {
    const engine = new MemoryEngine()
    const overlay = new Overlay(engine, TAG_AT)
    const a: BatchOp[] = []
    overlay.track(1, a)
    a.push({ type: 'put', key: key(1, 1), value: Uint8Array.of(1) })
    expect(await overlay.get(key(1, 1))).toEqual(Uint8Array.of(1))
    const b: BatchOp[] = []
    overlay.track(2, b)
    b.push({ type: 'put', key: key(1, 2), value: Uint8Array.of(2) })
    await engine.write(a, { sync: false })
    overlay.release(1)
    expect(await overlay.get(key(1, 2))).toEqual(Uint8Array.of(2))
    expect(await overlay.range({ gte: key(1, 0), lt: key(2, 0) }, 5)).toEqual([
      [key(1, 1), Uint8Array.of(1)],
      [key(1, 2), Uint8Array.of(2)],
    ])
  })
})
