import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DatabaseCorruptError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { CORRUPT_MARKER, dataFilesWithoutCurrent, droppedOnRecovery } from '../src/level-recovery'
import { useTempDir } from './helpers'

/** Writes 200 synced records of 1 KiB (they stay in LevelDB's write-ahead log) and closes. */
async function fill(path: string): Promise<void> {
  const engine = await LevelEngine.open(path)
  try {
    for (let i = 0; i < 200; i++)
      await engine.write([{ type: 'put', key: Uint8Array.of(1, i), value: new Uint8Array(1024).fill(i) }], {
        sync: true,
      })
  } finally {
    await engine.close()
  }
}

/** Flips one bit at 5 spots of each write-ahead log file (`*.log`) of the database. */
async function flipLogBits(path: string): Promise<void> {
  const logs = (await readdir(path)).filter((f) => f.endsWith('.log'))
  expect(logs.length).toBeGreaterThan(0)
  for (const f of logs) {
    const bytes = await readFile(join(path, f))
    for (let k = 1; k <= 5; k++) {
      const at = Math.floor((bytes.length * k) / 7)
      bytes[at] = (bytes[at] ?? 0) ^ 0x10
    }
    await writeFile(join(path, f), bytes)
  }
}

// LevelDB, opened without paranoid checks, skips write-ahead-log records that fail their
// checksum and deletes the log: the open would succeed without the data. The engine reads
// what LevelDB reported, refuses the open and quarantines the database for later opens.
describe('LevelEngine recovery checks', () => {
  const dir = useTempDir('kv-recovery')

  it('opens an undamaged database again with every record', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    const engine = await LevelEngine.open(path)
    try {
      expect((await engine.range({})).length).toBe(200)
    } finally {
      await engine.close()
    }
    expect(await stat(join(path, CORRUPT_MARKER)).catch(() => undefined)).toBeUndefined()
  })

  it('refuses a database whose log lost records, and keeps refusing it', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    await flipLogBits(path)
    const first = await LevelEngine.open(path).catch((e: unknown) => e)
    expect(first).toBeInstanceOf(DatabaseCorruptError)
    expect((first as Error).message).toMatch(/dropped damaged records.*checksum mismatch/)
    expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/dropping \d+ bytes/)
    // LevelDB has deleted the damaged log by now: only the marker remembers.
    const again = await LevelEngine.open(path).catch((e: unknown) => e)
    expect(again).toBeInstanceOf(DatabaseCorruptError)
    expect((again as Error).message).toMatch(/quarantined/)
  })

  it('refuses a database that lost its CURRENT file, touching nothing, and opens it again once CURRENT is back', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    // Some records in a table too (written at the next open's recovery), the rest in the log.
    await (await LevelEngine.open(path)).close()
    await fill(path)
    const current = await readFile(join(path, 'CURRENT'))
    await rm(join(path, 'CURRENT'))
    const files = (await readdir(path)).sort()
    expect(files.some((f) => f.endsWith('.ldb'))).toBe(true)
    const refused = await LevelEngine.open(path).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(DatabaseCorruptError)
    expect((refused as Error).message).toMatch(/holds LevelDB data \(\d+\.ldb, .*\) but no CURRENT file/)
    expect((await readdir(path)).sort()).toEqual(files)
    await writeFile(join(path, 'CURRENT'), current)
    const engine = await LevelEngine.open(path)
    try {
      expect((await engine.range({})).length).toBe(200)
    } finally {
      await engine.close()
    }
    // A database whose creation stopped before its first write (a manifest, no CURRENT yet)
    // holds no data: it opens as a new one.
    expect(dataFilesWithoutCurrent(['MANIFEST-000001', 'LOCK', 'LOG'])).toEqual([])
    expect(dataFilesWithoutCurrent(['CURRENT', '000005.ldb'])).toEqual([])
    expect(dataFilesWithoutCurrent(['MQ-DURABLE', '000003.log', 'MANIFEST-000002'])).toEqual([
      '000003.log',
      'MQ-DURABLE',
    ])
  })

  it('does not take a LOG it cannot read for one that reports nothing dropped', async () => {
    const path = join(dir.path, 'unreadable')
    await mkdir(join(path, 'LOG'), { recursive: true }) // reading it fails (EISDIR)
    await expect(droppedOnRecovery(path)).rejects.toThrow(/cannot read LevelDB's info LOG/)
    expect(await droppedOnRecovery(join(dir.path, 'no-such-db'))).toEqual([]) // no LOG: nothing reported
  })
})
