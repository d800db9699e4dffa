import * as fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  type Command,
  type CommandResult,
  DirectPartition,
  partitionKeySpan,
  type QueueConfig,
  QueuePartition,
} from '../src/index'
import { ENGINES, installSnapshot, leasesOf } from './harness'

const PREFIX = Uint8Array.of(0x52, 0x01)
const body = Uint8Array.of(7)

/** One step of the replica property: a command for every replica, or a restart of one. */
type ReplicaStep =
  | { readonly kind: 'apply'; readonly dtMs: number; readonly command: Command }
  | { readonly kind: 'reopen' | 'install'; readonly replica: number }

const replicaStep: fc.Arbitrary<ReplicaStep> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .record({
        dtMs: fc.integer({ min: 0, max: 40 }),
        messages: fc.array(
          fc.record({
            weight: fc.constantFrom(1, 2, 3),
            key: fc.option(fc.constantFrom('k', 'q', 'r'), { nil: undefined }),
          }),
          { minLength: 1, maxLength: 6 },
        ),
      })
      .map(({ dtMs, messages }) => ({
        kind: 'apply' as const,
        dtMs,
        command: {
          type: 'enqueue' as const,
          messages: messages.map(({ weight, key }) => ({
            weight,
            body,
            ...(key === undefined ? {} : { key }),
          })),
        },
      })),
  },
  {
    weight: 5,
    arbitrary: fc
      .record({ dtMs: fc.integer({ min: 0, max: 40 }), max: fc.integer({ min: 1, max: 3 }) })
      .map(({ dtMs, max }) => ({
        kind: 'apply' as const,
        dtMs,
        command: { type: 'lease' as const, consumerId: 'c', max, visibilityMs: 60 },
      })),
  },
  {
    weight: 3,
    arbitrary: fc
      .record({
        dtMs: fc.integer({ min: 0, max: 40 }),
        scheduling: fc.constantFrom('fair' as const, 'strict' as const),
      })
      .map(({ dtMs, scheduling }) => ({
        kind: 'apply' as const,
        dtMs,
        command: { type: 'configure' as const, config: { scheduling } },
      })),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('apply' as const),
      dtMs: fc.integer({ min: 0, max: 40 }),
      command: fc.constantFrom<Command>(
        { type: 'tick' },
        { type: 'tick', ttlWaiting: true },
        { type: 'redriveDead', max: 2 },
        { type: 'redriveDead', max: 2, restartTtl: true },
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constantFrom('reopen' as const, 'install' as const),
      replica: fc.constantFrom(1, 2),
    }),
  },
)

