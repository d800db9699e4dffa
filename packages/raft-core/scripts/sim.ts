/**
 * The simulator's command line. `sim --seeds N [--from F]` sweeps seeds F..F+N-1 and stops at
 * the first failure, printing it and the command that replays it; `sim --seed S` replays one,
 * and `sim --seed S --trace` prints its events (role changes, messages, commits) as it goes.
 * `--rejoin` runs the seeds with replicas added again empty under their id (REJOIN_WIPED),
 * `--few` with groups that shrink to one or two voters and grow again (FEW_VOTERS).
 */
import { SimCluster, SimFailure } from '../src/sim/cluster'
import { FEW_VOTERS, REJOIN_WIPED } from '../src/sim/swarm'

function arg(name: string): number | undefined {
  const i = process.argv.indexOf(`--${name}`)
  if (i < 0) return undefined
  const v = Number(process.argv[i + 1])
  if (!Number.isSafeInteger(v) || v < 0) {
    console.error(`--${name} needs a non-negative integer`)
    process.exit(2)
  }
  return v
}

const one = arg('seed')
const count = one !== undefined ? 1 : (arg('seeds') ?? 100)
const from = one ?? arg('from') ?? 1
const started = performance.now()
let events = 0
let committed = 0
for (let s = from; s < from + count; s++) {
  try {
    const mix = {
      ...(process.argv.includes('--rejoin') ? REJOIN_WIPED : {}),
      ...(process.argv.includes('--few') ? FEW_VOTERS : {}),
    }
    const cluster = new SimCluster(s, mix)
    if (one !== undefined && process.argv.includes('--trace')) cluster.trace = (line) => console.log(line)
    if (one !== undefined) console.log(JSON.stringify(cluster.options))
    const r = cluster.run()
    events += r.events
    committed += r.committed
    if (one !== undefined) console.log(JSON.stringify(r))
  } catch (e) {
    if (e instanceof SimFailure) {
      console.error(e.message)
      process.exit(1)
    }
    throw e
  }
  if ((s - from + 1) % 1000 === 0) {
    const sec = (performance.now() - started) / 1000
    console.log(`${s - from + 1} seeds clean (${from}..${s}) in ${sec.toFixed(0)}s`)
  }
}
const sec = (performance.now() - started) / 1000
console.log(
  `ok: ${count} seeds clean (${from}..${from + count - 1}) in ${sec.toFixed(1)}s; ${events} events, ${committed} entries committed`,
)
