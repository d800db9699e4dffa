import { buildApps } from '../build-apps'
import { runFailed, runFaults } from '../src/fault-run'
import { NetNamespaces } from '../src/netns'

// The cluster runs the built server: build it (turbo's cache makes this quick).
buildApps()

// Long fault runs: pnpm --filter @mq/e2e faults --seconds N --seed S --nodes 3|5 [--network | --netns] [--corrupt] [--disk] [--scale] [--overlap N]
// (or from the root: pnpm chaos --duration 30m --seed S [--nodes 5] [--network | --netns] [--corrupt] [--disk] [--scale] [--overlap N])
// The modes combine (all but --network with --netns): the schedule draws from the process
// faults plus every chosen mode's kinds.
// (--network: a proxy in front of every node, and one-way cuts among the faults;
//  --netns: every node in its own network namespace (root), and partitions among the faults;
//  --scale: scaleDataGroups up and down among the faults;
//  --corrupt: once per run, a data follower whose write-ahead log is cut short or has flipped
//  bits must refuse to start, and is replaced by a fresh node under a new id;
//  --disk: every node's data dir on a 512 MiB tmpfs (root), and a data follower's or a data
//  group leader's disk filled up among the faults: it stops serving on ENOSPC, then is freed
//  and restarted;
//  --overlap N: N nemesis loops (2 or 3) on their own schedules at once, so that faults
//  overlap in time (never two on one node, one partition at a time);
//  --ordered-keys: the queue has ordered keys; p0 sends under 64 keys, each key's order is
//  checked, and the scaler adds no partitions;
//  --skew-ms MS: every node but n1 with its wall clock off by up to MS either way (libfaketime),
//  --keep: save the history and the nodes' output even when the run passes)
// Without --seed a random one is drawn and printed, so that the run can be replayed.

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

function intArg(name: string, fallback: number): number {
  const raw = arg(name)
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer, got ${raw}`)
  return n
}

/** `--duration 30m` (s, m or h) or `--seconds N`; 60 s by default. */
function durationSeconds(): number {
  const raw = arg('duration')
  if (raw === undefined) return intArg('seconds', 60)
  const m = /^([0-9]+)(s|m|h)$/.exec(raw)
  if (!m) throw new Error(`--duration must look like 90s, 30m or 2h, got ${raw}`)
  return Number(m[1]) * ({ s: 1, m: 60, h: 3600 } as const)[m[2] as 's' | 'm' | 'h']
}

const seconds = durationSeconds()
const seed = intArg('seed', Math.floor(Math.random() * 2 ** 31))
const nodes = intArg('nodes', 3)
if (nodes !== 3 && nodes !== 5) throw new Error(`--nodes must be 3 or 5, got ${nodes}`)

const network = process.argv.includes('--network')
const netns = process.argv.includes('--netns')
if (network && netns) throw new Error('--network (proxies) and --netns (namespaces) exclude each other')
if (netns && !NetNamespaces.usable())
  throw new Error('--netns needs root and a kernel that allows network namespaces')

const scale = process.argv.includes('--scale')
const corrupt = process.argv.includes('--corrupt')
const disk = process.argv.includes('--disk')
if (disk && process.getuid?.() !== 0) throw new Error('--disk needs root (it mounts a tmpfs per node)')

const overlap = intArg('overlap', 1)
if (overlap < 1 || overlap > 3) throw new Error(`--overlap must be 1, 2 or 3, got ${overlap}`)

const keep = process.argv.includes('--keep')
const orderedKeys = process.argv.includes('--ordered-keys')
const snapshotEntries = arg('snapshot-entries') === undefined ? undefined : intArg('snapshot-entries', 0)
if (snapshotEntries !== undefined && snapshotEntries < 10)
  throw new Error(`--snapshot-entries must be at least 10, got ${snapshotEntries}`)
const skewMs = arg('skew-ms') === undefined ? 0 : intArg('skew-ms', 0)
const r = await runFaults({
  seed,
  nodes,
  faultSeconds: seconds,
  network,
  netns,
  scale,
  corrupt,
  disk,
  overlap,
  keep,
  orderedKeys,
  skewMs,
  ...(snapshotEntries !== undefined ? { snapshotEntries } : {}),
})
// A run that injected nothing proved nothing (every step's target lookup failed, say).
if (r.faults === 0) console.error('no fault was injected')
// Nor one in which no enqueue was acknowledged (nothing could be lost).
if (r.report.ackedEnqueues === 0) console.error('no enqueue was acknowledged')
const failed = runFailed(r)
if (r.buildChanged.length > 0) {
  console.error(`INVALID: the server was rebuilt during the run; rerun on a quiet tree: ${r.replay}`)
  process.exitCode = 2
} else if (failed) {
  console.error(`FAILED: seed ${seed}; rerun: ${r.replay}`)
  process.exitCode = 1
} else
  console.log(`passed: seed ${seed}${r.artifacts ? `; history and node output saved in ${r.artifacts}` : ''}`)
