import { afterEach, describe, expect, it, vi } from 'vitest'
import { check } from '../src/checker'
import type { ScaleRunResult } from '../src/scale-run'

// scripts/scale.ts's verdict on a run's result (runScale stood in for: no cluster).
const mocked = vi.hoisted(() => ({ result: undefined as ScaleRunResult | undefined }))
vi.mock('../src/scale-run', () => ({ runScale: async () => mocked.result }))

/** A run of the default steps (6,2,5,3) with a join and n3's drain and removal that all went well. */
function passingRun(): ScaleRunResult {
  return {
    report: check([]),
    unacked: 0,
    drained: true,
    moves: [],
    groupsAfterStep: [6, 2, 5, 3].map((n) => Array.from({ length: n }, (_, i) => i + 1)),
    notDeleted: [],
    afterJoin: { n1: 3, n2: 3, n3: 3, n4: 3 },
    afterDrain: { n1: 3, n2: 3, n3: 0, n4: 3 },
    removal: {
      refusedWhileAlive: 'node n3 is alive (heard from 0.1 s ago): stop its process first',
      removedAfterStopMs: 5_000,
      nodesAfter: ['n1', 'n2', 'n4'],
      restartExit: 1,
      restartSaid: 'node n3 was removed from the cluster',
    },
    metaLeaderKilled: 'n1',
    killedDuringCopy: true,
    crashes: [],
    serverLog: [],
    elapsedMs: 1_000,
  }
}

/** The exit code scripts/scale.ts sets for `result`. */
async function verdict(result: ScaleRunResult): Promise<number | string | undefined> {
  mocked.result = result
  vi.resetModules()
  await import('../scripts/scale')
  return process.exitCode
}

describe('scripts/scale.ts', () => {
  afterEach(() => {
    process.exitCode = undefined
    vi.restoreAllMocks()
  })

  it('passes a run whose steps, join, drain and removal all went well', async () => {
    vi.spyOn(console, 'log').mockImplementation(() => {})
    expect(await verdict(passingRun())).toBeUndefined()
  })

  it('fails a run whose joined node got no replicas, or whose n3 was not drained or not removed', async () => {
    vi.spyOn(console, 'log').mockImplementation(() => {})
    vi.spyOn(console, 'error').mockImplementation(() => {})
    const { afterJoin: _, ...notSpread } = passingRun()
    expect(await verdict(notSpread)).toBe(1)
    process.exitCode = undefined
    const { afterDrain: __, removal: ___, ...notDrained } = passingRun()
    expect(await verdict(notDrained)).toBe(1)
    process.exitCode = undefined
    const run = passingRun()
    expect(
      await verdict({
        ...run,
        removal: { ...run.removal!, removedAfterStopMs: undefined, restartExit: undefined },
      }),
    ).toBe(1)
    process.exitCode = undefined
    expect(await verdict({ ...run, removal: { ...run.removal!, restartExit: 0 } })).toBe(1)
  })
})
