/**
 * Interleaved A/B of the memory-engine enqueue → lease → ack cycle (batches of 100, 10
 * weights, 100-byte bodies) between two source trees loaded into one process: 250 ms
 * slices, alternating, so that a busy machine slows both alike (the steadiest comparison
 * on a shared box). Each tree is a repository root; its packages/weighted-queue and
 * packages/kv-storage sources are imported (bench/compare.sh prepares the old one).
 *
 *   node --conditions=source --import tsx bench/interleaved.ts <old root> <new root>   (SLICES=20)
 */
import { performance } from 'node:perf_hooks'

interface Side {
  readonly root: string
  readonly apply: (command: unknown, nowMs: number) => Promise<unknown>
  nowMs: number
  seq: number
  messages: number
  cpuSeconds: number
}

const BATCH = 100
const SLICE_MS = 250
const slices = Number(process.env.SLICES ?? 20)
const roots = process.argv.slice(2)
if (roots.length !== 2) throw new Error('usage: interleaved.ts <old root> <new root>')

async function open(root: string): Promise<Side> {
  const wq = await import(`${root}/packages/weighted-queue/src/index.ts`)
  const kv = await import(`${root}/packages/kv-storage/src/index.ts`)
  const q = await wq.DirectPartition.open(new kv.MemoryEngine(), Uint8Array.of(0x51, 1), {
    queueMessagesMax: 1_000_000,
  })
  return { root, apply: (c, n) => q.apply(c, n), nowMs: 1_000, seq: 0, messages: 0, cpuSeconds: 0 }
}

const body = new Uint8Array(100)
async function cycle(s: Side): Promise<void> {
  const messages = []
  for (let i = 0; i < BATCH; i++) messages.push({ weight: 1 + (s.seq++ % 10), body })
  await s.apply({ type: 'enqueue', messages }, s.nowMs++)
  const l = (await s.apply(
    { type: 'lease', consumerId: 'bench', max: BATCH, visibilityMs: 3_000 },
    s.nowMs++,
  )) as {
    leases: { leaseId: string }[]
  }
  if (l.leases.length !== BATCH) throw new Error(`${s.root}: lease returned too few`)
  const a = (await s.apply({ type: 'ack', leaseIds: l.leases.map((x) => x.leaseId) }, s.nowMs++)) as {
    statuses: string[]
  }
  if (a.statuses.some((x) => x !== 'ok')) throw new Error(`${s.root}: ack failed`)
}

const sides = [await open(roots[0] as string), await open(roots[1] as string)]
// Two warm-up slices each, then `slices` measured ones, the order flipping every round.
for (let k = 0; k < slices + 2; k++) {
  for (const s of k % 2 === 0 ? sides : [...sides].reverse()) {
    const cpu = process.cpuUsage()
    const end = performance.now() + SLICE_MS
    let n = 0
    while (performance.now() < end) {
      await cycle(s)
      n += BATCH
    }
    const used = process.cpuUsage(cpu)
    if (k >= 2) {
      s.messages += n
      s.cpuSeconds += (used.user + used.system) / 1e6
    }
  }
}
const rate = (s: Side) => s.messages / s.cpuSeconds
for (const s of sides)
  console.log(`${s.root}: ${Math.round(rate(s)).toLocaleString('en-US')} messages per CPU-second`)
console.log(`ratio new/old: ${(rate(sides[1] as Side) / rate(sides[0] as Side)).toFixed(2)}`)
