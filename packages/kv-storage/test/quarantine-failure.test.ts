import { readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it, vi } from 'vitest'
import { DurabilityMark, MARK_FILE } from '../src/durability-mark'
import { CorruptRecordError, DatabaseCorruptError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { CORRUPT_MARKER } from '../src/level-recovery'
import { LogStore } from '../src/log-store'
import { fillTable, flipInTable, key } from './damaged-table'
import { entries, useTempDir } from './helpers'

// The disk refuses the quarantine marker (EIO) the first `failures.left` times; every other
// file write goes through.
const failures = { left: 0 }
vi.mock('node:fs/promises', async (original) => {
  const fs = await original<typeof import('node:fs/promises')>()
  return {
    ...fs,
    writeFile: (async (path: unknown, ...rest: unknown[]) => {
      if (failures.left > 0 && String(path).endsWith('MQ-CORRUPT')) {
        failures.left--
        throw Object.assign(new Error('EIO: i/o error, open MQ-CORRUPT'), { code: 'EIO' })
      }
      return (fs.writeFile as (...a: unknown[]) => Promise<void>)(path, ...rest)
    }) as typeof fs.writeFile,
  }
})

describe('a quarantine the disk refuses', () => {
  const dir = useTempDir('kv-quarantine')

  /** A read of the damaged value, with `failing` refused marker writes; what the owner heard. */
  async function readDamaged(path: string, failing: number) {
    const values = await fillTable(path)
    await flipInTable(path, values[20] as Uint8Array)
    const reports: { error: CorruptRecordError; failure: Error | undefined }[] = []
    const engine = await LevelEngine.open(path, {
      onCorruption: (error, failure) => reports.push({ error, failure }),
    })
    failures.left = failing
    try {
      expect(await engine.get(key(20)).catch((e: unknown) => e)).toBeInstanceOf(CorruptRecordError)
    } finally {
      failures.left = 0
      await engine.close()
    }
    return reports
  }

  it('is tried again, and the database stays quarantined', async () => {
    const path = join(dir.path, 'db')
    const reports = await readDamaged(path, 2)
    expect(reports).toHaveLength(1)
    expect(reports[0]?.failure).toBeUndefined()
    expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/a read found damaged data/)
    await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(DatabaseCorruptError)
  })

  it('at an open whose recovery dropped records, is tried again, so the next open is refused too', async () => {
    const path = join(dir.path, 'db')
    const engine = await LevelEngine.open(path)
    for (let i = 0; i < 200; i++)
      await engine.write([{ type: 'put', key: Uint8Array.of(1, i), value: new Uint8Array(1024).fill(i) }], {
        sync: true,
      })
    await engine.close()
    // One bit flipped in the write-ahead log: LevelDB drops the damaged records and deletes the log.
    const [log] = (await readdir(path)).filter((f) => f.endsWith('.log'))
    const bytes = await readFile(join(path, log as string))
    bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] as number) ^ 0x10
    await writeFile(join(path, log as string), bytes)
    failures.left = 1
    try {
      await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(DatabaseCorruptError)
    } finally {
      failures.left = 0
    }
    expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/dropping \d+ bytes/)
    await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(DatabaseCorruptError)
  })

  it('at a durability mark check that fails, is tried again, and the open fails with DatabaseCorruptError', async () => {
    const path = join(dir.path, 'db')
    const engine = await LevelEngine.open(path)
    const mark = await DurabilityMark.open(engine, path)
    const store = new LogStore(engine, { mark })
    ;(await store.openGroup(1)).append(entries(1, 4, 1))
    await store.durability.flush()
    await store.close()
    await mark.close()
    await engine.close()
    // Stamped batches, and the mark that covers them gone: the check refuses the database.
    await rm(join(path, MARK_FILE))
    const again = await LevelEngine.open(path)
    failures.left = 1
    try {
      const err = await DurabilityMark.open(again, path).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(DatabaseCorruptError)
      expect((err as Error).message).toMatch(/MQ-DURABLE is missing/)
    } finally {
      failures.left = 0
      await again.close()
    }
    expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/MQ-DURABLE is missing/)
    await expect(LevelEngine.open(path)).rejects.toBeInstanceOf(DatabaseCorruptError)
  })

  it('is reported to the owner when every try fails (the database would open again)', async () => {
    const path = join(dir.path, 'db')
    const reports = await readDamaged(path, 1_000)
    expect(reports).toHaveLength(1)
    expect(reports[0]?.error).toBeInstanceOf(CorruptRecordError)
    expect(reports[0]?.failure?.message).toMatch(/EIO/)
  })
})
