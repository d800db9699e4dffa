import * as fc from 'fast-check'
import { afterAll, describe, it } from 'vitest'
import { ENGINES, LaggedQueue } from './harness'
import { ModelQueue } from './model'
import { CONFIG, type ReopenStep, reopenStep, type Step, steps, tally, type World } from './steps'

afterAll(() => {
  if (process.env.WQ_DEBUG) console.log([...tally].sort((a, b) => b[1] - a[1]).slice(0, 400))
})

describe.each(ENGINES)(
  'model-based: QueuePartition on $name matches the reference model',
  ({ name, open }) => {
    it.each([
      [1, 0, 0, 0],
      [3, 0, 0, 0],
      [1, 1, 0, 0],
      [3, 1, 0, 0],
      [1, 0, 250, 0],
      [3, 1, 250, 0],
      [1, 0, 0, 20],
      [3, 1, 250, 20],
    ])(
      'with ops flushed every %i applies, orderedKeys %i, messageTtlMs %i, retryBackoffMinMs %i',
      async (flushEvery, orderedKeys, messageTtlMs, retryBackoffMinMs) => {
        await fc.assert(
          fc.asyncProperty(
            fc.commands([...(steps as fc.Arbitrary<Step | ReopenStep>[]), reopenStep], {
              maxCommands: 80,
              size: 'large',
            }),
            async (cmds) => {
              const { engine, dispose } = await open()
              try {
                const config = {
                  ...CONFIG,
                  orderedKeys,
                  messageTtlMs,
                  retryBackoffMinMs,
                  retryBackoffMaxMs: 70,
                }
                const real = await LaggedQueue.open(engine, Uint8Array.of(0x70, 0x01), config, flushEvery)
                const world: World = { model: new ModelQueue(config), real, nowMs: 1_000 }
                await fc.asyncModelRun(() => ({ model: world, real: world }), cmds)
              } finally {
                await dispose()
              }
            },
          ),
          { numRuns: name === 'memory' ? 150 : 40 },
        )
      },
      90_000,
    )
  },
)
