import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect } from 'vitest'
import { LevelEngine } from '../src/level-engine'

// A LevelDB table with one value damaged on disk: how the read-path checks are tested.

/** Seeded pseudo-random bytes: LevelDB leaves blocks of them uncompressed (Snappy gains nothing). */
function noise(seed: number, length: number): Uint8Array {
  let x = seed | 1
  return Uint8Array.from({ length }, () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return x & 0xff
  })
}

export const key = (i: number) => Uint8Array.of(7, i)

/** 50 values of 256 random bytes, written, then moved into a table (.ldb) by a reopen. */
export async function fillTable(path: string, valueChecksums = true): Promise<Uint8Array[]> {
  const values = Array.from({ length: 50 }, (_, i) => noise((i + 1) * 7919, 256))
  const engine = await LevelEngine.open(path, { valueChecksums })
  await engine.write(
    values.map((value, i) => ({ type: 'put' as const, key: key(i), value })),
    { sync: true },
  )
  await engine.close()
  // Reopening replays the write-ahead log into a level-0 table.
  await (await LevelEngine.open(path)).close()
  return values
}

/** Flips one bit in the middle of `value`'s bytes inside the database's table files. */
export async function flipInTable(path: string, value: Uint8Array): Promise<void> {
  const tables = (await readdir(path)).filter((f) => f.endsWith('.ldb'))
  let flipped = 0
  for (const t of tables) {
    const bytes = await readFile(join(path, t))
    const at = bytes.indexOf(Buffer.from(value))
    if (at < 0) continue
    bytes[at + 100] = (bytes[at + 100] as number) ^ 0x04
    await writeFile(join(path, t), bytes)
    flipped++
  }
  expect(flipped).toBe(1)
}
