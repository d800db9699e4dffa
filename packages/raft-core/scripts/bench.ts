/**
 * The raft-core benchmark (not a test): committed entries per second for a 3-node cluster of
 * cores in the simulator, 128-byte proposals. `bench [--entries N] [--batch B]`.
 */
import { measureThroughput } from '../src/sim/throughput'

/** `--name N`: a whole number of at least 1, else `dflt`; anything else ends the run saying so. */
function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`)
  if (i < 0) return dflt
  const text = process.argv[i + 1]
  const n = Number(text)
  if (text === undefined || !/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
    console.error(
      `raft-core bench: --${name} takes a whole number of at least 1, got ${JSON.stringify(text ?? '')}`,
    )
    process.exit(2)
  }
  return n
}

const entries = arg('entries', 2_000_000)
const batches = process.argv.includes('--batch') ? [arg('batch', 1024)] : [1, 64, 1024, 4096]
console.log(
  `raft-core bench: 3 nodes, 128-byte proposals, ${entries} entries per run, node ${process.version}`,
)
for (const batch of batches) {
  const n = batch === 1 ? Math.min(entries, 200_000) : entries
  measureThroughput({
    entries: Math.min(n, 50_000),
    payloadBytes: 128,
    batch,
    nodeCount: 3,
    compactEntries: 100_000,
    nowMs: () => performance.now(),
  }) // warm-up
  const r = measureThroughput({
    entries: n,
    payloadBytes: 128,
    batch,
    nodeCount: 3,
    compactEntries: 100_000,
    nowMs: () => performance.now(),
  })
  console.log(
    `batch ${String(batch).padStart(5)}: ${r.entriesPerSec.toLocaleString('en-US').padStart(10)} committed entries/s (${r.committed} in ${r.elapsedMs.toFixed(0)} ms, ${r.messages} messages)`,
  )
}
