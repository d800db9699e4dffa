import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LevelEngine, LogStore, MemoryEngine } from '@mq/kv-storage'
import { EntryType } from '@mq/raft-core'
import { CommandType, DirectPartition } from '@mq/weighted-queue'
import { memoryFsOf } from '../cluster'
import { LatencyHistogram, round } from '../histogram'
import type { ScenarioResult } from '../result'
import { microRaftCore } from './micro-raft'

export interface MicroOptions {
  /** weighted-queue enqueue→lease→ack cycles of one message. */
  readonly cycles: number
  /** kv-storage synced batches. */
  readonly batches: number
  readonly batchEntries: number
}

export const MICRO_DEFAULTS: MicroOptions = { cycles: 20_000, batches: 50, batchEntries: 1000 }

/** weighted-queue: enqueue → lease → ack of one message per cycle, and in batches of 100. */
export async function microWeightedQueue(cycles: number): Promise<ScenarioResult> {
  const q = await DirectPartition.open(new MemoryEngine(), Uint8Array.of(1))
  const body = new Uint8Array(100)
  let now = 1_000_000
  const cycle = new LatencyHistogram()
  const weights = [1, 3, 9]
  const start = performance.now()
  for (let i = 0; i < cycles; i++) {
    const t0 = performance.now()
    await q.apply(
      { type: CommandType.Enqueue, messages: [{ body, weight: weights[i % 3] as number }] },
      now++,
    )
    const r = await q.apply(
      { type: CommandType.Lease, consumerId: 'bench', max: 1, visibilityMs: 60_000 },
      now++,
    )
    if (r.type !== 'lease' || r.leases.length !== 1) throw new Error(`lease failed: ${JSON.stringify(r)}`)
    await q.apply({ type: CommandType.Ack, leaseIds: [r.leases[0]?.leaseId as string] }, now++)
    cycle.record(performance.now() - t0)
  }
  const singleS = (performance.now() - start) / 1000
  const batch = 100
  const batchCycles = Math.max(1, Math.floor(cycles / batch))
  const start2 = performance.now()
  for (let i = 0; i < batchCycles; i++) {
    const messages = Array.from({ length: batch }, (_, k) => ({ body, weight: weights[k % 3] as number }))
    await q.apply({ type: CommandType.Enqueue, messages }, now++)
    const r = await q.apply(
      { type: CommandType.Lease, consumerId: 'bench', max: batch, visibilityMs: 60_000 },
      now++,
    )
    if (r.type !== 'lease' || r.leases.length !== batch) throw new Error(`lease failed: ${JSON.stringify(r)}`)
    await q.apply({ type: CommandType.Ack, leaseIds: r.leases.map((l) => l.leaseId) }, now++)
  }
  const batchS = (performance.now() - start2) / 1000
  return {
    scenario: 'micro-weighted-queue',
    params: { cycles, batch, engine: 'memory' },
    metrics: {
      cyclesPerS: round(cycles / singleS, 0),
      batchedMsgsPerS: round((batchCycles * batch) / batchS, 0),
      batchedVsSingle: round((batchCycles * batch * singleS) / (cycles * batchS), 2),
    },
    latency: { cycle: cycle.summary() },
  }
}

/**
 * kv-storage: `batches` synced batches of `entries` Raft entries through LogStore (append +
 * durability.flush), against the same number of synced puts written straight to LevelEngine
 * (the classic-level baseline, same process, same disk).
 */
export async function microKvStorage(batches: number, entries: number): Promise<ScenarioResult> {
  const dir = mkdtempSync(join(tmpdir(), 'mq-bench-kv-'))
  // Under $TMPDIR, a tmpfs on some systems: there a "synced" batch reaches no disk.
  const memoryFs = memoryFsOf(dir)
  try {
    const data = new Uint8Array(100).fill(7)
    // Both stores are written alternately, batch by batch, so that both see the same disk
    // and machine load; each rate is over its own write time only.
    const raw = await LevelEngine.open(join(dir, 'raw'))
    const engine = await LevelEngine.open(join(dir, 'log'))
    const store = new LogStore(engine)
    const log = await store.openGroup(1)
    const rawBatch = new LatencyHistogram()
    const logBatch = new LatencyHistogram()
    let rawMs = 0
    let logMs = 0
    let key = 0
    let index = log.lastIndex()
    for (let b = 0; b < batches; b++) {
      const ops = Array.from({ length: entries }, () => {
        const k = new Uint8Array(8)
        new DataView(k.buffer).setBigUint64(0, BigInt(key++))
        return { type: 'put' as const, key: k, value: data }
      })
      const s0 = performance.now()
      await raw.write(ops, { sync: true })
      const s1 = performance.now()
      rawBatch.record(s1 - s0)
      rawMs += s1 - s0
      const es = Array.from({ length: entries }, () => ({
        index: ++index,
        term: 1,
        type: EntryType.Normal,
        timestampMs: 0,
        data,
      }))
      const s2 = performance.now()
      log.append(es)
      await store.durability.flush()
      const s3 = performance.now()
      logBatch.record(s3 - s2)
      logMs += s3 - s2
    }
    const rawS = rawMs / 1000
    const logS = logMs / 1000
    await store.close()
    await engine.close()
    await raw.close()

    // One synced put at a time: what batching saves.
    const single = await LevelEngine.open(join(dir, 'single'))
    const singles = Math.min(500, batches * entries)
    const t2 = performance.now()
    for (let i = 0; i < singles; i++) {
      await single.write([{ type: 'put', key: Uint8Array.of(i >> 8, i & 255), value: data }], { sync: true })
    }
    const singleS = (performance.now() - t2) / 1000
    await single.close()

    const rawPerS = (batches * entries) / rawS
    const logPerS = (batches * entries) / logS
    return {
      scenario: 'micro-kv-storage',
      params: { batches, entries, valueBytes: data.length },
      metrics: {
        rawLevelPutsPerS: round(rawPerS, 0),
        logStoreEntriesPerS: round(logPerS, 0),
        logStoreVsRaw: round(logPerS / rawPerS, 2),
        singleSyncedPutsPerS: round(singles / singleS, 0),
      },
      latency: { rawSyncedBatch: rawBatch.summary(), logStoreSyncedBatch: logBatch.summary() },
      notes: memoryFs
        ? [`written on ${memoryFs} (${dir}): the syncs reached no disk (set TMPDIR to a folder on a disk)`]
        : [],
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * The `micro` scenario. raft-core's simulator is not exported, so its figure comes from
 * three RawNodes pumped in memory (micro-raft.ts).
 */
export async function runMicro(o: MicroOptions): Promise<ScenarioResult[]> {
  return [
    await microWeightedQueue(o.cycles),
    await microKvStorage(o.batches, o.batchEntries),
    microRaftCore(o.batches * 10, 100),
  ]
}
