/**
 * How long one /metrics collection takes, and the longest the event loop was held meanwhile,
 * for a node leading PARTITIONS partitions that each hold messages of WEIGHTS weights.
 * Usage: `pnpm bench:scrape [PARTITIONS=64] [WEIGHTS=1000] [scoped]` (scoped: a token that
 * sees one queue of eight).
 */
import type { WeightStats } from '@mq/protocol'
import { NodeMetrics } from '../src/metrics/node-metrics'
import type { NodeView, PartitionView } from '../src/node-view'

const partitions = Number(process.argv[2] ?? 64)
const weightCount = Number(process.argv[3] ?? 1000)
const scoped = process.argv[4] === 'scoped'

const weights: WeightStats[] = Array.from({ length: weightCount }, (_, i) => ({
  weight: i + 1,
  ready: 1,
  delayed: 0,
  leased: 0,
  dead: 0,
  oldestAgeMs: 5,
  targetShare: (i + 1) / ((weightCount * (weightCount + 1)) / 2),
  achievedShare: 0,
}))
const stats = async () => {
  await new Promise((resolve) => setImmediate(resolve))
  return { weights, messages: weightCount, waiting: 0, windowLeases: 0 }
}
const led = Array.from(
  { length: partitions },
  (_, partition) =>
    ({ groupId: 1, queue: `q${partition % 8}`, partition, stats }) as unknown as PartitionView,
)
const view: NodeView = {
  nodeId: 'n1',
  serving: () => true,
  failed: () => false,
  groups: () => [],
  ledPartitions: () => led,
  metaLeaderId: () => 'n1',
}

let last = performance.now()
let heldMs = 0
const tick = setInterval(() => {
  const now = performance.now()
  heldMs = Math.max(heldMs, now - last)
  last = now
}, 1)
const start = performance.now()
const text = await new NodeMetrics('n1').render(view, scoped ? (queue) => queue === 'q1' : undefined)
const end = performance.now()
clearInterval(tick)
heldMs = Math.max(heldMs, end - last)
console.log(
  JSON.stringify({
    partitions,
    weights: weightCount,
    scoped,
    ms: Math.round(end - start),
    loopHeldMsMax: Math.round(heldMs),
    bytes: text.length,
    lines: text.split('\n').length,
  }),
)
