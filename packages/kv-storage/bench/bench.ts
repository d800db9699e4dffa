/**
 * The kv-storage benchmark (not a test): synced appends per second against batch size,
 * through the Raft log store + group commit and through raw classic-level synced batches
 * of the same sizes, in the same run; then entry reads per second.
 *
 *   pnpm --filter @mq/kv-storage bench     (KV_BENCH_MS: ms per trial, default 1000; KV_BENCH_TRIALS: default 5)
 *
 * Each trial writes a fresh raw database and a fresh log store in alternation, batch for
 * batch (see pairedAppends), so a noisy neighbour hurts both alike; the table shows the
 * median of the trials per batch size (the ratio is the median of the per-trial ratios).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Entry } from '@mq/raft-core'
import { ClassicLevel } from 'classic-level'
import { DurabilityMark } from '../src/durability-mark'
import type { Engine } from '../src/engine'
import { quantileOf } from '../src/histogram'
import { LevelEngine } from '../src/level-engine'
import { entryKey } from '../src/log-keys'
import { LogStore } from '../src/log-store'

const TRIAL_MS = Number(process.env.KV_BENCH_MS ?? 1000)
const TRIALS = Number(process.env.KV_BENCH_TRIALS ?? 5)
const ENTRY_BYTES = 128
const BATCH_SIZES = [1, 10, 100, 1000]
/** A bound on batches per trial, whatever the clock says. */
const BATCHES_MAX = 1_000_000

const payload = new Uint8Array(ENTRY_BYTES).map((_, i) => (i * 31) & 0xff)
type RawDb = ClassicLevel<Uint8Array, Uint8Array>