describe.each(ENGINES)('replicas on $name', ({ name, open }) => {
  it('decide and write alike whatever restarts and snapshot installs they go through', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(replicaStep, { maxLength: 60 }),
        fc.constantFrom(0, 1),
        async (script, orderedKeys) => {
          // Replica 0 never restarts; 1 and 2 reopen from their engines or install a snapshot of 0.
          const engines = [await open(), await open(), await open()]
          try {
            const config: Partial<QueueConfig> = { orderedKeys, maxDeliveries: 2, messageTtlMs: 400 }
            const parts = await Promise.all(engines.map((e) => QueuePartition.open(e.engine, PREFIX, config)))
            let nowMs = 1000
            for (const step of script) {
              if (step.kind === 'apply') {
                nowMs += step.dtMs
                const applied = []
                for (let i = 0; i < parts.length; i++) {
                  const p = parts[i] as QueuePartition
                  const a = await p.apply(step.command, nowMs)
                  await (engines[i] as (typeof engines)[number]).engine.write(a.ops, { sync: false })
                  p.release(a.generation)
                  applied.push(a)
                }
                for (const a of applied.slice(1)) {
                  expect(a.result).toEqual(applied[0]?.result)
                  expect(a.ops).toEqual(applied[0]?.ops)
                }
                continue
              }
              const to = (engines[step.replica] as (typeof engines)[number]).engine
              if (step.kind === 'install')
                await installSnapshot((engines[0] as (typeof engines)[number]).engine, to, PREFIX, 3)
              parts[step.replica] = await QueuePartition.open(to, PREFIX, config)
            }
            const span = partitionKeySpan(PREFIX)
            const [a, b, c] = await Promise.all(engines.map((e) => e.engine.range(span)))
            expect(b).toEqual(a)
            expect(c).toEqual(a)
          } finally {
            for (const e of engines) await e.dispose()
          }
        },
      ),
      { numRuns: name === 'memory' ? 300 : 40 },
    )
  }, 90_000)

  it('decide alike after a reopen or a snapshot install in strict mode, then in fair mode', async () => {
    // A never restarts, B reopens from its engine, C installs a snapshot of A's partition.
    const engines = [await open(), await open(), await open()]
    try {
      const config: Partial<QueueConfig> = { scheduling: 'strict' }
      const replicas = await Promise.all(engines.map((e) => DirectPartition.open(e.engine, PREFIX, config)))
      const all = async (cmd: Command, nowMs: number): Promise<CommandResult[]> => {
        const out: CommandResult[] = []
        for (const r of replicas) out.push(await r.apply(cmd, nowMs))
        for (const r of out.slice(1)) expect(r).toEqual(out[0])
        return out
      }
      const lease = async (nowMs: number) =>
        leasesOf(
          (
            await all({ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 60_000 }, nowMs)
          )[0] as CommandResult,
        )
      await all(
        {
          type: 'enqueue',
          messages: [...[2, 2, 2, 1, 1, 1].map((weight) => ({ weight, body }))], // ids 1–3: weight 2, 4–6: weight 1
        },
        1000,
      )
      await all({ type: 'lease', consumerId: 'c', max: 2, visibilityMs: 60_000 }, 1001)
      // Strict mode served weight 2 twice: V rose past weight 1's pass, which stays behind.
      replicas[1] = await DirectPartition.open((engines[1] as (typeof engines)[number]).engine, PREFIX)
      await installSnapshot(
        (engines[0] as (typeof engines)[number]).engine,
        (engines[2] as (typeof engines)[number]).engine,
        PREFIX,
        3,
      )
      replicas[2] = await DirectPartition.open((engines[2] as (typeof engines)[number]).engine, PREFIX)
      expect((await lease(1002)).map((l) => l.messageId)).toEqual([3])
      expect((await lease(1003)).map((l) => l.messageId)).toEqual([4])
      await all({ type: 'configure', config: { scheduling: 'fair' } }, 1004)
      await all({ type: 'enqueue', messages: Array.from({ length: 5 }, () => ({ weight: 2, body })) }, 1005)
      // What the replica that never restarted decides: weight 1 (pass 1) before weight 2 (pass 3/2).
      expect((await lease(1006)).map((l) => l.messageId)).toEqual([5])
      for (let t = 1007; t < 1012; t++) await lease(t)
      const span = partitionKeySpan(PREFIX)
      const [a, b, c] = await Promise.all(engines.map((e) => e.engine.range(span)))
      expect(b).toEqual(a)
      expect(c).toEqual(a)
    } finally {
      for (const e of engines) await e.dispose()
    }
  })

  it('write the same ops for a configure after a restart (weights re-activated in one order)', async () => {
    const engines = [await open(), await open()]
    try {
      const parts = await Promise.all(engines.map((e) => QueuePartition.open(e.engine, PREFIX)))
      const all = async (cmd: Command, nowMs: number) => {
        const applied = []
        for (let i = 0; i < parts.length; i++) {
          const p = parts[i] as QueuePartition
          const a = await p.apply(cmd, nowMs)
          await (engines[i] as (typeof engines)[number]).engine.write(a.ops, { sync: false })
          p.release(a.generation)
          applied.push(a)
        }
        expect(applied[1]?.result).toEqual(applied[0]?.result)
        expect(applied[1]?.ops).toEqual(applied[0]?.ops)
      }
      await all({ type: 'enqueue', messages: [2, 3, 3, 1, 3].map((weight) => ({ weight, body })) }, 1000)
      await all({ type: 'configure', config: { scheduling: 'strict' } }, 1000)
      await all({ type: 'lease', consumerId: 'c', max: 2, visibilityMs: 60 }, 1000)
      parts[1] = await QueuePartition.open((engines[1] as (typeof engines)[number]).engine, PREFIX)
      // Weights 1 and 2 lag behind V: going fair raises both, and writes their records.
      await all({ type: 'configure', config: { scheduling: 'fair' } }, 1000)
    } finally {
      for (const e of engines) await e.dispose()
    }
  })

  it('write the same ops in the same order whatever their caches hold (turns of ordered keys)', async () => {
    const engines = [await open(), await open()]
    try {
      const config: Partial<QueueConfig> = { orderedKeys: 1 }
      const parts = await Promise.all(engines.map((e) => QueuePartition.open(e.engine, PREFIX, config)))
      const reopen = async (i: number) => {
        parts[i] = await QueuePartition.open((engines[i] as (typeof engines)[number]).engine, PREFIX)
      }
      const all = async (cmd: Command, nowMs: number) => {
        const applied = []
        for (let i = 0; i < parts.length; i++) {
          const p = parts[i] as QueuePartition
          const a = await p.apply(cmd, nowMs)
          await (engines[i] as (typeof engines)[number]).engine.write(a.ops, { sync: false })
          p.release(a.generation)
          applied.push(a)
        }
        expect(applied[1]?.result).toEqual(applied[0]?.result)
        expect(applied[1]?.ops).toEqual(applied[0]?.ops)
      }
      const msg = (key: string) => ({ body, key })
      await all({ type: 'enqueue', messages: [msg('a'), msg('b')] }, 1000)
      await reopen(0) // A forgets both turns
      await all({ type: 'enqueue', messages: [msg('b')] }, 1001) // A reads and caches b's turn again
      await reopen(1) // B forgets both turns
      // A has b's turn cached, not a's; B has neither: the turns are written in one order all the same.
      await all({ type: 'enqueue', messages: [msg('a'), msg('b')] }, 1002)
      await all({ type: 'lease', consumerId: 'c', max: 10, visibilityMs: 100 }, 1003)
      await all({ type: 'tick' }, 1200) // both holders' leases expire: their turns stay
    } finally {
      for (const e of engines) await e.dispose()
    }
  })
})
