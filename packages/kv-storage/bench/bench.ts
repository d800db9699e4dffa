/**
 * The kv-storage benchmark (not a test): synced appends per second against batch size,
 * through the Raft log store + group commit and through raw classic-level synced batches
 * of the same sizes, in the same run; then entry reads per second.
 *
 *   pnpm --filter @mq/kv-storage bench     (KV_BENCH_MS: ms per trial, default 1000; KV_BENCH_TRIALS: default 5)
 *
 * Each trial uses a fresh database in a temp dir. Raw and store trials alternate, five of
 * each per batch size, and the median is reported, so a noisy neighbour hurts both alike.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Entry } from '@mq/raft-core'
import { ClassicLevel } from 'classic-level'
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

async function withDir<T>(fn: (path: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'kv-bench-'))
  try {
    return await fn(join(dir, 'db'))
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

/** Raw classic-level: one synced batch of `size` puts (same keys and 128 B values) per round. */
async function rawAppends(size: number): Promise<number> {
  return withDir(async (path) => {
    const db = new ClassicLevel<Uint8Array, Uint8Array>(path, { keyEncoding: 'view', valueEncoding: 'view' })
    await db.open()
    let index = 1
    let n = 0
    const start = performance.now()
    for (let b = 0; b < BATCHES_MAX && performance.now() - start < TRIAL_MS; b++) {
      const ops = []
      for (let i = 0; i < size; i++)
        ops.push({ type: 'put' as const, key: entryKey(1, index++), value: payload })
      await db.batch(ops, { sync: true })
      n += size
    }
    const rate = n / ((performance.now() - start) / 1000)
    await db.close()
    return rate
  })
}

function makeEntries(from: number, size: number, term: number): Entry[] {
  const out: Entry[] = []
  for (let i = 0; i < size; i++)
    out.push({ index: from + i, term, type: 0, timestampMs: from + i, data: payload })
  return out
}

/** Log store: append `size` entries to `groups` groups, then one flush (group commit), per round. */
async function storeAppends(size: number, groups = 1): Promise<{ rate: number; fsyncP50Ms: number }> {
  return withDir(async (path) => {
    const engine = await LevelEngine.open(path)
    const store = new LogStore(engine)
    const logs = await Promise.all(Array.from({ length: groups }, (_, g) => store.openGroup(g + 1)))
    let n = 0
    const start = performance.now()
    for (let b = 0; b < BATCHES_MAX && performance.now() - start < TRIAL_MS; b++) {
      for (const log of logs) log.append(makeEntries(log.lastIndex() + 1, size, 1))
      await store.durability.flush()
      n += size * groups
    }
    const rate = n / ((performance.now() - start) / 1000)
    const fsyncP50Ms = quantileOf(store.stats().fsyncLatencyMs, 0.5)
    await store.close()
    await engine.close()
    return { rate, fsyncP50Ms }
  })
}

/** Many groups, each its own writer loop (append, await flush), sharing one group commit. */
async function concurrentGroups(
  groups: number,
  size: number,
): Promise<{ rate: number; opsPerBatch: number }> {
  return withDir(async (path) => {
    const engine = await LevelEngine.open(path)
    const store = new LogStore(engine)
    const logs = await Promise.all(Array.from({ length: groups }, (_, g) => store.openGroup(g + 1)))
    let n = 0
    const start = performance.now()
    await Promise.all(
      logs.map(async (log) => {
        for (let b = 0; b < BATCHES_MAX && performance.now() - start < TRIAL_MS; b++) {
          log.append(makeEntries(log.lastIndex() + 1, size, 1))
          await store.durability.flush()
          n += size
        }
      }),
    )
    const rate = n / ((performance.now() - start) / 1000)
    const stats = store.stats()
    await store.close()
    await engine.close()
    return { rate, opsPerBatch: stats.opsWritten / Math.max(1, stats.batches) }
  })
}

/** Reads through `entries(lo, hi, bytesMax)` from the in-memory tail, 100 entries per call. */
async function memoryReads(): Promise<{ rate: number; recoverRate: number }> {
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

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US')

console.log(
  `kv-storage bench: ${ENTRY_BYTES} B entries, ${TRIALS} alternating trials of ${TRIAL_MS} ms, median\n`,
)
console.log(
  '| entries per synced batch | raw classic-level entries/s | log store + group commit entries/s | ratio | store fsync p50 (ms) |',
)
console.log('|---:|---:|---:|---:|---:|')
for (const size of BATCH_SIZES) {
  const raw: number[] = []
  const ours: number[] = []
  const p50: number[] = []
  for (let t = 0; t < TRIALS; t++) {
    raw.push(await rawAppends(size))
    const r = await storeAppends(size)
    ours.push(r.rate)
    p50.push(r.fsyncP50Ms)
  }
  const ratio = median(ours) / median(raw)
  console.log(
    `| ${size} | ${fmt(median(raw))} | ${fmt(median(ours))} | ${ratio.toFixed(2)}× | ${median(p50)} |`,
  )
}

const groups = 8
const conc: number[] = []
const perBatch: number[] = []
for (let t = 0; t < TRIALS; t++) {
  const r = await concurrentGroups(groups, 10)
  conc.push(r.rate)
  perBatch.push(r.opsPerBatch)
}
console.log(
  `\n${groups} groups, each its own loop of (append 10, await flush): ${fmt(median(conc))} entries/s, ` +
    `${median(perBatch).toFixed(1)} ops per fsync (one batch gathers several groups)`,
)

const reads = await memoryReads()
console.log(`entry reads (entries(lo, lo+100) from the in-memory tail): ${fmt(reads.rate)} entries/s`)
console.log(
  `recovery (open a group of 100,000 entries from disk, checksummed): ${fmt(reads.recoverRate)} entries/s`,
)