async function withDir<T>(fn: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'kv-bench-'))
  try {
    return await fn(join(dir, 'db'))
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

async function openRaw(path: string): Promise<RawDb> {
  const db: RawDb = new ClassicLevel<Uint8Array, Uint8Array>(path, {
    keyEncoding: 'view',
    valueEncoding: 'view',
  })
  await db.open()
  return db
}

function makeEntries(from: number, size: number, term: number): Entry[] {
  const out: Entry[] = []
  for (let i = 0; i < size; i++)
    out.push({ index: from + i, term, type: 0, timestampMs: from + i, data: payload })
  return out
}

/** Raw: one synced batch of `size` puts, with the keys the log store would use and 128 B values. */
async function rawBatch(db: RawDb, groupId: number, from: number, size: number): Promise<void> {
  const ops = []
  for (let i = 0; i < size; i++)
    ops.push({ type: 'put' as const, key: entryKey(groupId, from + i), value: payload })
  await db.batch(ops, { sync: true })
}

/**
 * One paired trial: a raw classic-level database and a log store (each in a fresh
 * directory) written in alternation, batch for batch, so both see the same disk and the
 * same neighbours. Store: append `size` entries to one group, then `flush()` (group commit,
 * one fsync). Returns each side's entries per second, from the time spent in each.
 */
async function pairedAppends(size: number): Promise<{ raw: number; store: number; fsyncP50Ms: number }> {
  return withDir((rawPath) =>
    withDir(async (storePath) => {
      const db = await openRaw(rawPath)
      const engine = await LevelEngine.open(storePath)
      const store = new LogStore(engine)
      const log = await store.openGroup(1)
      let rawMs = 0
      let storeMs = 0
      let n = 0
      const start = performance.now()
      for (let b = 0; b < BATCHES_MAX && performance.now() - start < 2 * TRIAL_MS; b++) {
        const t0 = performance.now()
        await rawBatch(db, 1, n + 1, size)
        const t1 = performance.now()
        log.append(makeEntries(n + 1, size, 1))
        await store.durability.flush()
        const t2 = performance.now()
        rawMs += t1 - t0
        storeMs += t2 - t1
        n += size
      }
      const fsyncP50Ms = quantileOf(store.stats().fsyncLatencyMs, 0.5)
      await store.close()
      await engine.close()
      await db.close()
      return { raw: n / (rawMs / 1000), store: n / (storeMs / 1000), fsyncP50Ms }
    }),
  )
}

/**
 * `groups` writers at once, each a loop of (write `size` entries, await durability).
 * Raw: each writer its own synced classic-level batch (LevelDB merges concurrent writers
 * itself). Store: each writer a group of one LogStore (the group commit merges them);
 * marked: the same with a durability mark (a stamp per batch, the mark file written beside).
 */
async function concurrentWriters(
  groups: number,
  size: number,
  kind: 'raw' | 'store' | 'marked',
): Promise<{ rate: number; opsPerFsync: number }> {
  return withDir(async (path) => {
    let n = 0
    const start = performance.now()
    const until = () => performance.now() - start < TRIAL_MS
    if (kind === 'raw') {
      const db = await openRaw(path)
      await Promise.all(
        Array.from({ length: groups }, async (_, g) => {
          for (let b = 0, from = 1; b < BATCHES_MAX && until(); b++, from += size) {
            await rawBatch(db, g + 1, from, size)
            n += size
          }
        }),
      )
      const rate = n / ((performance.now() - start) / 1000)
      await db.close()
      return { rate, opsPerFsync: Number.NaN }
    }
    const engine = await LevelEngine.open(path)
    const mark = kind === 'marked' ? await DurabilityMark.open(engine, path) : undefined
    const store = new LogStore(engine, { mark })
    const logs = await Promise.all(Array.from({ length: groups }, (_, g) => store.openGroup(g + 1)))
    await Promise.all(
      logs.map(async (log) => {
        for (let b = 0; b < BATCHES_MAX && until(); b++) {
          log.append(makeEntries(log.lastIndex() + 1, size, 1))
          await store.durability.flush()
          n += size
        }
      }),
    )
    const rate = n / ((performance.now() - start) / 1000)
    const stats = store.stats()
    await store.close()
    await mark?.close()
    await engine.close()
    return { rate, opsPerFsync: stats.opsWritten / Math.max(1, stats.batches) }
  })
}

/** An engine that does no I/O: what the log store and group commit cost by themselves. */
const nullEngine: Engine = {
  write: async () => {},
  get: async () => undefined,
  getMany: async (keys) => keys.map(() => undefined),
  range: async () => [],
  keys: async () => [],
  snapshot: async () => ({
    get: async () => undefined,
    getMany: async (keys) => keys.map(() => undefined),
    range: async () => [],
    keys: async () => [],
    close: async () => {},
  }),
  close: async () => {},
}

/** Microseconds of our own CPU per store batch of `size` entries (append + flush, no I/O). */
async function storeCpuPerBatchUs(size: number): Promise<number> {
  const store = new LogStore(nullEngine)
  const log = await store.openGroup(1)
  const batches = Math.max(200, 100_000 / size)
  const start = performance.now()
  for (let b = 0; b < batches; b++) {
    log.append(makeEntries(log.lastIndex() + 1, size, 1))
    await store.durability.flush()
    // Keep the in-memory tail small, as a running node does by compacting behind snapshots.
    if (log.lastIndex() - log.firstIndex() > 10_000) {
      const at = log.lastIndex()
      log.compact({ meta: { index: at, term: 1, conf: log.initialState().conf }, data: new Uint8Array() }, at)
    }
  }
  const us = ((performance.now() - start) * 1000) / batches
  await store.close()
  return us
}

/** Entry reads: `entries(lo, lo + 100)` from the in-memory tail; and recovery from disk. */
async function reads(): Promise<{ rate: number; recoverRate: number }> {
  return withDir(async (path) => {
    const count = 100_000
    let engine = await LevelEngine.open(path)
    let store = new LogStore(engine)
    let log = await store.openGroup(1)
    for (let from = 1; from <= count; from += 1000) log.append(makeEntries(from, 1000, 1))
    await store.durability.flush()
    await store.close()
    await engine.close()
    // Recovery: every entry read from disk and checksummed.
    engine = await LevelEngine.open(path)
    store = new LogStore(engine)
    const t0 = performance.now()
    log = await store.openGroup(1)
    const recoverRate = count / ((performance.now() - t0) / 1000)
    let n = 0
    let lo = 1
    const start = performance.now()
    for (let i = 0; i < BATCHES_MAX && performance.now() - start < TRIAL_MS; i++) {
      n += log.entries(lo, lo + 100, 1 << 20).length
      lo = lo + 100 > count - 100 ? 1 : lo + 100
    }
    const rate = n / ((performance.now() - start) / 1000)
    await store.close()
    await engine.close()
    return { rate, recoverRate }
  })
}

/**
 * LevelEngine (with or without value checksums) for TRIAL_MS each: unsynced batches of 100
 * puts of 128 B values; then range reads of 100 rows, and getMany of 100 keys, over them.
 * Returns puts/s, rows/s and keys/s.
 */
async function engineRates(
  valueChecksums: boolean,
): Promise<{ writes: number; ranges: number; gets: number }> {
  return withDir(async (path) => {
    const engine = await LevelEngine.open(path, { valueChecksums })
    const keyOf = (i: number) => entryKey(1, i)
    let n = 0
    let start = performance.now()
    for (let b = 0; b < BATCHES_MAX && performance.now() - start < TRIAL_MS; b++) {
      const ops = Array.from({ length: 100 }, (_, i) => ({
        type: 'put' as const,
        key: keyOf(n + i),
        value: payload,
      }))
      await engine.write(ops, { sync: false })
      n += 100
    }
    const writes = n / ((performance.now() - start) / 1000)
    let rows = 0
    start = performance.now()
    for (let b = 0; b < BATCHES_MAX && performance.now() - start < TRIAL_MS; b++) {
      rows += (await engine.range({ gte: keyOf((b * 100) % Math.max(1, n - 100)), limit: 100 })).length
    }
    const ranges = rows / ((performance.now() - start) / 1000)
    let keys = 0
    start = performance.now()
    for (let b = 0; b < BATCHES_MAX && performance.now() - start < TRIAL_MS; b++) {
      const from = (b * 7919) % Math.max(1, n - 100)
      keys += (await engine.getMany(Array.from({ length: 100 }, (_, i) => keyOf(from + i)))).length
    }
    const gets = keys / ((performance.now() - start) / 1000)
    await engine.close()
    return { writes, ranges, gets }
  })
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US')

console.log(
  `kv-storage bench: ${ENTRY_BYTES} B entries; per batch size ${TRIALS} paired trials of ~${2 * TRIAL_MS} ms ` +
    '(raw and store batches alternate); medians\n',
)
console.log(
  '| entries per synced batch | raw classic-level entries/s | log store + group commit entries/s | ratio | store fsync p50 (ms) | our CPU per batch (µs, no I/O) | CPU / raw batch time |',
)
console.log('|---:|---:|---:|---:|---:|---:|---:|')
for (const size of BATCH_SIZES) {
  const raw: number[] = []
  const ours: number[] = []
  const ratios: number[] = []
  const p50: number[] = []
  for (let t = 0; t < TRIALS; t++) {
    const r = await pairedAppends(size)
    raw.push(r.raw)
    ours.push(r.store)
    ratios.push(r.store / r.raw)
    p50.push(r.fsyncP50Ms)
  }
  const cpuUs = await storeCpuPerBatchUs(size)
  const rawBatchUs = (size / median(raw)) * 1e6
  console.log(
    `| ${size} | ${fmt(median(raw))} | ${fmt(median(ours))} | ${median(ratios).toFixed(2)}× | ≤ ${median(p50)} | ` +
      `${cpuUs.toFixed(1)} | ${((100 * cpuUs) / rawBatchUs).toFixed(1)}% |`,
  )
}

const groups = 8
const rawConc: number[] = []
const storeConc: number[] = []
const perFsync: number[] = []
for (let t = 0; t < TRIALS; t++) {
  rawConc.push((await concurrentWriters(groups, 10, 'raw')).rate)
  const r = await concurrentWriters(groups, 10, 'store')
  storeConc.push(r.rate)
  perFsync.push(r.opsPerFsync)
}
console.log(
  `\n${groups} concurrent writers, each a loop of (10 entries, await durable): raw ${fmt(median(rawConc))} entries/s, ` +
    `log store ${fmt(median(storeConc))} entries/s (${(median(storeConc) / median(rawConc)).toFixed(2)}×), ` +
    `${median(perFsync).toFixed(1)} ops per group-commit fsync`,
)

// The durability mark's cost: the same writers without and with it, trials alternating.
for (const [writers, size] of [
  [1, 1],
  [8, 10],
]) {
  const plain: number[] = []
  const marked: number[] = []
  const ratios: number[] = []
  for (let t = 0; t < TRIALS; t++) {
    const a = (await concurrentWriters(writers as number, size as number, 'store')).rate
    const b = (await concurrentWriters(writers as number, size as number, 'marked')).rate
    plain.push(a)
    marked.push(b)
    ratios.push(b / a)
  }
  console.log(
    `durability mark, ${writers} writer(s) × (${size} entries, await durable): without ${fmt(median(plain))} entries/s, ` +
      `with ${fmt(median(marked))} entries/s (${median(ratios).toFixed(2)}×, median of per-trial ratios)`,
  )
}

// Value checksums (a CRC32C of key and value on every stored value, checked on every read):
// LevelEngine without and with them, trials alternating; unsynced writes, so that CPU shows.
const checksumRates: Record<'plain' | 'checked', { writes: number[]; ranges: number[]; gets: number[] }> = {
  plain: { writes: [], ranges: [], gets: [] },
  checked: { writes: [], ranges: [], gets: [] },
}
for (let t = 0; t < TRIALS; t++) {
  for (const kind of ['plain', 'checked'] as const) {
    const r = await engineRates(kind === 'checked')
    checksumRates[kind].writes.push(r.writes)
    checksumRates[kind].ranges.push(r.ranges)
    checksumRates[kind].gets.push(r.gets)
  }
}
for (const what of ['writes', 'ranges', 'gets'] as const) {
  const a = median(checksumRates.plain[what])
  const b = median(checksumRates.checked[what])
  console.log(
    `value checksums, ${what === 'writes' ? 'unsynced batches of 100 puts' : what === 'ranges' ? 'range reads of 100 rows' : 'getMany of 100 keys'} ` +
      `(${ENTRY_BYTES} B values): without ${fmt(a)}/s, with ${fmt(b)}/s (${(b / a).toFixed(2)}×)`,
  )
}

const r = await reads()
console.log(`entry reads (entries(lo, lo + 100) from the in-memory tail): ${fmt(r.rate)} entries/s`)
console.log(
  `recovery (open a group of 100,000 entries from disk, checksummed): ${fmt(r.recoverRate)} entries/s`,
)
