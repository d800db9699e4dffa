import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ClosedError, CorruptRecordError, DatabaseCorruptError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { CORRUPT_MARKER } from '../src/level-recovery'
import { damageBlock, fillTable, key, noise } from './damaged-table'
import { useTempDir } from './helpers'

// LevelDB steps over a table block it cannot read and reports it only through its iterator's
// status: a read stopped by its limit or its bytes must still see it (until 2026-12-06 such a
// read returned the entries after the block as if the block's were absent).

const wideKey = (i: number) => Uint8Array.of(7, i >> 8, i & 0xff)
const keyNumber = (k: Uint8Array) => ((k[1] as number) << 8) | (k[2] as number)

/** `count` entries of 100 random bytes under wideKey(i), moved into a table by a reopen. */
async function fillWide(path: string, count: number): Promise<Uint8Array[]> {
  const values = Array.from({ length: count }, (_, i) => noise((i + 1) * 7919, 100))
  const engine = await LevelEngine.open(path)
  await engine.write(
    values.map((value, i) => ({ type: 'put' as const, key: wideKey(i), value })),
    { sync: true },
  )
  await engine.close()
  await (await LevelEngine.open(path)).close()
  return values
}

describe('a bounded read over a damaged table block', () => {
  const dir = useTempDir('kv-bounded-damage')

  it('a range or keys read stopped by its limit (on the engine or a snapshot, either direction) fails, quarantines and reports once', async () => {
    const path = join(dir.path, 'db')
    const values = await fillTable(path)
    // The block holding value 20 (keys 15–29 with these tables) becomes unreadable.
    await damageBlock(path, values[20] as Uint8Array)
    const reports: CorruptRecordError[] = []
    const engine = await LevelEngine.open(path, { onCorruption: (e) => reports.push(e) })
    try {
      // Bounded reads that do not reach the block read as written.
      expect(await engine.range({ gte: key(40), limit: 5 })).toEqual(
        [40, 41, 42, 43, 44].map((i) => [key(i), values[i]]),
      )
      expect(await engine.keys({ gte: key(30), limit: 3 })).toEqual([key(30), key(31), key(32)])
      expect(await engine.range({ lt: key(10), limit: 10 })).toHaveLength(10)
      expect(reports).toHaveLength(0)
      // Stopped by their limit past the block: 30 entries would come back, 15–29 missing.
      const failed = await engine.range({ limit: 30 }).catch((e: unknown) => e)
      expect(failed).toBeInstanceOf(CorruptRecordError)
      expect((failed as Error).message).toMatch(
        /LevelDB found corrupt data while reading: Corruption: bad block type/,
      )
      await expect(engine.keys({ limit: 30 })).rejects.toBeInstanceOf(CorruptRecordError)
      await expect(engine.range({ reverse: true, limit: 30 })).rejects.toBeInstanceOf(CorruptRecordError)
      await expect(engine.keys({ gte: key(10), lt: key(45), limit: 20 })).rejects.toBeInstanceOf(
        CorruptRecordError,
      )
      const snap = await engine.snapshot()
      await expect(snap.range({ limit: 30 })).rejects.toBeInstanceOf(CorruptRecordError)
      await expect(snap.keys({ reverse: true, limit: 30 })).rejects.toBeInstanceOf(CorruptRecordError)
      await snap.close()
      // Unbounded reads and gets report it as before.
      await expect(engine.range({})).rejects.toBeInstanceOf(CorruptRecordError)
      await expect(engine.get(key(20))).rejects.toBeInstanceOf(CorruptRecordError)
      expect(reports).toHaveLength(1)
    } finally {
      await engine.close()
    }
    expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/a read found damaged data/)
    await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(DatabaseCorruptError)
  })

  it('a range read stopped by its bytes in a trip that did not end the iteration fails too (forward and reverse)', async () => {
    const path = join(dir.path, 'db')
    const values = await fillWide(path, 4000)
    await damageBlock(path, values[500] as Uint8Array)
    await damageBlock(path, values[3500] as Uint8Array)
    const reports: CorruptRecordError[] = []
    const engine = await LevelEngine.open(path, { onCorruption: (e) => reports.push(e) })
    const bytesMax = 1500 * (3 + 100)
    try {
      // From 1,000 the damaged blocks lie outside: 1,500 entries, in order, no gap.
      const clean = await engine.range({ gte: wideKey(1000), bytesMax })
      expect(clean.map(([k]) => keyNumber(k))).toEqual(Array.from({ length: 1500 }, (_, i) => 1000 + i))
      const cleanBack = await engine.range({ lt: wideKey(3000), reverse: true, bytesMax })
      expect(cleanBack.map(([k]) => keyNumber(k))).toEqual(Array.from({ length: 1500 }, (_, i) => 2999 - i))
      expect(reports).toHaveLength(0)
      // Over a damaged block: the second trip (1,001 entries) is cut before the bytes are.
      await expect(engine.range({ bytesMax })).rejects.toBeInstanceOf(CorruptRecordError)
      await expect(engine.range({ reverse: true, bytesMax })).rejects.toBeInstanceOf(CorruptRecordError)
      const snap = await engine.snapshot()
      await expect(snap.range({ gte: wideKey(0), lt: wideKey(3000), bytesMax })).rejects.toBeInstanceOf(
        CorruptRecordError,
      )
      await snap.close()
      expect(reports).toHaveLength(1)
    } finally {
      await engine.close()
    }
  })
})

