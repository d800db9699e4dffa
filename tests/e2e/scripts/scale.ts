import { buildApps } from '../build-apps'
import { runScale } from '../src/scale-run'
import { outcomeProblems } from '../src/steady-load'

// The cluster runs the built server: build it (turbo's cache makes this quick).
buildApps()

// A longer scaling run than the CI slice (test/scale.test.ts):
//   pnpm --filter @mq/e2e scale [--steps 6,2,5,3] [--partitions 12] [--nodes 3] [--seed S] [--no-kill] [--no-join]
// Scales the data groups through each step under load (SIGKILLing the meta leader during the
// first step's copy unless --no-kill), then (unless --no-join) joins a node and drains n3,
// then drains the queue and checks the history. Prints every move with its client-visible
// pause; exits 1 on any anomaly.

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? process.argv[i + 1] : undefined
}

function intArg(name: string, fallback: number, min: number, max: number): number {
  const raw = arg(name)
  if (raw === undefined) return fallback
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be an integer from ${min} to ${max}, got ${raw}`)
  return n
}

const steps = (arg('steps') ?? '6,2,5,3').split(',').map((x) => {
  const n = Number(x)
  if (!Number.isInteger(n) || n < 1 || n > 64)
    throw new Error(`--steps: each step is 1 to 64 groups, got ${x}`)
  return n
})
const seed = intArg('seed', Math.floor(Math.random() * 2 ** 31), 0, 2 ** 31)
const joinAndDrain = !process.argv.includes('--no-join')
const r = await runScale({
  seed,
  nodes: intArg('nodes', 3, 3, 7),
  steps,
  partitions: intArg('partitions', 12, 1, 256),
  killMetaLeader: !process.argv.includes('--no-kill'),
  joinAndDrain,
  stepMsMax: 180_000,
})
const problems = [...outcomeProblems(r), ...r.notDeleted.map((x) => `not deleted: ${x}`), ...r.crashes]
const reached = r.groupsAfterStep.map((g) => g.length)
if (reached.join(',') !== steps.join(','))
  problems.push(`groups after each step ${reached.join(',')}, wanted ${steps.join(',')}`)
// The join and n3's drain and removal (runScale leaves out what timed out) are claims too.
if (joinAndDrain) {
  const removal = r.removal
  if (!r.afterJoin) problems.push('the joined node was not given its share of the replicas')
  if (!r.afterDrain) problems.push('n3 was not drained')
  else if (removal?.refusedWhileAlive === 'removed while alive') problems.push('n3 was removed while it ran')
  else if (removal?.removedAfterStopMs === undefined) problems.push('n3 was not removed once stopped')
  else if (removal.restartExit !== 1)
    problems.push(`n3, started again after its removal, was not refused (exit ${removal.restartExit})`)
}
const pauses = r.moves.map((m) => m.pauseMs).sort((a, b) => a - b)
console.log(
  `seed ${seed}: ${r.moves.length} moves, pause per move median ${pauses[Math.floor(pauses.length / 2)] ?? 0} ms, max ${pauses.at(-1) ?? 0} ms; ${r.report.ackedEnqueues} acknowledged enqueues, ${r.report.redeliveries} redeliveries; ${Math.round(r.elapsedMs / 1000)} s`,
)
if (problems.length > 0) {
  console.error(`FAILED (seed ${seed}):\n${problems.join('\n')}`)
  process.exitCode = 1
} else console.log('passed')
