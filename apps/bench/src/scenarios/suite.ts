import type { ScenarioResult } from '../result'
import { type Target, withTarget } from './common'
import { CONSUME_DEFAULTS, runConsume } from './consume'
import { runE2e } from './e2e'
import { FAILOVER_DEFAULTS, runFailover } from './failover'
import { FAIRNESS_DEFAULTS, runFairness } from './fairness'
import { runMicro } from './micro'
import { PRODUCE_DEFAULTS, runProduce } from './produce'
import { runScale, SCALE_DEFAULTS } from './scale'

/**
 * The standard quick set (under 3 minutes on a 2-core machine): the cluster scenarios share
 * one local cluster (or `target.servers`); failover starts its own (skipped, saying so, with
 * `target.servers`); then the micro set.
 */
export async function runSuite(
  target: Target,
  log: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<ScenarioResult[]> {
  const results: ScenarioResult[] = []
  const step = async (name: string, run: () => Promise<ScenarioResult | ScenarioResult[]>) => {
    const t0 = performance.now()
    log(`suite: ${name}…`)
    const r = await run()
    results.push(...(Array.isArray(r) ? r : [r]))
    log(`suite: ${name} done in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
  }
  await withTarget(target, async ({ servers, facts, serverCpuMs, serverRssBytes }) => {
    const shared: Target = {
      servers,
      facts,
      ...(serverCpuMs ? { serverCpuMs } : {}),
      ...(serverRssBytes ? { serverRssBytes } : {}),
    }
    await step('produce', () =>
      runProduce(shared, { ...PRODUCE_DEFAULTS, count: 20_000, timeLimitMs: 30_000 }),
    )
    await step('produce one at a time', async () => {
      const r = await runProduce(shared, {
        ...PRODUCE_DEFAULTS,
        count: 300,
        inFlight: 1,
        timeLimitMs: 20_000,
      })
      return { ...r, scenario: 'produce-1-in-flight' }
    })
    await step('consume', () =>
      runConsume(shared, { ...CONSUME_DEFAULTS, count: 20_000, timeLimitMs: 30_000 }),
    )
    await step('consume, ordered keys', async () => {
      const r = await runConsume(shared, {
        ...CONSUME_DEFAULTS,
        count: 20_000,
        orderedKeys: 256,
        timeLimitMs: 30_000,
      })
      return { ...r, scenario: 'consume-ordered-keys' }
    })
    await step('e2e', () =>
      runE2e(shared, { ratePerS: 1000, durationMs: 5_000, sizeBytes: 100, partitions: 4 }),
    )
    await step('scale', () =>
      runScale(shared, { ...SCALE_DEFAULTS, partitions: [1, 2, 4], count: 3_000, timeLimitMs: 20_000 }),
    )
    await step('fairness', () =>
      runFairness(shared, {
        ...FAIRNESS_DEFAULTS,
        perWeightUnit: 100,
        windowLeases: 130,
        timeLimitMs: 30_000,
      }),
    )
  })
  await step('fairness in-process', () => runFairness({}, { ...FAIRNESS_DEFAULTS, inProcess: true }))
  if (target.servers) {
    // failover kills or pauses a process: only one mq-bench started itself, never the servers given.
    log('suite: failover skipped: it needs clusters mq-bench starts itself (run without --servers)')
  } else {
    const local = {
      fromSource: target.fromSource ?? false,
      ...(target.timing ? { timing: target.timing } : {}),
    }
    await step('failover (data leader)', () =>
      runFailover(local, { ...FAILOVER_DEFAULTS, durationMs: 9_000 }),
    )
    await step('failover (data leader paused)', async () => {
      const r = await runFailover(local, { ...FAILOVER_DEFAULTS, durationMs: 9_000, fault: 'pause' })
      return { ...r, scenario: 'failover-pause' }
    })
    await step('failover (meta leader)', async () => {
      const r = await runFailover(local, { ...FAILOVER_DEFAULTS, durationMs: 9_000, kill: 'meta' })
      return { ...r, scenario: 'failover-meta' }
    })
  }
  await step('micro', () => runMicro({ cycles: 10_000, batches: 30, batchEntries: 1000 }))
  return results
}
