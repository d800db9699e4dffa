import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { CorruptRecordError, DatabaseCorruptError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { CORRUPT_MARKER } from '../src/level-recovery'
import { CHECKSUM_BYTES, sealValue, unsealValue, VALUE_FORMAT_FILE } from '../src/value-checksum'
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
