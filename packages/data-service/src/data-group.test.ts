import { MemoryEngine, stateMachineRange } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { type DataCommand, encodeDataCommand } from './data-command'
import { type DataApplied, DataGroupMachine, RETIRED_MIN_AGE_MS } from './data-group'
import { interceptWrites } from './write-interceptor'

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

  it('reads between applies: a read sees every apply queued before it and none queued after', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(7, engine)
    await applyAndWrite(engine, m, enc({ type: 'open', queue: 'jobs', partition: 0, config: {} }), 1)
    const message = (n: number) => ({ body: new Uint8Array(3000).fill(n), weight: 1 }) // bodies stored apart
    const apply = (command: object, now: number) =>
      m.apply(enc({ type: 'apply', queue: 'jobs', partition: 0, command } as never), now)
    // Queued without waiting, in this order: enqueue, a listing, a purge, a listing.
    const enqueued = apply({ type: 'enqueue', messages: [message(1), message(2)] }, 10)
    const before = m.listReady('jobs', 0, 10)
    const purged = apply({ type: 'purgeReady', max: 10 }, 11)
    const after = m.listReady('jobs', 0, 10)
    await Promise.all([enqueued, purged])
    expect((await before)?.map((x) => x.messageId)).toEqual([1, 2])
    expect(await after).toEqual([])
    expect(await m.listReady('nope', 0, 10)).toBeUndefined()
    expect(await m.ttlDue('nope', 0, 20)).toBe(false)
  })

  it('names the partitions with a lease or delayed message due, and keeps the latest time it applied', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(7, engine)
    expect(m.clockMs()).toBe(0)
    for (const partition of [0, 1, 2])
      await applyAndWrite(engine, m, enc({ type: 'open', queue: 'jobs', partition, config: {} }), 1_000)
    const enqueue = (partition: number, notBeforeMs?: number) =>
      applyAndWrite(
        engine,
        m,
        enc({
          type: 'apply',
          queue: 'jobs',
          partition,
          command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1, notBeforeMs }] },
        }),
        1_000,
      )
    await enqueue(0)
    await applyAndWrite(
      engine,
      m,
      enc({
        type: 'apply',
        queue: 'jobs',
        partition: 0,
        command: { type: 'lease', consumerId: 'c', max: 1, visibilityMs: 100 },
      }),
      1_000,
    ) // due at 1,100
    await enqueue(1, 1_200)
    await enqueue(2) // ready: nothing timed
    expect(m.timedPartitionIds(1_099)).toEqual([])
    expect(m.timedPartitionIds(1_100)).toEqual(['jobs/0'])
    expect(m.timedPartitionIds(5_000)).toEqual(['jobs/0', 'jobs/1'])
    // An entry stamped earlier than one before it (a leader with a slower clock) leaves it.
    await applyAndWrite(
      engine,
      m,
      enc({ type: 'apply', queue: 'jobs', partition: 2, command: { type: 'tick' } }),
      3_000,
    )
    await applyAndWrite(
      engine,
      m,
      enc({ type: 'apply', queue: 'jobs', partition: 2, command: { type: 'tick' } }),
      2_000,
    )
    expect(m.clockMs()).toBe(3_000)
    // A fenced partition is not ticked.
    await applyAndWrite(engine, m, enc({ type: 'fence', queue: 'jobs', partition: 0 }), 3_000)
    expect(m.timedPartitionIds(5_000)).toEqual(['jobs/1'])
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

  it('runs a read queued during a snapshot install after it, not against the partitions it replaces', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(7, engine)
    await applyAndWrite(engine, m, enc({ type: 'open', queue: 'jobs', partition: 0, config: {} }), 1)
    const enqueue = { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] } as const
    await applyAndWrite(engine, m, enc({ type: 'apply', queue: 'jobs', partition: 0, command: enqueue }), 2)
    // The image installed holds an empty group; its install goes on until `release`.
    let release = () => {}
    const installing = new Promise<void>((r) => {
      release = r
    })
    const reloaded = m.reload(async () => {
      const keys = await engine.keys(stateMachineRange(7))
      await engine.write(
        keys.map((key) => ({ type: 'del' as const, key })),
        { sync: false },
      )
      await installing
    })
    await new Promise((r) => setImmediate(r))
    let read: unknown = 'pending'
    const reading = m.stats('jobs', 0, 3).then(
      (s) => (read = s),
      (e: unknown) => (read = e),
    )
    await new Promise((r) => setTimeout(r, 20))
    expect(read).toBe('pending') // not against the old partition over the keys being replaced
    release()
    await reloaded
    await reading
    expect(read).toBeUndefined() // the group holds no partition after the install
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

  it('refuses an open or an import whose partition config the partition refuses, as malformed, and goes on', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(1, engine)
    // maxDeliveries 0 is out of its bounds (1 to 1,000): thrown out of apply, it stopped every
    // replica at this entry, again at each replay.
    const bad = { maxDeliveries: 0 }
    const open = await applyAndWrite(
      engine,
      m,
      enc({ type: 'open', queue: 'q', partition: 0, config: bad }),
      1,
    )
    expect(open.result).toMatchObject({ type: 'refused', reason: 'malformed', message: /maxDeliveries/ })
    expect(open.ops).toEqual([])
    expect(m.holds('q', 0)).toBe(false)
    // A config that is no object at all (JSON null threw out of apply: an audit).
    for (const config of [null, [1], 'abc']) {
      const odd = enc({ type: 'open', queue: 'q', partition: 0, config: config as unknown as object })
      expect((await applyAndWrite(engine, m, odd, 1)).result).toMatchObject({
        type: 'refused',
        reason: 'malformed',
      })
    }
    expect(
      (await applyAndWrite(engine, m, enc({ type: 'open', queue: 'q', partition: 0, config: {} }), 2)).result,
    ).toEqual({ type: 'opened' })
    // The last chunk of an import opens the partition with its config when the keys carry none.
    const chunk = { type: 'import', queue: 'r', partition: 0, moveId: 1, session: 's', pairs: [] } as const
    await applyAndWrite(engine, m, enc({ ...chunk, seq: 0, last: false, config: {} }), 3)
    const last = await applyAndWrite(engine, m, enc({ ...chunk, seq: 1, last: true, config: bad }), 3)
    expect(last.result).toMatchObject({ type: 'refused', reason: 'malformed', message: /maxDeliveries/ })
    expect(last.ops).toEqual([])
    expect([m.holds('r', 0), m.importIds()]).toEqual([false, ['r/0']])
    const reopened = await DataGroupMachine.open(1, engine)
    expect(reopened.partitionIds()).toEqual(['q/0'])
    expect(
      (await applyAndWrite(engine, reopened, enc({ ...chunk, seq: 1, last: true, config: {} }), 4)).result,
    ).toEqual({ type: 'imported', complete: true })
  })

  it("retires a deleted queue's partitions: dropped and fenced; the fences of the latest few, or recent ones, kept", async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(3, engine, undefined, 2)
    const open = (queue: string) => enc({ type: 'open', queue, partition: 0, config: {} })
    const retire = (queue: string) => enc({ type: 'retire', queue, partition: 0 })
    const MIN = RETIRED_MIN_AGE_MS
    await applyAndWrite(engine, m, open('a#1'), 1)
    const put = enc({
      type: 'apply',
      queue: 'a#1',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1) }] },
    })
    await applyAndWrite(engine, m, put, 1)
    const retired = await applyAndWrite(engine, m, retire('a#1'), 2)
    expect(retired.result).toEqual({ type: 'fenced' })
    // Dropped as well as fenced: not held, its keys swept, its commands refused.
    expect([m.holds('a#1', 0), m.fenced('a#1', 0), m.partitionIds()]).toEqual([false, true, []])
    await m.swept()
    expect((await m.apply(put, 3)).result).toMatchObject({ type: 'refused', reason: 'fenced' })
    expect((await applyAndWrite(engine, m, retire('a#1'), 3)).ops).toEqual([])
    // A partition never opened here is retired too (a stale route must not open it).
    await applyAndWrite(engine, m, retire('b#2'), 4)
    expect((await m.apply(open('b#2'), 5)).result).toMatchObject({ type: 'refused', reason: 'fenced' })
    // A move's fence after the retirement (a move begun before the deletion) is kept for good.
    await applyAndWrite(engine, m, retire('m#9'), 5)
    await applyAndWrite(engine, m, enc({ type: 'fence', queue: 'm#9', partition: 0 }), 5)
    // More than 2 kept, but none old enough: all stay fenced.
    await applyAndWrite(engine, m, retire('c#3'), 6)
    const fenced = (machine: DataGroupMachine) =>
      ['a#1', 'b#2', 'c#3', 'm#9', 'd#4'].map((q) => machine.fenced(q, 0))
    expect(fenced(m)).toEqual([true, true, true, true, false])
    // Past the minimum age, the oldest are lifted down to the 2 kept (m#9 is no retirement now).
    await applyAndWrite(engine, m, retire('d#4'), 6 + MIN)
    expect(fenced(m)).toEqual([false, false, true, true, true])
    // A lifted fence leaves no partition served: a#1 is not held (its messages are gone).
    expect(m.holds('a#1', 0)).toBe(false)
    // The same after a reopen, and the next retirement goes on from there with the same writes.
    const reopened = await DataGroupMachine.open(3, engine, undefined, 2)
    expect(fenced(reopened)).toEqual([false, false, true, true, true])
    const next = await reopened.apply(retire('e#5'), 7 + MIN)
    const again = await m.apply(retire('e#5'), 7 + MIN)
    expect(next.ops).toEqual(again.ops)
    await engine.write(next.ops, { sync: false })
    expect(fenced(reopened)).toEqual([false, false, false, true, true])
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
    const dropped = await applyAndWrite(engine, m, enc({ type: 'drop', queue: 'q', partition: 0 }), 3)
    expect(m.holds('q', 0)).toBe(false)
    // The entry itself carries the registry's delete and a tombstone, not one delete per key.
    expect(dropped.ops.map((op) => op.type)).toEqual(['del', 'put'])
    await m.swept()
    expect(await engine.range({})).toEqual([])
    expect(m.garbageRanges()).toEqual([])
  })

  it('deletes a dropped partition a page per write, and goes on after a restart from its tombstone', async () => {
    const engine = new MemoryEngine()
    const writes: number[] = []
    let hold: Promise<void> | undefined
    const counting = interceptWrites(engine, async (ops) => {
      writes.push(ops.length)
      if (hold) await hold
    })
    const m = await DataGroupMachine.open(2, counting, 8)
    await applyAndWrite(engine, m, enc({ type: 'open', queue: 'q', partition: 0, config: {} }), 1)
    const messages = Array.from({ length: 30 }, (_, i) => ({ body: Uint8Array.of(i) }))
    const command = { type: 'enqueue' as const, messages }
    await applyAndWrite(engine, m, enc({ type: 'apply', queue: 'q', partition: 0, command }), 2)
    const before = (await engine.range({})).length
    expect(before).toBeGreaterThan(30)
    let release = (): void => {}
    hold = new Promise((resolve) => {
      release = resolve
    })
    await applyAndWrite(engine, m, enc({ type: 'drop', queue: 'q', partition: 0 }), 3)
    // Until the sweep's first write arrives (and is held).
    for (let turn = 0; turn < 1_000 && writes.length === 0; turn++) await new Promise((r) => setImmediate(r))
    // One page is being written; stop there, as a process that ends would.
    expect(writes).toEqual([8])
    expect(m.garbageRanges()).toHaveLength(1)
    const closing = m.close()
    release()
    hold = undefined
    await closing
    const left = (await engine.range({})).length
    expect(left).toBe(before - 8) // the page went; the tombstone took the registry key's place

    writes.length = 0
    const reopened = await DataGroupMachine.open(2, counting, 8)
    expect(reopened.garbageRanges()).toHaveLength(1)
    await reopened.swept()
    expect(await engine.range({})).toEqual([])
    expect(writes.every((n) => n <= 9)).toBe(true) // a page, plus the tombstone with the last one
    expect(writes.reduce((a, b) => a + b, 0)).toBe(left)
  })

  it('opens a dropped partition again only after its old keys are gone', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(2, engine, 4)
    const open = enc({ type: 'open', queue: 'q', partition: 0, config: {} })
    const enqueue = (n: number) =>
      enc({
        type: 'apply',
        queue: 'q',
        partition: 0,
        command: { type: 'enqueue', messages: Array.from({ length: n }, () => ({ body: Uint8Array.of(1) })) },
      })
    await applyAndWrite(engine, m, open, 1)
    await applyAndWrite(engine, m, enqueue(20), 2)
    await applyAndWrite(engine, m, enc({ type: 'drop', queue: 'q', partition: 0 }), 3)
    await applyAndWrite(engine, m, open, 4)
    await applyAndWrite(engine, m, enqueue(2), 5)
    await m.swept()
    expect((await m.stats('q', 0, 6))?.messages).toBe(2)
    const reopened = await DataGroupMachine.open(2, engine)
    expect((await reopened.stats('q', 0, 6))?.messages).toBe(2)
  })

  it('keeps groups apart in one engine', async () => {
    const engine = new MemoryEngine()
    const a = await DataGroupMachine.open(1, engine)
    const b = await DataGroupMachine.open(2, engine)
    await applyAndWrite(engine, a, enc({ type: 'open', queue: 'q', partition: 0, config: {} }), 1)
    expect((await DataGroupMachine.open(2, engine)).partitionIds()).toEqual([])
    expect(b.holds('q', 0)).toBe(false)
  })
  it('tells ready listeners the partition of an entry that may have made messages ready, and every partition after a reload', async () => {
    const engine = new MemoryEngine()
    const m = await DataGroupMachine.open(7, engine)
    const told: string[] = []
    const stop = m.watchReady((p) => told.push(p ? `${p.queue}/${p.index}` : '*'))
    for (const queue of ['a', 'b'])
      await applyAndWrite(engine, m, enc({ type: 'open', queue, partition: 0, config: {} }), 1)
    const apply = (command: DataCommand) => applyAndWrite(engine, m, enc(command), 2)
    await apply({
      type: 'apply',
      queue: 'b',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] },
    })
    // A lease makes nothing ready: no one is told.
    await apply({
      type: 'apply',
      queue: 'b',
      partition: 0,
      command: { type: 'lease', consumerId: 'c', max: 1, visibilityMs: 1_000 },
    })
    expect(told).toEqual(['a/0', 'b/0', 'b/0'])
    // A throwing listener fails nothing.
    m.watchReady(() => {
      throw new Error('a listener bug')
    })
    await m.reload()
    expect(told).toEqual(['a/0', 'b/0', 'b/0', '*'])
    stop()
    await apply({
      type: 'apply',
      queue: 'a',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(2), weight: 1 }] },
    })
    expect(told).toHaveLength(4)
  })
})
