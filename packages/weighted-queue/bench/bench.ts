/**
 * Benchmarks (not a test): enqueue → lease → ack cycles on the memory and LevelDB engines in
 * batches of 1 and 100, and scheduler decisions per second with 1, 10 and 1,000 weights.
 * Run: pnpm --filter @mq/weighted-queue bench   (BENCH_SECONDS=… to change the duration)
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import {
  type BatchOp,
  type Engine,
  type KeyRange,
  LevelEngine,
  MemoryEngine,
  type WriteOptions,
} from '@mq/kv-storage'
import { DirectPartition, type EnqueueMessage, WeightedScheduler } from '../src/index'

const seconds = Number(process.env.BENCH_SECONDS ?? '2')
const only = process.env.BENCH_ONLY

interface Row {
  readonly name: string
  readonly value: string
}
const rows: Row[] = []

/**
 * Rates are per second of this process's CPU time (user + system, all threads), so that the
 * figures hold on a shared machine where wall time includes waiting for a core; the wall-time
 * rate is printed beside it.
 */
function cpuSeconds(): number {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}
function rates(count: number, wallStartMs: number, cpuStart: number): string {
  const wall = count / ((performance.now() - wallStartMs) / 1000)
  const cpu = count / (cpuSeconds() - cpuStart)
  return `${Math.round(cpu).toLocaleString('en-US')} (wall ${Math.round(wall).toLocaleString('en-US')})`
}

/** Counts what the partition asks of its engine: a machine-independent cost figure. */
class CountingEngine implements Engine {
  writeOps = 0
  readCalls = 0
  /** Keys looked up by get/getMany plus entries returned by range. */
  readKeys = 0
  constructor(private readonly inner: Engine) {}
  get(key: Uint8Array) {
    this.readCalls++
    this.readKeys++
    return this.inner.get(key)
  }
  getMany(keys: readonly Uint8Array[]) {
    this.readCalls++
    this.readKeys += keys.length
    return this.inner.getMany(keys)
  }
  async range(r: KeyRange) {
    this.readCalls++
    const out = await this.inner.range(r)
    this.readKeys += out.length
    return out
  }
  async keys(r: KeyRange) {
    this.readCalls++
    const out = await this.inner.keys(r)
    this.readKeys += out.length
    return out
  }
  write(ops: readonly BatchOp[], o: WriteOptions) {
    this.writeOps += ops.length
    return this.inner.write(ops, o)
  }
  snapshot() {
    return this.inner.snapshot()
  }
  close() {
    return this.inner.close()
  }
}

async function engineWork(batch: number): Promise<void> {
  const counting = new CountingEngine(new MemoryEngine())
  // 2,000 cycles of 3 ms: past the 3,000 ms visibility, so the warm-up half reaches the
  // steady state in which lease groups fall due and the measured half includes their expiry.
  const cyclesPerRun = 2_000
  const q = await DirectPartition.open(counting, Uint8Array.of(0x51, 1), { queueMessagesMax: 1_000_000 })
  const state = { now: 1_000, msgSeq: 0 }
  for (let i = 0; i < 2 * cyclesPerRun; i++) {
    if (i === cyclesPerRun) {
      counting.writeOps = 0
      counting.readCalls = 0
      counting.readKeys = 0
    }
    await cycle(q, batch, 10, state)
  }
  const per = (n: number) => (n / (cyclesPerRun * batch)).toFixed(2)
  rows.push({
    name: `memory: engine work per message, batch ${batch} (steady state)`,
    value: `${per(counting.writeOps)} write ops, ${per(counting.readCalls)} read calls, ${per(counting.readKeys)} keys read`,
  })
}

/** One enqueue → lease → ack cycle of `batch` messages over `weights` weights. */
async function cycle(
  q: DirectPartition,
  batch: number,
  weights: number,
  state: { now: number; msgSeq: number },
) {
  const body = new Uint8Array(100)
  const msgs: EnqueueMessage[] = []
  for (let i = 0; i < batch; i++) msgs.push({ weight: 1 + (state.msgSeq++ % weights), body })
  const e = await q.apply({ type: 'enqueue', messages: msgs }, state.now++)
  if (e.type !== 'enqueue') throw new Error(`enqueue failed: ${JSON.stringify(e)}`)
  // A visibility of 3,000 ms of the synthetic clock (3 ms per cycle): lease groups fall due
  // within the run, so the cost of expiring their (acked) entries is measured too.
  const l = await q.apply(
    { type: 'lease', consumerId: 'bench', max: batch, visibilityMs: 3_000 },
    state.now++,
  )
  if (l.type !== 'lease' || l.leases.length !== batch) throw new Error('lease returned too few')
  const a = await q.apply({ type: 'ack', leaseIds: l.leases.map((x) => x.leaseId) }, state.now++)
  if (a.type !== 'ack' || a.statuses.some((s) => s !== 'ok')) throw new Error('ack failed')
}

