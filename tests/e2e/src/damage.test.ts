import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LevelEngine, walRecords } from '@mq/kv-storage'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { cutLog, flipLogBits, writeAheadLogs } from './damage'

// The damage tools against a real LevelDB write-ahead log: what they cut or flip, and that they
// leave a log they cannot damage as it was.
describe('damage', () => {
  let dataDir: string
  beforeEach(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'mq-damage-'))
    const engine = await LevelEngine.open(join(dataDir, 'db'))
    for (let i = 0; i < 20; i++) {
      await engine.write([{ type: 'put', key: Uint8Array.of(i), value: new Uint8Array(100).fill(i) }], {
        sync: true,
      })
    }
    await engine.close()
  })
  afterEach(() => {
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('cuts the newest log at a record boundary or inside a record, keeping the first half', () => {
    const log = writeAheadLogs(dataDir)[0] as string
    const records = walRecords(readFileSync(log))
    expect(records.length).toBe(20)
    expect(cutLog(dataDir, 'boundary')).toBe(10)
    expect(statSync(log).size).toBe(records[10]?.start)
    expect(walRecords(readFileSync(log)).length).toBe(10)
    expect(cutLog(dataDir, 'inside')).toBe(5)
    const inside = records[5] as { start: number; end: number }
    expect(statSync(log).size).toBe(inside.start + Math.floor((inside.end - inside.start) / 2))
    expect(walRecords(readFileSync(log)).length).toBe(5)
  })

  it('leaves a log with fewer records than asked for as it is', () => {
    const log = writeAheadLogs(dataDir)[0] as string
    const size = statSync(log).size
    expect(cutLog(dataDir, 'boundary', 21)).toBe(0)
    expect(statSync(log).size).toBe(size)
  })

  it('flips bits in every log, which LevelDB then reports as dropped', async () => {
    expect(flipLogBits(dataDir).length).toBe(1)
    await expect(LevelEngine.open(join(dataDir, 'db'))).rejects.toThrow(/dropped damaged records/)
  })
})
