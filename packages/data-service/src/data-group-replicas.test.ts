import { MemoryEngine, stateMachineRange } from '@mq/kv-storage'
import { seededRandom } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { type DataCommand, encodeDataCommand } from './data-command'
import { DataGroupMachine } from './data-group'

const CONFIG = {
  maxDeliveries: 2,
  messageBytesMax: 100,
  dedupWindowMs: 300,
  messageTtlMs: 400,
  retryBackoffMinMs: 20,
  retryBackoffMaxMs: 80,
}

class Replica {
  constructor(
    readonly engine: MemoryEngine,
    public m: DataGroupMachine,
  ) {}
  static async open(): Promise<Replica> {
    const engine = new MemoryEngine()
    return new Replica(engine, await DataGroupMachine.open(7, engine))
  }
  async apply(c: DataCommand, now: number) {
    const a = await this.m.apply(encodeDataCommand(c), now)
    await this.engine.write(a.ops, { sync: false })
    a.written()
    return a.result
  }
}

/** Installs `from`'s group keys into `to` as a snapshot install does, then reloads. */
async function install(from: Replica, to: Replica): Promise<void> {
  const pairs = await from.engine.range(stateMachineRange(7))
  await to.m.reload(async () => {
    const keys = await to.engine.keys(stateMachineRange(7))
    await to.engine.write(
      keys.map((key) => ({ type: 'del' as const, key })),
      { sync: false },
    )
    await to.engine.write(
      pairs.map(([key, value]) => ({ type: 'put' as const, key, value })),
      { sync: false },
    )
  })
}

describe('DataGroupMachine replicas', () => {
  it('same results after restarts and snapshot installs, with moved partitions (clock offsets)', async () => {
    for (let seed = 1; seed <= Number(process.env.SEEDS ?? 40); seed++) {
      const r = seededRandom(seed)
      const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)] as T
      const a = await Replica.open()
      let b = await Replica.open()
      let now = 1_000_000
      const leases: string[] = []
      let move = 1
      const log: string[] = []
      for (let step = 0; step < 200; step++) {
        now += pick([0, 0, 5, 20, 100, 500])
        const queue = pick(['q', 'r'])
        const partition = pick([0, 1])
        const x = r()
        let c: DataCommand
        if (x < 0.05) c = { type: 'open', queue, partition, config: CONFIG }
        else if (x < 0.07) c = { type: 'drop', queue, partition }
        else if (x < 0.072) c = { type: 'retire', queue, partition } as DataCommand
        else if (x < 0.1) {
          // an (empty) partition moved in, with a clock of its own
          const moveId = move++
          const clockMs = pick([0, 5, now - 400_000, now + 300_000])
          for (const cmd of [
            {
              type: 'import',
              queue,
              partition,
              moveId,
              session: `s${moveId}`,
              seq: 0,
              last: false,
              config: CONFIG,
              pairs: [],
            },
            {
              type: 'import',
              queue,
              partition,
              moveId,
              session: `s${moveId}`,
              seq: 1,
              last: true,
              config: CONFIG,
              pairs: [],
              clockMs,
            },
          ] as DataCommand[]) {
            const ra = await a.apply(cmd, now)
            const rb = await b.apply(cmd, now)
            expect(rb, `seed ${seed} step ${step} import`).toEqual(ra)
          }
          continue
        } else if (x < 0.13) {
          if (r() < 0.5) {
            b = new Replica(b.engine, await DataGroupMachine.open(7, b.engine))
            log.push('reopen')
          } else {
            await install(a, b)
            log.push('install')
          }
          continue
        } else {
          const y = r()
          const command =
            y < 0.3
              ? {
                  type: 'enqueue' as const,
                  messages: [
                    {
                      body: Uint8Array.of(step),
                      weight: pick([1, 2]),
                      ...(r() < 0.3 ? { dedupKey: pick(['d', 'e']) } : {}),
                      ...(r() < 0.3 ? { key: pick(['k', 'l']) } : {}),
                      ...(r() < 0.2
                        ? { notBeforeMs: a.m.partitionTimeMs(queue, partition, now) + pick([0, 50, 300]) }
                        : {}),
                    },
                  ],
                }
              : y < 0.55
                ? { type: 'lease' as const, consumerId: 'c', max: 3, visibilityMs: pick([10, 100, 1000]) }
                : y < 0.7
                  ? { type: 'ack' as const, leaseIds: leases.slice(-2) }
                  : y < 0.8
                    ? { type: 'nack' as const, leaseIds: leases.slice(-1) }
                    : y < 0.85
                      ? { type: 'extend' as const, leaseIds: leases.slice(-2), visibilityMs: 200 }
                      : y < 0.95
                        ? { type: 'tick' as const }
                        : { type: 'redriveDead' as const, max: 2 }
          c = { type: 'apply', queue, partition, command }
        }
        const ra = await a.apply(c, now)
        const rb = await b.apply(c, now)
        log.push(`${c.type}${c.type === 'apply' ? `:${c.command.type}` : ''} ${queue}/${partition}@${now}`)
        expect(rb, `seed ${seed} step ${step}: ${log.slice(-8).join(', ')}`).toEqual(ra)
        if (ra.type === 'applied' && ra.result.type === 'lease')
          for (const l of ra.result.leases) leases.push(l.leaseId)
        for (const q of ['q', 'r'])
          for (const p of [0, 1]) {
            expect(await b.m.stats(q, p, now), `seed ${seed} step ${step} stats ${q}/${p}`).toEqual(
              await a.m.stats(q, p, now),
            )
            expect(b.m.partitionTimeMs(q, p, now)).toBe(a.m.partitionTimeMs(q, p, now))
          }
      }
      expect(b.m.partitionIds()).toEqual(a.m.partitionIds())
    }
  }, 120_000)
})
