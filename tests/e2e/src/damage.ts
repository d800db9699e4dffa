import { readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { walRecords } from '@mq/kv-storage'

/**
 * Damage to a stopped node's data files, as a failing disk or filesystem would do it: the
 * faults of test/corruption.test.ts and of the nemesis's corrupt-data-follower.
 */

/** The node's LevelDB write-ahead logs (`db/*.log`), newest first (LevelDB numbers its files in order). */
export function writeAheadLogs(dataDir: string): string[] {
  const db = join(dataDir, 'db')
  return readdirSync(db)
    .filter((f) => f.endsWith('.log'))
    .sort((a, b) => Number.parseInt(b, 10) - Number.parseInt(a, 10))
    .map((f) => join(db, f))
}

/** Flips one bit at 5 spots of each of the node's write-ahead logs; returns the logs changed. */
export function flipLogBits(dataDir: string): string[] {
  const changed: string[] = []
  for (const log of writeAheadLogs(dataDir)) {
    const bytes = readFileSync(log)
    if (bytes.length === 0) continue
    for (let k = 1; k <= 5; k++) {
      const at = Math.floor((bytes.length * k) / 7)
      bytes[at] = (bytes[at] ?? 0) ^ 0x10
    }
    writeFileSync(log, bytes)
    changed.push(log)
  }
  return changed
}

/**
 * Cuts the node's newest write-ahead log short, keeping the first half of its records: at the
 * start of the first record dropped (`boundary`) or halfway into it (`inside`). LevelDB
 * reports neither: it takes both for a crash during a write. Returns the records dropped (0
 * when the log holds fewer than `recordsMin`, and nothing was cut).
 */
export function cutLog(dataDir: string, where: 'boundary' | 'inside', recordsMin = 2): number {
  const log = writeAheadLogs(dataDir)[0]
  if (!log) return 0
  const records = walRecords(readFileSync(log))
  const keep = Math.floor(records.length / 2)
  const next = records[keep]
  if (!next || records.length < recordsMin) return 0
  truncateSync(log, where === 'boundary' ? next.start : next.start + Math.floor((next.end - next.start) / 2))
  return records.length - keep
}
