import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { BatchOp, Engine, KeyRange } from '../src/engine'
import { compareKeys, inRange } from '../src/engine'
import { ClosedError, InvalidArgumentError } from '../src/errors'

/** Creates a fresh, empty engine and later disposes of it (closing it is the suite's job). */
export interface EngineFactory {
  create(): Promise<Engine>
  /** Removes what `create` made on disk, after the engine is closed. */
  dispose(): Promise<void>
}

const b = (...xs: number[]) => Uint8Array.from(xs)
const s = (text: string) => new TextEncoder().encode(text)
const hex = (u: Uint8Array) => Buffer.from(u).toString('hex')

/** The one storage suite, run against every engine (see engine-conformance.test.ts). */
export function describeEngineConformance(name: string, factory: EngineFactory): void {
  describe(`Engine conformance: ${name}`, () => {
    let engine: Engine

    beforeEach(async () => {
      engine = await factory.create()
    })
    afterEach(async () => {
      await engine.close()
      await factory.dispose()
    })

    async function fill(keys: number[]): Promise<void> {
      await engine.write(
        keys.map((k) => ({ type: 'put', key: b(k), value: b(k, k) })),
        { sync: false },
      )
    }
    /** The first byte of each key of `range`, read with `range` and with `keys` (they agree). */
    const keysOf = async (range: KeyRange) => {
      const viaRange = (await engine.range(range)).map(([k]) => k[0])
      expect((await engine.keys(range)).map((k) => k[0])).toEqual(viaRange)
      return viaRange
    }

    it('get returns undefined for a missing key and the value for a present one', async () => {
      expect(await engine.get(s('a'))).toBeUndefined()
      await engine.write([{ type: 'put', key: s('a'), value: s('1') }], { sync: true })
      expect(await engine.get(s('a'))).toEqual(s('1'))
      await engine.write([{ type: 'put', key: s('a'), value: s('2') }], { sync: false })
      expect(await engine.get(s('a'))).toEqual(s('2'))
    })

    it('stores empty values and binary keys with zero and 0xff bytes', async () => {
      await engine.write(
        [
          { type: 'put', key: b(0), value: b() },
          { type: 'put', key: b(0xff, 0, 0xff), value: b(0, 0, 0) },
        ],
        { sync: false },
      )
      expect(await engine.get(b(0))).toEqual(b())
      expect(await engine.get(b(0xff, 0, 0xff))).toEqual(b(0, 0, 0))
      expect(await engine.get(b(0xff))).toBeUndefined()
    })

    it('getMany returns values in the order asked, undefined where absent', async () => {
      await fill([1, 3])
      expect(await engine.getMany([b(3), b(2), b(1), b(3)])).toEqual([b(3, 3), undefined, b(1, 1), b(3, 3)])
      expect(await engine.getMany([])).toEqual([])
    })

    it('a batch applies its ops in order: put then del, del then put, clear then put', async () => {
      await engine.write(
        [
          { type: 'put', key: b(1), value: b(1) },
          { type: 'del', key: b(1) },
          { type: 'del', key: b(2) },
          { type: 'put', key: b(2), value: b(2) },
          { type: 'put', key: b(3), value: b(3) },
          { type: 'put', key: b(4), value: b(4) },
          { type: 'clear', gte: b(3), lt: b(5) },
          { type: 'put', key: b(4), value: b(44) },
          { type: 'put', key: b(5), value: b(5) },
          { type: 'put', key: b(5), value: b(55) },
        ],
        { sync: true },
      )
      expect(await engine.range({})).toEqual([
        [b(2), b(2)],
        [b(4), b(44)],
        [b(5), b(55)],
      ])
    })

    it('clear removes exactly [gte, lt)', async () => {
      await fill([1, 2, 3, 4, 5, 6])
      await engine.write([{ type: 'clear', gte: b(2), lt: b(5) }], { sync: false })
      expect(await keysOf({})).toEqual([1, 5, 6])
      await engine.write([{ type: 'clear', gte: b(5), lt: b(5) }], { sync: false })
      expect(await keysOf({})).toEqual([1, 5, 6])
      await engine.write([{ type: 'clear', gte: b(0), lt: b(0xff) }], { sync: false })
      expect(await keysOf({})).toEqual([])
    })

    it('clear covers keys that extend the lower bound and stops before the upper one', async () => {
      await engine.write(
        [b(1), b(1, 0), b(1, 0xff, 0xff), b(2), b(2, 0)].map((key) => ({ type: 'put', key, value: b() })),
        { sync: false },
      )
      await engine.write([{ type: 'clear', gte: b(1), lt: b(2) }], { sync: false })
      expect((await engine.range({})).map(([k]) => hex(k))).toEqual(['02', '0200'])
    })

    it('a malformed batch is rejected and changes nothing', async () => {
      await fill([1])
      const bad = [
        { type: 'put', key: b(2), value: b(2) },
        { type: 'put', key: 'not bytes', value: b(3) },
      ] as unknown as BatchOp[]
      await expect(engine.write(bad, { sync: true })).rejects.toBeInstanceOf(InvalidArgumentError)
      expect(await keysOf({})).toEqual([1])
    })

    it('iterates forward and in reverse with every bound kind and a limit', async () => {
      await fill([1, 2, 3, 4, 5, 6, 7, 8, 9])
      expect(await keysOf({})).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9])
      expect(await keysOf({ reverse: true })).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1])
      expect(await keysOf({ gte: b(3), lt: b(6) })).toEqual([3, 4, 5])
      expect(await keysOf({ gt: b(3), lte: b(6) })).toEqual([4, 5, 6])
      expect(await keysOf({ gte: b(3), lte: b(6), reverse: true })).toEqual([6, 5, 4, 3])
      expect(await keysOf({ gt: b(3), lt: b(6), reverse: true })).toEqual([5, 4])
      expect(await keysOf({ gt: b(7) })).toEqual([8, 9])
      expect(await keysOf({ lt: b(3) })).toEqual([1, 2])
      expect(await keysOf({ lte: b(3), reverse: true })).toEqual([3, 2, 1])
      expect(await keysOf({ limit: 3 })).toEqual([1, 2, 3])
      expect(await keysOf({ limit: 3, reverse: true })).toEqual([9, 8, 7])
      expect(await keysOf({ gte: b(4), limit: 2, reverse: true })).toEqual([9, 8])
      expect(await keysOf({ lt: b(4), limit: 2, reverse: true })).toEqual([3, 2])
      expect(await keysOf({ limit: 0 })).toEqual([])
      expect(await keysOf({ limit: 100 })).toHaveLength(9)
      expect(await keysOf({ gte: b(6), lt: b(3) })).toEqual([])
      expect(await keysOf({ gt: b(5), lt: b(5) })).toEqual([])
      expect(await keysOf({ gte: b(5), lte: b(5) })).toEqual([5])
      // Both kinds of one bound: the stricter one wins.
      expect(await keysOf({ gte: b(3), gt: b(4), lt: b(7), lte: b(8) })).toEqual([5, 6])
      // Bounds that lie between stored keys.
      expect(await keysOf({ gte: b(3, 5), lt: b(6, 0) })).toEqual([4, 5, 6])
      expect(await keysOf({ gt: b(0), lte: b(2, 0) })).toEqual([1, 2])
    })

    it('a limit of 2^31 or more reads what lies in the range (LevelDB took it modulo 2^32: 2^32 read nothing)', async () => {
      await fill([1, 2, 3, 4, 5])
      for (const limit of [2 ** 31, 2 ** 32, 2 ** 32 + 3, 2 ** 40 + 1, Number.MAX_SAFE_INTEGER - 1]) {
        expect(await keysOf({ limit }), `limit ${limit}`).toEqual([1, 2, 3, 4, 5])
        expect(await keysOf({ limit, reverse: true }), `limit ${limit}`).toEqual([5, 4, 3, 2, 1])
        const snap = await engine.snapshot()
        expect((await snap.range({ limit, gt: b(1) })).map(([k]) => k[0])).toEqual([2, 3, 4, 5])
        expect((await snap.keys({ limit })).map((k) => k[0])).toEqual([1, 2, 3, 4, 5])
        await snap.close()
      }
    })

    it('rejects a negative or fractional limit, and a bytesMax not above 0', async () => {
      await expect(engine.range({ limit: -1 })).rejects.toBeInstanceOf(InvalidArgumentError)
      await expect(engine.range({ limit: 1.5 })).rejects.toBeInstanceOf(InvalidArgumentError)
      await expect(engine.keys({ limit: -1 })).rejects.toBeInstanceOf(InvalidArgumentError)
      await expect(engine.range({ bytesMax: 0 })).rejects.toBeInstanceOf(InvalidArgumentError)
    })

    it('stops a range at the entry that brings it to bytesMax, whatever the sizes, on snapshots too', async () => {
      // Keys of 1 byte: 10 values of 100 bytes, then 5 of 3 MiB, then small ones again.
      const sizes = [...Array(10).fill(100), ...Array(5).fill(3 << 20), ...Array(5).fill(100)]
      await engine.write(
        sizes.map((n, i) => ({ type: 'put' as const, key: b(i + 1), value: new Uint8Array(n).fill(i) })),
        { sync: false },
      )
      const read = async (reader: typeof engine | Awaited<ReturnType<typeof engine.snapshot>>, r: object) =>
        (await reader.range(r)).map(([k]) => k[0])
      // 10 × 101 bytes, then one large value passes 2,000 bytes.
      expect(await read(engine, { bytesMax: 2_000 })).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])
      // At least one entry, however large.
      expect(await read(engine, { gte: b(11), bytesMax: 1 })).toEqual([11])
      expect(await read(engine, { gte: b(11), bytesMax: 7 << 20 })).toEqual([11, 12, 13])
      expect(await read(engine, { gte: b(11), bytesMax: 7 << 20, limit: 2 })).toEqual([11, 12])
      expect(await read(engine, { gte: b(15), bytesMax: 1e12 })).toEqual([15, 16, 17, 18, 19, 20])
      expect(await read(engine, { reverse: true, bytesMax: 250 })).toEqual([20, 19, 18])
      const snap = await engine.snapshot()
      try {
        expect(await read(snap, { gte: b(11), bytesMax: 7 << 20 })).toEqual([11, 12, 13])
      } finally {
        await snap.close()
      }
    })

    it('keys reads no values: bytesMax bounds range only, keys is bounded by its limit', async () => {
      await engine.write(
        [1, 2, 3].map((i) => ({ type: 'put' as const, key: b(i), value: new Uint8Array(10) })),
        { sync: false },
      )
      expect((await engine.keys({ bytesMax: 5 })).map((k) => k[0])).toEqual([1, 2, 3])
      expect((await engine.keys({ bytesMax: 5, limit: 2 })).map((k) => k[0])).toEqual([1, 2])
      const snap = await engine.snapshot()
      try {
        expect((await snap.keys({ bytesMax: 5 })).map((k) => k[0])).toEqual([1, 2, 3])
      } finally {
        await snap.close()
      }
    })

    it('a snapshot does not see writes made after it, the engine does', async () => {
      await fill([1, 2, 3])
      const snap = await engine.snapshot()
      await engine.write(
        [
          { type: 'put', key: b(2), value: b(99) },
          { type: 'del', key: b(1) },
          { type: 'put', key: b(4), value: b(4) },
          { type: 'clear', gte: b(3), lt: b(4) },
        ],
        { sync: false },
      )
      expect(await snap.get(b(2))).toEqual(b(2, 2))
      expect(await snap.getMany([b(1), b(4)])).toEqual([b(1, 1), undefined])
      expect((await snap.range({})).map(([k]) => k[0])).toEqual([1, 2, 3])
      expect((await snap.range({ reverse: true, limit: 1 })).map(([k]) => k[0])).toEqual([3])
      expect((await snap.keys({ gt: b(1) })).map((k) => k[0])).toEqual([2, 3])
      expect(await keysOf({})).toEqual([2, 4])
      expect(await engine.get(b(2))).toEqual(b(99))
      await snap.close()
      await expect(snap.get(b(2))).rejects.toBeInstanceOf(ClosedError)
    })

    it('readers see a batch entirely or not at all, also while it is being written', async () => {
      const ops: BatchOp[] = Array.from({ length: 500 }, (_, i) => ({
        type: 'put',
        key: b(i >> 8, i & 0xff),
        value: b(1),
      }))
      const writing = engine.write(ops, { sync: true })
      const seen = new Set<number>()
      for (let i = 0; i < 20; i++) {
        const snap = await engine.snapshot()
        seen.add((await snap.range({})).length)
        await snap.close()
        seen.add((await engine.range({})).length)
      }
      await writing
      seen.add((await engine.range({})).length)
      for (const n of seen) expect([0, 500]).toContain(n)
      expect(seen.has(500)).toBe(true)
    })

    it('two snapshots each keep their own moment', async () => {
      await fill([1])
      const first = await engine.snapshot()
      await fill([2])
      const second = await engine.snapshot()
      await engine.write([{ type: 'clear', gte: b(0), lt: b(0xff) }], { sync: false })
      expect((await first.range({})).map(([k]) => k[0])).toEqual([1])
      expect((await second.range({})).map(([k]) => k[0])).toEqual([1, 2])
      expect(await keysOf({})).toEqual([])
      await first.close()
      await second.close()
    })

    it('returned buffers are the caller’s: mutating them or the written ones changes nothing stored', async () => {
      const key = b(7)
      const value = b(1, 2, 3)
      await engine.write([{ type: 'put', key, value }], { sync: false })
      key[0] = 8
      value[0] = 9
      const got = (await engine.get(b(7))) as Uint8Array
      expect(got).toEqual(b(1, 2, 3))
      got[0] = 42
      expect(await engine.get(b(7))).toEqual(b(1, 2, 3))
    })

    it('copies of every size are independent: of the written buffers, of each other, of the store', async () => {
      // Sizes on both sides of the memory engine's thresholds (64 bytes in-heap, 1 KiB pooled).
      const sizes = [3, 64, 65, 100, 500, 1024, 1025, 3000]
      const value = (i: number) =>
        Uint8Array.from({ length: sizes[i] as number }, (_, j) => (i * 31 + j) & 0xff)
      const keys = sizes.map((_, i) => Uint8Array.from({ length: 70 + i }, (_, j) => (i + j) & 0x7f))
      const written = sizes.map((_, i) => value(i))
      await engine.write(
        keys.map((key, i) => ({ type: 'put' as const, key, value: written[i] as Uint8Array })),
        { sync: false },
      )
      for (const w of written) w.fill(0xee)
      const fromRange = await engine.range({})
      const fromGetMany = await engine.getMany(keys)
      for (const [, v] of fromRange) v.fill(0xaa)
      for (const v of fromGetMany) v?.fill(0xbb)
      expect(await engine.getMany(keys)).toEqual(sizes.map((_, i) => value(i)))
      const expected = keys
        .map((k, i) => [k, value(i)] as const)
        .sort((x, y) => compareKeys(x[0], y[0]))
        .map(([, v]) => v)
      const again = await engine.range({})
      expect(again.map(([, v]) => v)).toEqual(expected)
      // Mutating one returned value leaves the others of the same call alone.
      again[0]?.[1].fill(0xcc)
      expect(again.slice(1).map(([, v]) => v)).toEqual(expected.slice(1))
    })

    it('after close every call rejects with ClosedError, and close again resolves', async () => {
      await fill([1])
      const snap = await engine.snapshot()
      await engine.close()
      await expect(engine.get(b(1))).rejects.toBeInstanceOf(ClosedError)
      await expect(engine.getMany([b(1)])).rejects.toBeInstanceOf(ClosedError)
      await expect(engine.range({})).rejects.toBeInstanceOf(ClosedError)
      await expect(engine.keys({})).rejects.toBeInstanceOf(ClosedError)
      await expect(engine.write([{ type: 'del', key: b(1) }], { sync: true })).rejects.toBeInstanceOf(
        ClosedError,
      )
      await expect(engine.snapshot()).rejects.toBeInstanceOf(ClosedError)
      await expect(snap.get(b(1))).rejects.toBeInstanceOf(ClosedError)
      await expect(engine.close()).resolves.toBeUndefined()
    })

    it('agrees with a sorted-array model under random batches and ranges', async () => {
      const key = fc.uint8Array({ minLength: 0, maxLength: 3, max: 4 })
      const op = fc.oneof(
        fc.record({ type: fc.constant('put' as const), key, value: fc.uint8Array({ maxLength: 2 }) }),
        fc.record({ type: fc.constant('del' as const), key }),
        fc.record({ type: fc.constant('clear' as const), gte: key, lt: key }),
      )
      const range = fc.record(
        {
          gte: key,
          gt: key,
          lte: key,
          lt: key,
          reverse: fc.boolean(),
          limit: fc.nat({ max: 6 }),
        },
        { requiredKeys: [] },
      )
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.array(op, { maxLength: 8 }), { maxLength: 6 }),
          range,
          async (batches, r) => {
            await engine.write([{ type: 'clear', gte: b(), lt: b(0xff, 0xff, 0xff, 0xff) }], { sync: false })
            const model = new Map<string, Uint8Array>()
            for (const ops of batches) {
              await engine.write(ops, { sync: false })
              for (const o of ops) {
                if (o.type === 'put') model.set(hex(o.key), o.value)
                else if (o.type === 'del') model.delete(hex(o.key))
                else
                  for (const k of [...model.keys()])
                    if (inRange(Buffer.from(k, 'hex'), { gte: o.gte, lt: o.lt })) model.delete(k)
              }
            }
            let expected = [...model.entries()]
              .map(([k, v]) => [new Uint8Array(Buffer.from(k, 'hex')), v] as const)
              .filter(([k]) => inRange(k, r))
              .sort((x, y) => compareKeys(x[0], y[0]))
            if (r.reverse) expected = expected.reverse()
            if (r.limit !== undefined) expected = expected.slice(0, r.limit)
            const got = await engine.range(r)
            expect(got.map(([k, v]) => [hex(k), hex(v)])).toEqual(expected.map(([k, v]) => [hex(k), hex(v)]))
            expect((await engine.keys(r)).map(hex)).toEqual(expected.map(([k]) => hex(k)))
          },
        ),
        { numRuns: 150 },
      )
    })
  })
}
