import * as fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { partitionKeySpan, readPartitionSnapshot, restorePartitionOps } from '../src/index'
import { comparable, ENGINES, LaggedQueue } from './harness'
import { ModelQueue } from './model'
import { CONFIG, type Step, steps, type World } from './steps'

const PREFIX = Uint8Array.of(0x09, 0xff, 0x00)

describe.each(ENGINES)('snapshot → restore on $name', ({ name, open }) => {
  it('reproduces identical results, ops and state for the same following commands, restarts or not', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(...(steps as fc.Arbitrary<Step>[])), { maxLength: 40 }),
        fc.array(fc.oneof(...(steps as fc.Arbitrary<Step>[])), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 0, max: 1 }),
        // Where each replica restarts (reopens from its engine) among the following commands.
        fc.array(fc.integer({ min: 0, max: 39 }), { maxLength: 3 }),
        fc.array(fc.integer({ min: 0, max: 39 }), { maxLength: 3 }),
        async (before, after, pageEntries, orderedKeys, reopensA, reopensB) => {
          const config = { ...CONFIG, orderedKeys }
          const a = await open()
          const b = await open()
          try {
            // a neighbour partition in the same engine must survive both snapshot and restore
            const neighbour = Uint8Array.of(0x09, 0xff, 0x01)
            await a.engine.write([{ type: 'put', key: neighbour, value: Uint8Array.of(1) }], { sync: false })
            await b.engine.write([{ type: 'put', key: neighbour, value: Uint8Array.of(3) }], { sync: false })
            await b.engine.write(
              [{ type: 'put', key: Uint8Array.of(0x09, 0xff, 0x00, 0x99), value: Uint8Array.of(2) }],
              {
                sync: false,
              },
            )
            const qa = await LaggedQueue.open(a.engine, PREFIX, config, 2)
            const world: World = { model: new ModelQueue(config), real: qa, nowMs: 5_000 }
            for (const step of before) await step.run(world, world)
            await qa.flush()
            const snap = await a.engine.snapshot()
            let first = true
            for await (const page of readPartitionSnapshot(snap, PREFIX, pageEntries)) {
              await b.engine.write(restorePartitionOps(PREFIX, page, first), { sync: false })
              first = false
            }
            await snap.close()
            if (first) await b.engine.write(restorePartitionOps(PREFIX, [], true), { sync: false })
            const qb = await LaggedQueue.open(b.engine, PREFIX, config, 1)
            expect(await qb.partition.stats(world.nowMs)).toEqual(await qa.partition.stats(world.nowMs))
            for (const [i, step] of after.entries()) {
              if (reopensA.includes(i)) await qa.reopen()
              if (reopensB.includes(i)) await qb.reopen()
              world.nowMs = Math.max(0, world.nowMs + step.dtMs)
              const cmd = step.build(world.model, world.nowMs)
              const want = comparable(world.model.apply(cmd, world.nowMs))
              expect(comparable(await qa.apply(cmd, world.nowMs))).toEqual(want)
              expect(comparable(await qb.apply(cmd, world.nowMs))).toEqual(want)
              // The same ops in the same order, whatever each replica's caches hold.
              expect(qb.lastOps).toEqual(qa.lastOps)
            }
            await qa.flush()
            await qb.flush()
            // the partition's key ranges are byte-identical afterwards
            const span = partitionKeySpan(PREFIX)
            expect(await b.engine.range(span)).toEqual(await a.engine.range(span))
            expect(await b.engine.get(neighbour)).toEqual(Uint8Array.of(3))
            expect(await b.engine.get(Uint8Array.of(0x09, 0xff, 0x00, 0x99))).toBeUndefined()
          } finally {
            await a.dispose()
            await b.dispose()
          }
        },
      ),
      { numRuns: name === 'memory' ? 60 : 12 },
    )
  }, 90_000)
})
