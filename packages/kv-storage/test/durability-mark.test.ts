import { readFileSync } from 'node:fs'
import { mkdir, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { DurabilityMark, type DurabilityMarkOptions, MARK_FILE, readMark } from '../src/durability-mark'
import type { Engine } from '../src/engine'
import { DatabaseCorruptError } from '../src/errors'
import { LevelEngine } from '../src/level-engine'
import { CORRUPT_MARKER } from '../src/level-recovery'
import { batchSeqKey } from '../src/log-keys'
import { LogStore } from '../src/log-store'
import { MemoryEngine } from '../src/memory-engine'
import { walRecords } from '../src/wal-records'
import { entries, GatedEngine, useTempDir } from './helpers'

const BATCHES = 40

/**
 * Writes BATCHES group-commit batches (one group, 10 entries of ~1 KiB each) through a store
 * with a durability mark, closes everything cleanly (LevelDB keeps them in its write-ahead
 * log: they fit in one memtable) and returns the seq the mark holds.
 */
async function fill(path: string): Promise<number> {
  const engine = await LevelEngine.open(path)
  const mark = await DurabilityMark.open(engine, path)
  const store = new LogStore(engine, { mark })
  try {
    const log = await store.openGroup(1)
    for (let b = 0; b < BATCHES; b++) {
      log.append(
        entries(b * 10 + 1, b * 10 + 11, 1).map((e) => ({ ...e, data: new Uint8Array(1000).fill(b) })),
      )
      await store.durability.flush()
    }
  } finally {
    await store.close()
    await mark.close()
    await engine.close()
  }
  const read = await readMark(path)
  if (typeof read === 'string') throw new Error(`mark ${read}`)
  return read.seq
}

/** The newest write-ahead log of the database (LevelDB numbers its files in order). */
async function newestLog(path: string): Promise<string> {
  const logs = (await readdir(path))
    .filter((f) => f.endsWith('.log'))
    .sort((a, b) => parseInt(b, 10) - parseInt(a, 10))
  expect(logs.length).toBeGreaterThan(0)
  return join(path, logs[0] as string)
}

/** Opens the engine and its mark as a node does; returns the error, if any. */
async function openChecked(path: string): Promise<unknown> {
  const engine = await LevelEngine.open(path)
  try {
    const mark = await DurabilityMark.open(engine, path)
    await mark.close()
    return undefined
  } catch (err) {
    return err
  } finally {
    await engine.close()
  }
}

/** The seq each of the mark file's two slots holds, read synchronously (the page cache). */
function slotSeqs(path: string): number[] {
  const bytes = readFileSync(join(path, MARK_FILE))
  return [0, 4096].map((at) => new DataView(bytes.buffer, bytes.byteOffset + at + 8).getUint32(4))
}

/** `err` is a DatabaseCorruptError whose message matches `pattern`. */
function expectCorrupt(err: unknown, pattern: RegExp): void {
  expect(err).toBeInstanceOf(DatabaseCorruptError)
  expect((err as Error).message).toMatch(pattern)
}

describe('DurabilityMark', () => {
  const dir = useTempDir('kv-mark')

  /** A log store over `engine` whose batches a new durability mark in a fresh folder follows, and its group 1. */
  async function markedStore(engine: Engine, options: DurabilityMarkOptions = {}) {
    const path = join(dir.path, 'mem')
    await mkdir(path)
    const mark = await DurabilityMark.open(engine, path, options)
    const store = new LogStore(engine, { mark })
    const log = await store.openGroup(1)
    /** Appends entry `i` and waits until its batch is durable. */
    const batch = async (i: number) => {
      log.append(entries(i, i + 1, 1))
      await store.durability.flush()
    }
    return { path, mark, store, log, batch }
  }

  it('stamps every batch, marks what is durable, and reopens a whole database', async () => {
    const path = join(dir.path, 'db')
    const marked = await fill(path)
    // One stamped batch per flush; the clean close marked the last one.
    expect(marked).toBe(BATCHES)
    expect(await openChecked(path)).toBeUndefined()
    const engine = await LevelEngine.open(path)
    try {
      const seq = await engine.get(batchSeqKey())
      expect(seq && new DataView(seq.buffer, seq.byteOffset).getUint32(4)).toBe(BATCHES)
    } finally {
      await engine.close()
    }
  })

  it('never marks a batch before its synced write resolves, and catches up without being awaited', async () => {
    const engine = new GatedEngine(new MemoryEngine())
    const { path, mark, store, log } = await markedStore(engine)
    log.append(entries(1, 2, 1))
    await store.durability.flush()
    engine.hold()
    log.append(entries(2, 3, 1))
    const flushed = store.durability.flush()
    await engine.arrived(2)
    // Batch 2 is stamped and being written, not durable: the mark stays at most at batch 1.
    expect(mark.stats().stampedSeq).toBe(2)
    expect(mark.stats().durableSeq).toBe(1)
    const held = await readMark(path)
    expect(typeof held !== 'string' && held.seq).toBeLessThanOrEqual(1)
    engine.release()
    await flushed
    expect(mark.stats().durableSeq).toBe(2)
    await store.close()
    await mark.close()
    expect(await readMark(path)).toMatchObject({ seq: 2 })
    expect(mark.stats().markFailures).toBe(0)
  })

  it('has the mark file hold a batch before its callers hear it is durable (a process crash then loses no mark)', async () => {
    const { path, mark, store, batch } = await markedStore(new MemoryEngine(), { syncIntervalMs: 60_000 })
    for (let i = 1; i <= 5; i++) {
      await batch(i)
      // Read at once, synchronously: the page cache already holds this batch's seq.
      expect(slotSeqs(path)[1]).toBe(i)
      expect(mark.stats()).toMatchObject({ durableSeq: i, markedSeq: i, syncedSeq: 0 })
    }
    await store.close()
    await mark.close()
    expect(mark.stats()).toMatchObject({ markedSeq: 5, syncedSeq: 5, markFailures: 0 })
  })

  it('writes one slot until it is synced, so the other always holds a synced mark', async () => {
    let now = 0
    const { path, mark, store, batch } = await markedStore(new MemoryEngine(), {
      syncIntervalMs: 1000,
      nowMs: () => now,
    })
    const settle = async () => {
      for (let i = 0; i < 100 && mark.stats().markedSeq < mark.stats().durableSeq; i++)
        await new Promise((r) => setTimeout(r, 1))
    }
    for (let i = 1; i <= 3; i++) {
      await batch(i)
      await settle()
    }
    // Three batches, no sync due yet: all written to slot 1; slot 0 keeps the synced 0.
    expect(slotSeqs(path)).toEqual([0, 3])
    expect(mark.stats()).toMatchObject({ markedSeq: 3, syncedSeq: 0, markSyncs: 0 })
    now = 1000
    await batch(4)
    for (let i = 0; i < 100 && mark.stats().syncedSeq < 4; i++) await new Promise((r) => setTimeout(r, 1))
    // The sync came due: slot 1 synced (at 3 or 4), then slot 0 takes the next writes.
    expect(mark.stats().markSyncs).toBeGreaterThanOrEqual(1)
    await batch(5)
    await settle()
    const [slot0, slot1] = slotSeqs(path)
    expect(slot0).toBe(5)
    expect(slot1).toBeGreaterThanOrEqual(3)
    await store.close()
    await mark.close()
    expect(mark.stats()).toMatchObject({ markedSeq: 5, syncedSeq: 5, markFailures: 0 })
  })

  it('keeps writing one slot while a batch comes during its sync, so two slots are never unsynced at once', async () => {
    let now = 0
    const { path, mark, store, batch } = await markedStore(new MemoryEngine(), {
      syncIntervalMs: 10,
      nowMs: () => now,
    })
    // Hold the mark's next fdatasync until released.
    const file = (mark as unknown as { file: { datasync: () => Promise<void> } }).file
    const datasync = file.datasync.bind(file)
    let release: () => void = () => {}
    file.datasync = () => new Promise<void>((r) => (release = r)).then(datasync)
    await batch(1)
    now = 100
    await batch(2) // the sync comes due: it starts, and is held
    expect(mark.stats()).toMatchObject({ markedSeq: 2, syncedSeq: 0, markSyncs: 0 })
    await batch(3) // written while the sync runs: into the same slot
    expect(slotSeqs(path)).toEqual([0, 3])
    release()
    for (let i = 0; i < 100 && mark.stats().markSyncs < 1; i++) await new Promise((r) => setTimeout(r, 1))
    file.datasync = datasync
    // The sync covered seq 2 at least; slot 1 may hold an unsynced 3, so it stays the one
    // written, and slot 0 keeps the synced 0.
    await batch(4)
    expect(slotSeqs(path)).toEqual([0, 4])
    // A sync with no write during it switches: the next batch goes to slot 0.
    now = 200
    for (let i = 0; i < 100 && mark.stats().syncedSeq < 4; i++) {
      await new Promise((r) => setTimeout(r, 5))
      now += 10
    }
    expect(mark.stats().syncedSeq).toBe(4)
    await batch(5)
    expect(slotSeqs(path)).toEqual([5, 4])
    await store.close()
    await mark.close()
    expect(mark.stats()).toMatchObject({ markedSeq: 5, syncedSeq: 5, markFailures: 0 })
  })

  it('keeps marking after its sync timer fires early by its own clock (a pass with nothing to await)', async () => {
    // The mark's clock stands still: its timer fires, finds the sync not yet due, and sets
    // another, without awaiting anything.
    const { mark, store, batch } = await markedStore(new MemoryEngine(), {
      syncIntervalMs: 20,
      nowMs: () => 0,
    })
    for (let i = 1; i <= 3; i++) {
      await batch(i)
      await new Promise((r) => setTimeout(r, 50))
      expect(mark.stats().markedSeq).toBe(i)
    }
    await store.close()
    await mark.close()
  })

  it('refuses a database whose write-ahead log was cut at a record boundary, and quarantines it', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    const log = await newestLog(path)
    const records = walRecords(await readFile(log))
    expect(records.length).toBeGreaterThanOrEqual(BATCHES)
    // Keep the first half of the batches: the rest had been synced and marked.
    await truncate(log, (records[Math.floor(records.length / 2)] as { end: number }).end)
    const err = await openChecked(path)
    expectCorrupt(err, /write-ahead log lost synced writes: LevelDB recovered up to batch \d+, but batch 40/)
    expect(await readFile(join(path, CORRUPT_MARKER), 'utf8')).toMatch(/durability mark check failed/)
    const again = await LevelEngine.open(path).catch((e: unknown) => e)
    expectCorrupt(again, /quarantined/)
  })

  it('refuses a database whose write-ahead log was cut inside a record (LevelDB reports nothing)', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    const log = await newestLog(path)
    const records = walRecords(await readFile(log))
    const cut = records[records.length - 3] as { start: number; end: number }
    await truncate(log, cut.start + Math.floor((cut.end - cut.start) / 2))
    const err = await openChecked(path)
    expectCorrupt(err, /lost synced writes/)
  })

  it('refuses a stamped database without its mark file, and one whose mark has no valid slot', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    const bytes = await readFile(join(path, MARK_FILE))
    await rm(join(path, MARK_FILE))
    const missing = await openChecked(path)
    expectCorrupt(missing, /MQ-DURABLE is missing/)

    const other = join(dir.path, 'db2')
    await fill(other)
    bytes[9] = (bytes[9] ?? 0) ^ 1
    bytes[4096 + 9] = (bytes[4096 + 9] ?? 0) ^ 1
    await writeFile(join(other, MARK_FILE), bytes)
    const damaged = await openChecked(other)
    expectCorrupt(damaged, /damaged/)
  })

  it('reads the other slot when one is torn, and writes the torn one next', async () => {
    const path = join(dir.path, 'db')
    await fill(path)
    const before = await readMark(path)
    if (typeof before === 'string') throw new Error(before)
    const file = join(path, MARK_FILE)
    const bytes = await readFile(file)
    // Tear the newer slot: the older one (one write behind, or equal) still opens the database.
    bytes.fill(0xee, before.slot * 4096, before.slot * 4096 + 10)
    await writeFile(file, bytes)
    const torn = await readMark(path)
    expect(torn).toMatchObject({ slot: 1 - before.slot })
    expect(await openChecked(path)).toBeUndefined()
    expect((await stat(file)).size).toBe(8192)
  })

  it('gives a new or unstamped database a mark at its current state', async () => {
    const path = join(dir.path, 'db')
    const engine = await LevelEngine.open(path)
    await engine.write([{ type: 'put', key: Uint8Array.of(9), value: Uint8Array.of(1) }], { sync: true })
    expect(await readMark(path)).toBe('missing')
    const mark = await DurabilityMark.open(engine, path)
    await mark.close()
    await engine.close()
    expect(await readMark(path)).toMatchObject({ seq: 0 })
    expect(await openChecked(path)).toBeUndefined()
  })
})