async function cycles(engineName: string, engine: Engine, batch: number, weights: number): Promise<void> {
  const q = await DirectPartition.open(engine, Uint8Array.of(0x51, 1), { queueMessagesMax: 1_000_000 })
  const state = { now: 1_000, msgSeq: 0 }
  let messages = 0
  const deadline = performance.now() + seconds * 1000
  const started = performance.now()
  const cpuStart = cpuSeconds()
  while (performance.now() < deadline) {
    await cycle(q, batch, weights, state)
    messages += batch
  }
  rows.push({
    name: `${engineName}: enqueue→lease→ack, batch ${batch}, ${weights} weights`,
    value: `${rates(messages, started, cpuStart)} messages/s`,
  })
}

/**
 * A consumer draining a backlog: `count` messages enqueued first (batches of 512, one weight),
 * then leased `batch` at a time and acked. Unlike `cycles`, whose leases find their messages
 * still in memory, each lease here reads its messages from the engine, as a replica does when
 * consumers drain a backlog (the cluster's `mq-bench consume`). With `keys`, the partition has
 * ordered keys and the messages go to that many keys in turn: a lease finds at most one
 * message per key (the turn holders), and each ack hands the key's turn to its next message.
 */
async function drain(
  engineName: string,
  engine: Engine,
  count: number,
  batch: number,
  keys?: number,
): Promise<void> {
  const q = await DirectPartition.open(engine, Uint8Array.of(0x51, 1), {
    queueMessagesMax: 10_000_000,
    ...(keys === undefined ? {} : { orderedKeys: 1 }),
  })
  let now = 1_000
  const body = new Uint8Array(128)
  for (let i = 0; i < count; i += 512) {
    const msgs: EnqueueMessage[] = []
    for (let j = 0; j < Math.min(512, count - i); j++)
      msgs.push({ weight: 1, body, ...(keys === undefined ? {} : { key: `k${(i + j) % keys}` }) })
    await q.apply({ type: 'enqueue', messages: msgs }, now++)
  }
  let drained = 0
  const started = performance.now()
  const cpuStart = cpuSeconds()
  while (drained < count) {
    const l = await q.apply({ type: 'lease', consumerId: 'bench', max: batch, visibilityMs: 30_000 }, now++)
    if (l.type !== 'lease' || l.leases.length === 0) throw new Error('lease found no message')
    const a = await q.apply({ type: 'ack', leaseIds: l.leases.map((x) => x.leaseId) }, now++)
    if (a.type !== 'ack' || a.statuses.some((x) => x !== 'ok')) throw new Error('ack failed')
    drained += l.leases.length
  }
  rows.push({
    name: `${engineName}: drain a backlog of ${count.toLocaleString('en-US')}${keys === undefined ? '' : ` over ${keys} ordered key${keys === 1 ? '' : 's'}`}, lease+ack ${batch} at a time`,
    value: `${rates(drained, started, cpuStart)} messages/s`,
  })
}

function decisions(k: number): void {
  const s = new WeightedScheduler()
  const ws: number[] = []
  for (let i = 0; i < k; i++) ws.push(k === 1 ? 1 : 1 + Math.floor((i * 999) / (k - 1)))
  for (const w of ws) s.activate(w)
  let n = 0
  const started = performance.now()
  const cpuStart = cpuSeconds()
  const deadline = started + seconds * 1000
  while (performance.now() < deadline) {
    for (let i = 0; i < 10_000; i++) s.next()
    n += 10_000
  }
  rows.push({
    name: `scheduler decisions, ${k} backlogged weights`,
    value: `${rates(n, started, cpuStart)} decisions/s`,
  })
}

type EngineFactory = () => Promise<{ engine: Engine; close: () => Promise<void> }>
const engines: [string, EngineFactory][] = [
  [
    'memory',
    async () => {
      const engine = new MemoryEngine()
      return { engine, close: () => engine.close() }
    },
  ],
  ['leveldb', () => levelEngine(true)],
  // The same without kv-storage's value checksums (a CRC32C per stored value), to see their cost.
  ['leveldb-plain', () => levelEngine(false)],
]

async function levelEngine(valueChecksums: boolean): Promise<{ engine: Engine; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'wq-bench-'))
  const engine = await LevelEngine.open(dir, { valueChecksums })
  return {
    engine,
    close: async () => {
      await engine.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

for (const [name, make] of engines) {
  if (only && !name.includes(only)) continue
  for (const batch of [1, 100]) {
    const { engine, close } = await make()
    await cycles(name, engine, batch, 10)
    await close()
  }
  if (name === 'memory') continue
  for (const [count, batch, keys] of [
    [100_000, 512, undefined],
    // Smaller leases, as consumers' refills are (prefetch / (2 × partitions)).
    [100_000, 64, undefined],
    [100_000, 512, 512],
    [20_000, 1, 1],
    [20_000, 1, undefined],
  ] as const) {
    const { engine, close } = await make()
    await drain(name, engine, count, batch, keys)
    await close()
  }
}
if (!only || only === 'scheduler') for (const k of [1, 10, 1000]) decisions(k)
if (!only || only === 'work') for (const batch of [1, 100]) await engineWork(batch)

console.log(`| benchmark (${seconds} s each, node ${process.version}) | result |`)
console.log('| --- | --- |')
for (const r of rows) console.log(`| ${r.name} | ${r.value} |`)
