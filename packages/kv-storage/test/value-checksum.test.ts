import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CorruptRecordError, DatabaseCorruptError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { CORRUPT_MARKER } from '../src/level-recovery'
import {
  CHECKSUM_BYTES,
  SCRATCH_BYTES_MAX,
  ScratchSealer,
  sealValue,
  unsealValue,
  VALUE_FORMAT_FILE,
} from '../src/value-checksum'
import { fillTable, flipInTable, key } from './damaged-table'
import { useTempDir } from './helpers'

describe('value checksums', () => {
  it('seal and unseal round-trip, and catch a changed bit, a changed key, a short value', () => {
    const sealed = sealValue(key(1), Uint8Array.of(1, 2, 3))
    expect(sealed.length).toBe(3 + CHECKSUM_BYTES)
    expect(unsealValue(key(1), sealed)).toEqual(Uint8Array.of(1, 2, 3))
    expect(unsealValue(key(1), sealValue(key(1), new Uint8Array()))).toEqual(new Uint8Array())
    expect(unsealValue(key(2), sealed)).toBeUndefined()
    const flipped = sealed.slice()
    flipped[1] = (flipped[1] as number) ^ 0x80
    expect(unsealValue(key(1), flipped)).toBeUndefined()
    expect(unsealValue(key(1), sealed.subarray(0, 3))).toBeUndefined()
  })

  it('a scratch sealer seals as sealValue does, into one reused buffer that grows to its bound', () => {
    const sealer = new ScratchSealer()
    const small = sealer.seal(key(1), Uint8Array.of(1, 2, 3))
    expect(small).toEqual(sealValue(key(1), Uint8Array.of(1, 2, 3)))
    // The next seal overwrites the last: a sealed value lives until the next call.
    const next = sealer.seal(key(2), Uint8Array.of(4, 5, 6))
    expect(next.buffer).toBe(small.buffer)
    expect(small).toEqual(sealValue(key(2), Uint8Array.of(4, 5, 6)))
    // Larger than the first scratch (64 KiB): a larger scratch.
    const mid = new Uint8Array(200_000).fill(3)
    const grown = sealer.seal(key(3), mid)
    expect(unsealValue(key(3), grown)).toEqual(mid)
    expect(grown.buffer.byteLength).toBeLessThanOrEqual(SCRATCH_BYTES_MAX)
    // Larger than the bound: a buffer of its own; the scratch stays as it was.
    const huge = new Uint8Array(SCRATCH_BYTES_MAX).fill(4)
    const own = sealer.seal(key(4), huge)
    expect(unsealValue(key(4), own)).toEqual(huge)
    expect(own.buffer).not.toBe(grown.buffer)
    expect(sealer.seal(key(5), Uint8Array.of(7)).buffer).toBe(grown.buffer)
  })

  describe('in LevelDB tables', () => {
    const dir = useTempDir('kv-value-crc')

    it('a bit flipped in an uncompressed table block fails the read, quarantines the database and reports once', async () => {
      const path = join(dir.path, 'db')
      const values = await fillTable(path)
      await flipInTable(path, values[20] as Uint8Array)
      const reports: CorruptRecordError[] = []
      const engine = await LevelEngine.open(path, { onCorruption: (e) => reports.push(e) })
      try {
        expect(engine.valueChecksums).toBe(true)
        // Undamaged values read as written.
        expect(await engine.get(key(19))).toEqual(values[19])
        const got = await engine.get(key(20)).catch((e: unknown) => e)
        expect(got).toBeInstanceOf(CorruptRecordError)
        expect((got as Error).message).toMatch(/value of key 0714 fails its checksum/)
        // Every read path checks: getMany, range, a snapshot's reads.
        await expect(engine.getMany([key(19), key(20)])).rejects.toBeInstanceOf(CorruptRecordError)
        await expect(engine.range({})).rejects.toBeInstanceOf(CorruptRecordError)
        const snap = await engine.snapshot()
        await expect(snap.range({ gte: key(20), limit: 1 })).rejects.toBeInstanceOf(CorruptRecordError)
        await expect(snap.getMany([key(20)])).rejects.toBeInstanceOf(CorruptRecordError)
        await snap.close()
        expect(reports.length).toBe(1)
      } finally {
        await engine.close()
      }
      expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/a read found damaged data/)
      await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(DatabaseCorruptError)
    })

    it('without value checksums (a database made before them), the same flipped bit is returned as data', async () => {
      const path = join(dir.path, 'db')
      const values = await fillTable(path, false)
      expect(await stat(join(path, VALUE_FORMAT_FILE)).catch(() => undefined)).toBeUndefined()
      await flipInTable(path, values[20] as Uint8Array)
      const engine = await LevelEngine.open(path)
      try {
        expect(engine.valueChecksums).toBe(false)
        const got = await engine.get(key(20))
        expect(got).not.toEqual(values[20])
        expect(got?.length).toBe(256)
      } finally {
        await engine.close()
      }
    })
  })
})
