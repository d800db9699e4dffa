import { MemoryEngine } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { encodeDataCommand } from './data-command'
import { type DataApplied, DataGroupMachine } from './data-group'

async function applyAndWrite(
  engine: MemoryEngine,
  m: DataGroupMachine,
  data: Uint8Array,
  now: number,
): Promise<DataApplied> {
  const applied = await m.apply(data, now)
  await engine.write(applied.ops, { sync: false })
  applied.written()
  return applied
}

const enc = encodeDataCommand

describe('DataGroupMachine', () => {
  it('opens partitions, runs queue commands on them, and survives a reopen', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(7, engine)
    await applyAndWrite(
      engine,
      m,
      enc({ type: 'open', queue: 'jobs', partition: 0, config: { maxDeliveries: 2 } }),
      1,
    )
    await applyAndWrite(engine, m, enc({ type: 'open', queue: 'jobs', partition: 1, config: {} }), 1)
    const enqueued = await applyAndWrite(
      engine,
      m,
      enc({
        type: 'apply',
        queue: 'jobs',
        partition: 1,
        command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 3 }] },
      }),
      10,
    )
    expect(enqueued.result).toMatchObject({ type: 'applied', result: { type: 'enqueue', ids: [1] } })
    expect(m.partitionIds()).toEqual(['jobs/0', 'jobs/1'])

    const reopened = await DataGroupMachine.open(7, engine)
    expect(reopened.partitionIds()).toEqual(['jobs/0', 'jobs/1'])
    const leased = await applyAndWrite(
      engine,
      reopened,
      enc({
        type: 'apply',
        queue: 'jobs',
        partition: 1,
        command: { type: 'lease', consumerId: 'c', max: 5, visibilityMs: 1000 },
      }),
      20,
    )
    expect(leased.result).toMatchObject({
      type: 'applied',
      result: { type: 'lease', leases: [{ messageId: 1, weight: 3 }] },
    })
  })

  it('needs a configure only for changed settings of a newer version', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(7, engine)
    await applyAndWrite(
      engine,
      m,
      enc({ type: 'open', queue: 'jobs', partition: 0, config: { maxDeliveries: 2, configVersion: 5 } }),
      1,
    )
    expect(m.needsConfig('jobs', 0, { maxDeliveries: 2, configVersion: 8 })).toBe(false) // same settings
    expect(m.needsConfig('jobs', 0, { maxDeliveries: 3, configVersion: 8 })).toBe(true)
    expect(m.needsConfig('jobs', 0, { maxDeliveries: 3, configVersion: 4 })).toBe(false) // older copy
    expect(m.needsConfig('jobs', 1, { maxDeliveries: 3, configVersion: 8 })).toBe(false) // not held
    const command = { type: 'configure' as const, config: { maxDeliveries: 3, configVersion: 8 } }
    await applyAndWrite(engine, m, enc({ type: 'apply', queue: 'jobs', partition: 0, command }), 2)
    expect(m.needsConfig('jobs', 0, { maxDeliveries: 3, configVersion: 9 })).toBe(false)
  })

  it('refuses entries for partitions it does not hold, and malformed ones, changing nothing', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(1, engine)
    const r = await m.apply(enc({ type: 'apply', queue: 'q', partition: 0, command: { type: 'tick' } }), 1)
    expect(r.result).toMatchObject({ type: 'refused', reason: 'not-held' })
    expect(r.ops).toEqual([])
    const bad = await m.apply(Uint8Array.of(1, 2, 3), 1)
    expect(bad.result).toMatchObject({ type: 'refused', reason: 'malformed' })
  })

  it('drops a partition and all its keys', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(2, engine)
    await applyAndWrite(engine, m, enc({ type: 'open', queue: 'q', partition: 0, config: {} }), 1)
    await applyAndWrite(
      engine,
      m,
      enc({
        type: 'apply',
        queue: 'q',
        partition: 0,
        command: { type: 'enqueue', messages: [{ body: Uint8Array.of(9) }] },
      }),
      2,
    )
    expect((await engine.range({})).length).toBeGreaterThan(0)
    await applyAndWrite(engine, m, enc({ type: 'drop', queue: 'q', partition: 0 }), 3)
    expect(m.holds('q', 0)).toBe(false)
    expect(await engine.range({})).toEqual([])
  })

  it('keeps groups apart in one engine', async () => {
    const engine = new MemoryEngine()
    const a = await DataGroupMachine.open(1, engine)
    const b = await DataGroupMachine.open(2, engine)
    await applyAndWrite(engine, a, enc({ type: 'open', queue: 'q', partition: 0, config: {} }), 1)
    expect((await DataGroupMachine.open(2, engine)).partitionIds()).toEqual([])
    expect(b.holds('q', 0)).toBe(false)
  })
})
