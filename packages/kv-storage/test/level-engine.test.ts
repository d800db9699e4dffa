import { randomBytes } from 'node:crypto'
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ClosedError, OverloadedError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { useTempDir } from './helpers'

const b = (...xs: number[]) => Uint8Array.from(xs)

describe('LevelEngine specifics', () => {
  const dir = useTempDir('kv-level')

  it('bounds the writes queued behind the one in flight', async () => {
    const engine = await LevelEngine.open(join(dir.path, 'db'), { writesPendingMax: 2 })
    try {
      const first = engine.write([{ type: 'put', key: b(1), value: b(1) }], { sync: true })
      const second = engine.write([{ type: 'put', key: b(2), value: b(2) }], { sync: true })
      await expect(
        engine.write([{ type: 'put', key: b(3), value: b(3) }], { sync: true }),
      ).rejects.toBeInstanceOf(OverloadedError)
      await Promise.all([first, second])
      await engine.write([{ type: 'put', key: b(3), value: b(3) }], { sync: true })
      expect((await engine.range({})).map(([k]) => k[0])).toEqual([1, 2, 3])
    } finally {
      await engine.close()
    }
  })

  it('applies concurrent writes in call order, a clear seeing every write issued before it', async () => {
    const engine = await LevelEngine.open(join(dir.path, 'db'))
    try {
      const writes = []
      for (let i = 0; i < 50; i++) {
        writes.push(engine.write([{ type: 'put', key: b(i), value: b(i) }], { sync: false }))
        if (i % 10 === 9)
          writes.push(engine.write([{ type: 'clear', gte: b(0), lt: b(i + 1) }], { sync: false }))
      }
      await Promise.all(writes)
      expect(await engine.range({})).toEqual([])
    } finally {
      await engine.close()
    }
  })

  it('writes a batch of more ops than a slice (a clear of 40,000 keys, 20,000 puts) as one batch, letting the event loop turn', async () => {
    const engine = await LevelEngine.open(join(dir.path, 'big'))
    try {
      const key = (prefix: number, i: number) => b(prefix, i >> 16, (i >> 8) & 255, i & 255)
      const fill = Array.from({ length: 40_000 }, (_, i) => ({
        type: 'put' as const,
        key: key(1, i),
        value: b(7),
      }))
      await engine.write(fill, { sync: false })
      let turns = 0
      const ticker = setInterval(() => turns++, 0)
      const puts = Array.from({ length: 20_000 }, (_, i) => ({
        type: 'put' as const,
        key: key(2, i),
        value: b(9),
      }))
      await engine.write([{ type: 'clear', gte: b(1), lt: b(2) }, ...puts], { sync: true })
      clearInterval(ticker)
      expect(await engine.range({ gte: b(1), lt: b(2) })).toEqual([])
      const written = await engine.range({ gte: b(2), lt: b(3) })
      expect(written.length).toBe(20_000)
      expect(written[19_999]).toEqual([key(2, 19_999), b(9)])
      expect(turns).toBeGreaterThan(0)
    } finally {
      await engine.close()
    }
  })

  it('a range read in pages (bytesMax) that its snapshot or engine closes under rejects with ClosedError', async () => {
    const engine = await LevelEngine.open(join(dir.path, 'db'))
    const puts = Array.from({ length: 20_000 }, (_, i) => ({
      type: 'put' as const,
      key: b(i >> 8, i & 255),
      value: new Uint8Array(100),
    }))
    await engine.write(puts, { sync: true })
    // An image store closes an image a follower is reading (evicted, or its group left): a
    // closed read, not an unknown failure. Either outcome but a foreign error is right.
    const outcome = (read: Promise<unknown>) =>
      read.then(
        () => 'read whole',
        (e: unknown) =>
          e instanceof ClosedError ? 'closed' : `${(e as Error).name}: ${(e as Error).message}`,
      )
    const snap = await engine.snapshot()
    const fromSnapshot = outcome(snap.range({ bytesMax: 2 ** 30 }))
    await new Promise((resolve) => setImmediate(resolve))
    await snap.close()
    expect(['read whole', 'closed']).toContain(await fromSnapshot)
    // The engine closed under a read of its own (its iterator closed with the database).
    const live = outcome(engine.range({ bytesMax: 2 ** 30 }))
    await new Promise((resolve) => setImmediate(resolve))
    await engine.close()
    expect(['read whole', 'closed']).toContain(await live)
  })

  it('stores every op of a batch under its own key and value, though each reaches LevelDB through a reused scratch buffer', async () => {
    const engine = await LevelEngine.open(join(dir.path, 'db'))
    try {
      // Keys of 1 to 80 bytes (small ones go through KeyScratch), values of up to 100 kB (the
      // sealer's scratch grows) and one of 1.5 MB (a buffer of its own).
      const keyOf = (i: number) => Uint8Array.from({ length: 1 + (i % 80) }, (_, j) => (j === 0 ? i : j))
      const bytesOf = (i: number) => new Uint8Array(i === 7 ? 1_500_000 : (i * 997) % 100_000).fill(i)
      const ops = Array.from({ length: 200 }, (_, i) => ({
        type: 'put' as const,
        key: keyOf(i),
        value: bytesOf(i),
      }))
      await engine.write(ops, { sync: false })
      await engine.write(
        [
          { type: 'del', key: keyOf(3) },
          { type: 'del', key: keyOf(150) },
        ],
        { sync: false },
      )
      const stored = await engine.range({})
      expect(stored.length).toBe(198)
      const want = new Map(ops.filter((_, i) => i !== 3 && i !== 150).map((op) => [op.key.join(), op.value]))
      // Compared natively: toEqual walks the 11 MB element by element (19 s here, and a CI
      // timeout of 30 s under load).
      const sameBytes = (a: Uint8Array, b: Uint8Array | undefined) =>
        b !== undefined && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b)
      const wrong = stored.filter(([k, v]) => !sameBytes(v, want.get(k.join()))).map(([k]) => k.join())
      expect(wrong).toEqual([])
    } finally {
      await engine.close()
    }
  })

  it('keeps data across close and reopen', async () => {
    const path = join(dir.path, 'db')
    let engine = await LevelEngine.open(path)
    await engine.write([{ type: 'put', key: b(9), value: b(8, 7) }], { sync: true })
    await engine.close()
    engine = await LevelEngine.open(path, { createIfMissing: false })
    expect(await engine.get(b(9))).toEqual(b(8, 7))
    expect(engine.path).toBe(path)
    await engine.close()
  })

  it('holds 16 MiB of writes in its memtable by default (32 MiB), writing tables sooner with a smaller writeBufferBytes', async () => {
    const tables = async (path: string) => (await readdir(path)).filter((f) => f.endsWith('.ldb'))
    const fill = async (engine: LevelEngine) => {
      for (let i = 0; i < 16; i++)
        await engine.write([{ type: 'put', key: b(i), value: randomBytes(1024 * 1024) }], { sync: false })
    }
    const roomy = await LevelEngine.open(join(dir.path, 'roomy'))
    try {
      await fill(roomy)
      expect(await tables(roomy.path)).toEqual([])
    } finally {
      await roomy.close()
    }
    const small = await LevelEngine.open(join(dir.path, 'small'), { writeBufferBytes: 1024 * 1024 })
    try {
      await fill(small)
      // LevelDB writes full memtables to tables on its background thread, with nothing to await:
      // poll for the first, for up to 5 s.
      for (let i = 0; i < 250 && (await tables(small.path)).length === 0; i++)
        await new Promise((resolve) => setTimeout(resolve, 20))
      expect((await tables(small.path)).length).toBeGreaterThan(0)
    } finally {
      await small.close()
    }
  })
})