describe('closing under reads', () => {
  const dir = useTempDir('kv-close-reads')

  it('a read issued before a close whose one trip ended the iteration returns its entries (as before 4045113), not ClosedError', async () => {
    const path = join(dir.path, 'db')
    const engine = await LevelEngine.open(path)
    await engine.write(
      Array.from({ length: 10 }, (_, i) => ({
        type: 'put' as const,
        key: Uint8Array.of(i),
        value: new Uint8Array(100),
      })),
      { sync: true },
    )
    const snap = await engine.snapshot()
    // Issued in the same turn as the closes: each reads its entries in one trip that ends its
    // iteration (LevelDB's status checked); nothing is left for a close to cut short.
    const fromSnap = [
      snap.range({}),
      snap.keys({ gte: Uint8Array.of(3) }),
      snap.range({ limit: 50, reverse: true }),
    ]
    const closedSnap = snap.close()
    const fromEngine = [engine.range({ lt: Uint8Array.of(8) }), engine.keys({}), engine.range({ limit: 20 })]
    await engine.close()
    await closedSnap
    expect((await Promise.all(fromSnap)).map((r) => r.length)).toEqual([10, 7, 10])
    expect((await Promise.all(fromEngine)).map((r) => r.length)).toEqual([8, 10, 10])
  })

  it('a close (of the engine or a snapshot) while bounded reads are in flight never aborts: each read completes or fails with ClosedError', async () => {
    const path = join(dir.path, 'db')
    const engine0 = await LevelEngine.open(path)
    await engine0.write(
      Array.from({ length: 20_000 }, (_, i) => ({
        type: 'put' as const,
        key: Uint8Array.of(i >> 8, i & 0xff),
        value: new Uint8Array(100),
      })),
      { sync: true },
    )
    await engine0.close()
    const outcome = (read: Promise<unknown>) =>
      read.then(
        () => 'read whole',
        (e: unknown) =>
          e instanceof ClosedError ? 'closed' : `${(e as Error).name}: ${(e as Error).message}`,
      )
    const waits = [
      () => Promise.resolve(),
      () => new Promise((resolve) => setImmediate(resolve)),
      () => new Promise((resolve) => setTimeout(resolve, 1)),
      () => new Promise((resolve) => setTimeout(resolve, 5)),
    ]
    for (let round = 0; round < 12; round++) {
      const engine = await LevelEngine.open(path)
      const snap = await engine.snapshot()
      const other = await engine.snapshot()
      const reads = [
        engine.range({ limit: 5000 }),
        engine.keys({ limit: 15_000 }),
        engine.range({ bytesMax: 1_500_000 }),
        engine.range({ reverse: true, limit: 3000 }),
        engine.range({}),
        snap.range({ limit: 5000 }),
        snap.keys({ limit: 15_000 }),
        snap.range({ bytesMax: 1_500_000 }),
        other.range({ limit: 8000 }),
        other.range({ bytesMax: 1_000_000 }),
      ].map(outcome)
      await (waits[round % waits.length] as () => Promise<unknown>)()
      // A snapshot closed by its owner, then the engine (with the other snapshot open).
      const snapClosed = snap.close()
      if (round % 2 === 0) await (waits[(round >> 1) % waits.length] as () => Promise<unknown>)()
      await engine.close()
      await snapClosed
      for (const got of await Promise.all(reads)) expect(['read whole', 'closed']).toContain(got)
    }
  })
})
