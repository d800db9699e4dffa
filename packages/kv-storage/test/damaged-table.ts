import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect } from 'vitest'
import { LevelEngine } from '../src/level-engine'

// A LevelDB table with one value damaged on disk: how the read-path checks are tested.

/** Seeded pseudo-random bytes: LevelDB leaves blocks of them uncompressed (Snappy gains nothing). */
export function noise(seed: number, length: number): Uint8Array {
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

/** A varint of a LevelDB table at `at`: its value and where the next field starts. */
function varint(bytes: Uint8Array, at: number): [value: number, next: number] {
  let value = 0
  for (let shift = 0; ; shift += 7) {
    const b = bytes[at++] as number
    value += (b & 0x7f) * 2 ** shift
    if (b < 0x80) return [value, at]
  }
}

/**
 * Makes the table block holding `value` unreadable to LevelDB: its trailer's compression type
 * becomes one LevelDB does not know, so reading the block fails with a Corruption status
 * ("bad block type") and an iterator steps over the block's entries, saving the status (what
 * a damaged compressed block does too). The block is found through the table's footer and
 * index block.
 */
export async function damageBlock(path: string, value: Uint8Array): Promise<void> {
  const tables = (await readdir(path)).filter((f) => f.endsWith('.ldb'))
  let damaged = 0
  for (const t of tables) {
    const bytes = await readFile(join(path, t))
    const at = bytes.indexOf(Buffer.from(value))
    if (at < 0) continue
    // Footer: metaindex handle, index handle (varints), padding, 8-byte magic.
    const footer = bytes.length - 48
    const [, afterMeta] = varint(bytes, varint(bytes, footer)[1])
    const [indexOffset, next] = varint(bytes, afterMeta)
    const [indexSize] = varint(bytes, next)
    const stored = bytes.subarray(indexOffset, indexOffset + indexSize)
    const index = Buffer.from(bytes[indexOffset + indexSize] === 1 ? unsnappy(stored) : stored)
    const restarts = index.readUInt32LE(index.length - 4)
    const entriesEnd = index.length - 4 - 4 * restarts
    for (let p = 0; p < entriesEnd; ) {
      const [, a] = varint(index, p)
      const [unshared, b] = varint(index, a)
      const [valueLength, c] = varint(index, b)
      const [offset, d] = varint(index, c + unshared)
      const [size] = varint(index, d)
      p = c + unshared + valueLength
      if (offset <= at && at < offset + size) {
        bytes[offset + size] = 0x7f
        damaged++
      }
    }
    await writeFile(join(path, t), bytes)
  }
  expect(damaged).toBe(1)
}

/** Snappy's raw format, decompressed (LevelDB compresses an index block when that saves 1/8). */
function unsnappy(src: Uint8Array): Uint8Array {
  const [length, start] = varint(src, 0)
  const out = new Uint8Array(length)
  let o = 0
  for (let p = start; p < src.length; ) {
    const tag = src[p++] as number
    if ((tag & 3) === 0) {
      let n = tag >>> 2
      if (n >= 60) {
        const extra = n - 59
        n = 0
        for (let i = 0; i < extra; i++) n |= (src[p++] as number) << (8 * i)
      }
      out.set(src.subarray(p, p + n + 1), o)
      p += n + 1
      o += n + 1
      continue
    }
    let n: number
    let offset: number
    if ((tag & 3) === 1) {
      n = 4 + ((tag >>> 2) & 7)
      offset = ((tag >>> 5) << 8) | (src[p++] as number)
    } else if ((tag & 3) === 2) {
      n = (tag >>> 2) + 1
      offset = (src[p] as number) | ((src[p + 1] as number) << 8)
      p += 2
    } else {
      n = (tag >>> 2) + 1
      offset = Buffer.from(src.subarray(p, p + 4)).readUInt32LE(0)
      p += 4
    }
    for (let i = 0; i < n; i++, o++) out[o] = out[o - offset] as number
  }
  expect(o).toBe(length)
  return out
}
