import { DataGroupMachine, encodeDataCommand } from '@mq/data-service'
import { MemoryEngine, stagedImageRange, stateMachineRange } from '@mq/kv-storage'
import { type Entry, EntryType } from '@mq/raft-core'
import { describe, expect, it, vi } from 'vitest'
import {
  appliedKeyOf,
  DataMachine,
  decodeIndex,
  decodePairs,
  encodePairs,
  type ImagePort,
  type SmWriter,
} from './data-machine'
import { decodeImageHandle } from './image-handle'
import { type ImagePeer, imagePeer, snapshotOf, stage } from './image-test-peer'

/**
 * A DataMachine of group 1 over `engine`: its writes go straight to the engine, failures are
 * thrown; `o` replaces any of its parts.
 */
async function machineOn(
  engine: MemoryEngine,
  applied = 0,
  pageKeys?: number,
  o: {
    group?: DataGroupMachine
    writer?: SmWriter
    images?: ImagePort
    fatal?: (error: unknown) => void
  } = {},
): Promise<DataMachine> {
  return new DataMachine(
    o.group ?? (await DataGroupMachine.open(1, engine)),
    o.writer ?? { write: (ops) => engine.write(ops, { sync: false }) },
    engine,
    o.images ?? imagePeer(engine).port,
    applied,
    o.fatal ??
      ((e) => {
        throw e
      }),
    pageKeys,
  )
}

/** A writer whose writes reach `engine` only when the caller runs their `held` releases. */
function heldWriter(engine: MemoryEngine, held: (() => void)[]): SmWriter {
  return {
    write: (ops) =>
      new Promise<void>((resolve) => held.push(() => void engine.write(ops, { sync: false }).then(resolve))),
  }
}

let index = 0
const entry = (data: Uint8Array): Entry => ({
  index: ++index,
  term: 1,
  type: EntryType.Normal,
  timestampMs: 1_000 + index,
  data,
})
const open = () => entry(encodeDataCommand({ type: 'open', queue: 'q', partition: 0, config: {} }))
const enqueue = (body: number) =>
  entry(
    encodeDataCommand({
      type: 'apply',
      queue: 'q',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(body) }] },
    }),
  )
const lease = () =>
  entry(
    encodeDataCommand({
      type: 'apply',
      queue: 'q',
      partition: 0,
      command: { type: 'lease', consumerId: 'c', max: 10, visibilityMs: 60_000 },
    }),
  )

/** A replica of group 1 over a fresh engine that makes images (a leader), from index 0. */
async function leaderReplica(): Promise<{ engine: MemoryEngine; side: ImagePeer; dm: DataMachine }> {
  const engine = new MemoryEngine()
  index = 0
  const side = imagePeer(engine)
  return { engine, side, dm: await machineOn(engine, 0, undefined, { images: side.port }) }
}

/** A writer to `engine` that fails every write while `disk.full` ("no space left on device"). */
function writerTo(engine: MemoryEngine): { writer: SmWriter; disk: { full: boolean } } {
  const disk = { full: false }
  const writer: SmWriter = {
    write: async (ops) => {
      if (disk.full) throw new Error('no space left on device')
      await engine.write(ops, { sync: false })
    },
  }
  return { writer, disk }
}

describe('DataMachine', () => {
  it('round-trips key/value pairs', () => {
    const pairs: [Uint8Array, Uint8Array][] = [
      [Uint8Array.of(1), Uint8Array.of()],
      [Uint8Array.of(2, 3), Uint8Array.of(4, 5, 6)],
    ]
    expect(decodePairs(encodePairs(pairs))).toEqual(pairs)
    expect(() => decodePairs(Uint8Array.of(0, 0, 0, 9, 1))).toThrow(/truncated/)
  })

  it('skips entries at or below its durable applied index', async () => {
    const engine = new MemoryEngine()
    index = 0
    const m = await machineOn(engine)
    const [r] = m.apply([open()])
    await r
    const again = await machineOn(engine, 1)
    expect(again.apply([{ ...open(), index: 1 }])).toEqual([undefined])
  })

  it('counts as its backlog the entries handed to it whose writes are not stored yet', async () => {
    const engine = new MemoryEngine()
    index = 0
    const held: (() => void)[] = []
    const m = await machineOn(engine, 0, undefined, { writer: heldWriter(engine, held) })
    expect(m.applyBacklog()).toBe(0)
    const results = m.apply([open(), enqueue(1), enqueue(2)])
    expect(m.applyBacklog()).toBe(3)
    await Promise.all(results) // applied: their writes are still in the (held) group commit
    expect(m.applyBacklog()).toBe(3)
    // An entry at or below the applied index is no work.
    m.apply([{ ...open(), index: 1 }])
    expect(m.applyBacklog()).toBe(3)
    for (let i = 0; i < 100 && m.applyBacklog() > 0; i++) {
      held.shift()?.()
      await new Promise((r) => setImmediate(r))
    }
    expect(m.applyBacklog()).toBe(0)
  })

  it('is caught up once every entry handed to it has applied, its writes still held', async () => {
    const engine = new MemoryEngine()
    index = 0
    const held: (() => void)[] = []
    const m = await machineOn(engine, 0, undefined, { writer: heldWriter(engine, held) })
    m.apply([open(), enqueue(1), enqueue(2)])
    // Handed over (what the Raft host counts as applied), not yet applied: a read now misses them.
    expect((await m.machine.stats('q', 0, 5_000))?.messages ?? 0).toBe(0)
    await m.caughtUp()
    expect((await m.machine.stats('q', 0, 5_000))?.messages).toBe(2)
    expect(held.length).toBeGreaterThan(0) // writes held: caughtUp did not wait for them
    for (let i = 0; i < 100 && m.applyBacklog() > 0; i++) {
      held.shift()?.()
      await new Promise((r) => setImmediate(r))
    }
  })

  it('installs its snapshot on another replica, which then behaves the same', async () => {
    const { engine: leaderEngine, side: leaderSide, dm: leader } = await leaderReplica()
    const results = leader.apply([open(), enqueue(7), enqueue(8), enqueue(9)])
    await Promise.all(results)
    const handle = await leader.snapshot()
    // A handle (31 bytes), not the state: the image stays on the leader.
    expect(handle.length).toBe(31)
    expect(decodeImageHandle(handle)).toMatchObject({ groupId: 1, index: 4 })
    expect(decodeIndex(await leaderEngine.get(appliedKeyOf(1)))).toBe(4)

    const followerEngine = new MemoryEngine()
    await followerEngine.write([{ type: 'put', key: appliedKeyOf(1), value: new Uint8Array(8) }], {
      sync: false,
    })
    const followerSide = imagePeer(followerEngine, () => leaderSide.store)
    const follower = await machineOn(followerEngine, 0, undefined, { images: followerSide.port })
    await stage(followerSide, snapshotOf(handle, 4))
    await follower.restore(snapshotOf(handle, 4))
    expect(decodeIndex(await followerEngine.get(appliedKeyOf(1)))).toBe(4)
    expect(await followerEngine.range(stateMachineRange(1))).toEqual(
      await leaderEngine.range(stateMachineRange(1)),
    )
    // The staged copy is gone once installed.
    expect(await followerEngine.range(stagedImageRange(1))).toEqual([])
    // Entries up to the snapshot are skipped; the next one gives the same result on both.
    expect(follower.apply([{ ...enqueue(0), index: 4 }])).toEqual([undefined])
    index = 4
    const next = lease()
    const [a] = leader.apply([next])
    const [b] = follower.apply([next])
    expect(await b).toEqual(await a)
    expect(((await a) as { result: { leases: unknown[] } }).result.leases).toHaveLength(3)
  })

  it('installs a second snapshot staged while it installed the first (the first install keeps it)', async () => {
    const { engine: leaderEngine, side: leaderSide, dm: leader } = await leaderReplica()
    await Promise.all(leader.apply([open(), enqueue(1)]))
    const first = snapshotOf(await leader.snapshot(), 2)
    await Promise.all(leader.apply([enqueue(2), lease()]))
    const second = snapshotOf(await leader.snapshot(), 4)
    const followerEngine = new MemoryEngine()
    const followerSide = imagePeer(followerEngine, () => leaderSide.store)
    const follower = await machineOn(followerEngine, 0, undefined, { images: followerSide.port })
    // Both staged before the first install ends (the replica takes the second meanwhile).
    await stage(followerSide, first)
    await stage(followerSide, second)
    await follower.restore(first)
    await follower.restore(second)
    expect(await followerEngine.range(stateMachineRange(1))).toEqual(
      await leaderEngine.range(stateMachineRange(1)),
    )
    expect(await followerEngine.range(stagedImageRange(1))).toEqual([])
  })

  it('installs a snapshot only once the writes of the entries applied before it are stored', async () => {
    const { engine: leaderEngine, side: leaderSide, dm: leader } = await leaderReplica()
    await Promise.all(leader.apply([open(), enqueue(1)]))
    const snapshot = snapshotOf(await leader.snapshot(), 2)
    // A follower of its own history (other queue, other keys) whose last writes are still
    // in the group commit when the snapshot comes (as a lagging follower's lazy writes are).
    const engine = new MemoryEngine()
    const held: (() => void)[] = []
    const followerSide = imagePeer(engine, () => leaderSide.store)
    await stage(followerSide, snapshot)
    index = 0
    const other = () => entry(encodeDataCommand({ type: 'open', queue: 'r', partition: 0, config: {} }))
    const follower = await machineOn(engine, 0, undefined, {
      writer: heldWriter(engine, held),
      images: followerSide.port,
    })
    await Promise.all(follower.apply([other(), open()]).slice(0, 1))
    expect(held.length).toBeGreaterThan(0)
    const restored = follower.restore(snapshot)
    let done = false
    void restored.then(() => {
      done = true
    })
    // The install runs as far as it can before any of those writes is stored; then they land.
    for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r))
    for (let i = 0; i < 1_000 && !done; i++) {
      held.shift()?.()
      await new Promise((r) => setImmediate(r))
    }
    await restored
    // Exactly the leader's keys: nothing of r/0 written before the install is left.
    expect(await engine.range(stateMachineRange(1))).toEqual(await leaderEngine.range(stateMachineRange(1)))
  })

  it('is settled only once a snapshot install under way has ended (a removal waits for it)', async () => {
    const { side: leaderSide, dm: leader } = await leaderReplica()
    await Promise.all(leader.apply([open(), enqueue(1), enqueue(2), enqueue(3)]))
    const snapshot = snapshotOf(await leader.snapshot(), 4)
    const engine = new MemoryEngine()
    const held: (() => void)[] = []
    const followerSide = imagePeer(engine, () => leaderSide.store)
    await stage(followerSide, snapshot)
    // One key per page: the install is many writes, each held until released below.
    const follower = await machineOn(engine, 0, 1, {
      writer: heldWriter(engine, held),
      images: followerSide.port,
    })
    let installed = false
    const restored = follower.restore(snapshot).then(() => {
      installed = true
    })
    let settledWhenInstalled: boolean | undefined
    const settled = follower.settled().then(() => {
      settledWhenInstalled = installed
    })
    for (let i = 0; i < 1_000 && !(installed && settledWhenInstalled !== undefined); i++) {
      held.shift()?.()
      await new Promise((r) => setImmediate(r))
    }
    await Promise.all([restored, settled])
    expect(settledWhenInstalled).toBe(true)
    expect(decodeIndex(await engine.get(appliedKeyOf(1)))).toBe(4)
  })

  it('refuses to install a snapshot whose image is not staged, naming it', async () => {
    const { dm: leader } = await leaderReplica()
    await Promise.all(leader.apply([open(), enqueue(1)]))
    const handle = await leader.snapshot()
    const follower = await machineOn(new MemoryEngine(), 0, undefined, { fatal: () => {} })
    await expect(follower.restore(snapshotOf(handle, 2))).rejects.toThrow(
      /names image \d+ .*which is not staged here/,
    )
  })

  it('installs an image carried in the snapshot itself (as made before 2026-11-30)', async () => {
    const leaderEngine = new MemoryEngine()
    index = 0
    const leader = await machineOn(leaderEngine)
    await Promise.all(leader.apply([open(), enqueue(1), enqueue(2), lease()]))
    const state = await leaderEngine.range(stateMachineRange(1))
    const followerEngine = new MemoryEngine()
    const follower = await machineOn(followerEngine, 0, 2)
    await follower.restore(snapshotOf(encodePairs(state), 4))
    expect(await followerEngine.range(stateMachineRange(1))).toEqual(state)
  })

  it('applies a fence only once every earlier entry is written, so an export after it sees them', async () => {
    const engine = new MemoryEngine()
    const group = await DataGroupMachine.open(1, engine)
    // Writes reach the engine only when released (as a group commit would, at its flush).
    const held: (() => void)[] = []
    const writer = heldWriter(engine, held)
    const dm = await machineOn(engine, 0, undefined, { group, writer })
    const entries = [
      open(),
      enqueue(7),
      entry(encodeDataCommand({ type: 'fence', queue: 'q', partition: 0 })),
    ]
    const [, , fenced] = dm.apply(entries) as Promise<unknown>[]
    let done = false
    void fenced?.then(() => {
      done = true
    })
    await new Promise((r) => setTimeout(r, 20))
    expect(done).toBe(false)
    while (held.length > 0 && !done) {
      held.shift()?.()
      await new Promise((r) => setTimeout(r, 5))
    }
    expect(await fenced).toEqual({ type: 'fenced' })
    const atFence = await group.exportChunk('q', 0, undefined, 1 << 20)
    // Everything written (the fence's own write too): the partition's keys are the same.
    for (const release of held.splice(0)) release()
    await dm.settled()
    const later = await group.exportChunk('q', 0, undefined, 1 << 20)
    expect(atFence.pairs.length).toBeGreaterThan(0)
    expect(atFence).toEqual(later)
  })

  it('snapshots the state of the entries handed to it before the call, not of later ones', async () => {
    const engine = new MemoryEngine()
    index = 0
    const group = await DataGroupMachine.open(1, engine)
    // Writes reach the engine only when released, in order (as a group commit's flushes).
    const held: (() => void)[] = []
    const writer = heldWriter(engine, held)
    const leaderSide = imagePeer(engine)
    const dm = await machineOn(engine, 0, undefined, { group, writer, images: leaderSide.port })
    const releaseUntil = async (done: () => boolean) => {
      while (!done()) {
        held.shift()?.()
        await new Promise((r) => setTimeout(r, 2))
      }
    }
    dm.apply([open(), enqueue(1), enqueue(2)])
    // The caller labels the snapshot with index 3; entries 4 and 5 come right after it.
    const snapshot = dm.snapshot()
    const later = [enqueue(3), lease()]
    const results = dm.apply(later) as Promise<unknown>[]
    let taken: Uint8Array | undefined
    void snapshot.then((s) => {
      taken = s
    })
    await releaseUntil(() => taken !== undefined)
    const handle = taken as Uint8Array
    expect(decodeImageHandle(handle)?.index).toBe(3)
    let settled = false
    void dm.settled().then(() => {
      settled = true
    })
    await releaseUntil(() => settled)
    // Entries 4 and 5 are written by now, but the image is the state of 3.
    const replicaEngine = new MemoryEngine()
    const replicaSide = imagePeer(replicaEngine, () => leaderSide.store)
    await stage(replicaSide, snapshotOf(handle, 3))
    const imageId = decodeImageHandle(handle)?.imageId ?? 0
    const staged = await replicaSide.stager.page(1, imageId, undefined, { keys: 1000, bytes: 1 << 20 })
    const applied = staged.pairs.find(([k]) => Buffer.from(k).equals(Buffer.from(appliedKeyOf(1))))
    expect(decodeIndex(applied?.[1])).toBe(3)
    // A replica that installs it and applies 4 and 5 ends where this one does: 3 leased.
    const replica = await machineOn(replicaEngine, 0, undefined, { images: replicaSide.port })
    await replica.restore(snapshotOf(handle, 3))
    const [, leased] = replica.apply(later) as Promise<unknown>[]
    const leases = async (r: Promise<unknown> | undefined) =>
      ((await r) as { result: { leases: unknown[] } }).result.leases.length
    expect(await leases(results[1])).toBe(3)
    expect(await leases(leased)).toBe(3)
  })

  it("leaves a dropped partition's keys out of a snapshot while they are swept, and the copy ends the same", async () => {
    const engine = new MemoryEngine()
    index = 0
    let hold: Promise<void> | undefined
    // The sweeper's writes wait while held; the entries' writes go straight to the engine.
    const held = {
      get: engine.get.bind(engine),
      getMany: engine.getMany.bind(engine),
      range: engine.range.bind(engine),
      keys: engine.keys.bind(engine),
      write: async (ops: Parameters<MemoryEngine['write']>[0], o: { sync: boolean }) => {
        await hold
        return engine.write(ops, o)
      },
    }
    const group = await DataGroupMachine.open(1, held, 4)
    const leaderSide = imagePeer(engine)
    const dm = await machineOn(engine, 0, undefined, { group, images: leaderSide.port })
    const other = () => entry(encodeDataCommand({ type: 'open', queue: 'r', partition: 0, config: {} }))
    await Promise.all(dm.apply([open(), other(), ...Array.from({ length: 10 }, (_, i) => enqueue(i))]))
    let release = (): void => {}
    hold = new Promise((resolve) => {
      release = resolve
    })
    const drop = entry(encodeDataCommand({ type: 'drop', queue: 'q', partition: 0 }))
    await Promise.all(dm.apply([drop]))
    await dm.settled()
    const garbage = group.garbageRanges()
    expect(garbage).toHaveLength(1)
    const snapshot = snapshotOf(await dm.snapshot(), drop.index)
    const inGarbage = (key: Uint8Array) =>
      garbage.some((g) => Buffer.compare(key, g.gte) >= 0 && Buffer.compare(key, g.lt) < 0)
    expect((await engine.range(stateMachineRange(1))).some(([k]) => inGarbage(k))).toBe(true)

    const followerEngine = new MemoryEngine()
    const followerSide = imagePeer(followerEngine, () => leaderSide.store)
    await stage(followerSide, snapshot)
    const imageId = decodeImageHandle(snapshot.data)?.imageId ?? 0
    const image = (await followerSide.stager.page(1, imageId, undefined, { keys: 1000, bytes: 1 << 20 }))
      .pairs
    expect(image.some(([k]) => inGarbage(k))).toBe(false)
    expect(image.length).toBe(3) // r/0's registry key, the tombstone, the applied index
    const follower = await machineOn(followerEngine, 0, undefined, { images: followerSide.port })
    await follower.restore(snapshot)
    hold = undefined
    release()
    await group.swept()
    await follower.machine.swept()
    expect(follower.machine.partitionIds()).toEqual(['r/0'])
    expect(await followerEngine.range(stateMachineRange(1))).toEqual(await engine.range(stateMachineRange(1)))
  })

  it('installs a snapshot a page per write, the applied index last, and again after a crash midway', async () => {
    const { engine: leaderEngine, side: leaderSide, dm: leader } = await leaderReplica()
    await Promise.all(leader.apply([open(), ...Array.from({ length: 8 }, (_, i) => enqueue(i)), lease()]))
    const snapshot = snapshotOf(await leader.snapshot(), index)
    // A follower with older state of its own (applied 2), whose writes fail after the fifth.
    const engine = new MemoryEngine()
    index = 0
    const old = await machineOn(engine)
    await Promise.all(old.apply([open(), enqueue(99)]))
    const followerSide = imagePeer(engine, () => leaderSide.store)
    await stage(followerSide, snapshot)
    const writes: number[] = []
    let failAfter = 5
    const writer: SmWriter = {
      write: async (ops) => {
        if (writes.length >= failAfter) throw new Error('crash')
        writes.push(ops.length)
        await engine.write(ops, { sync: false })
      },
    }
    const on = { writer, fatal: () => {}, images: followerSide.port }
    const follower = await machineOn(engine, 2, 3, on)
    await expect(follower.restore(snapshot)).rejects.toThrow('crash')
    expect(writes).toHaveLength(5)
    expect(Math.max(...writes)).toBe(3)
    expect(decodeIndex(await engine.get(appliedKeyOf(1)))).toBe(2) // still the old one
    // The node installs it again at start, from the image still staged.
    writes.length = 0
    failAfter = Number.POSITIVE_INFINITY
    const again = await machineOn(engine, 2, 3, on)
    await again.restore(snapshot)
    expect(Math.max(...writes)).toBe(3)
    expect(writes.at(-1)).toBe(1) // the applied index alone, last
    expect(await engine.range(stateMachineRange(1))).toEqual(await leaderEngine.range(stateMachineRange(1)))
    expect(await engine.range(stagedImageRange(1))).toEqual([])
  })

  it('never says its state is persisted once a write failed', async () => {
    const engine = new MemoryEngine()
    index = 0
    const failures: unknown[] = []
    const { writer, disk } = writerTo(engine)
    const dm = await machineOn(engine, 0, undefined, { writer, fatal: (e) => failures.push(e) })
    await Promise.all(dm.apply([open(), enqueue(1)]))
    await dm.persisted()
    disk.full = true
    await Promise.allSettled(dm.apply([enqueue(2)]))
    await expect(dm.persisted()).rejects.toThrow('no space left')
    disk.full = false
    const [later] = dm.apply([enqueue(3)])
    await expect(later).rejects.toThrow('no space left') // nothing is applied or written after it
    await expect(dm.persisted()).rejects.toThrow('no space left')
    expect(decodeIndex(await engine.get(appliedKeyOf(1)))).toBe(2)
    expect(failures.length).toBeGreaterThan(0)
  })

  it('takes no snapshot once a write failed (its image would lack the failed entry it is labelled with)', async () => {
    const engine = new MemoryEngine()
    index = 0
    const failures: unknown[] = []
    const { writer, disk } = writerTo(engine)
    const peer = imagePeer(engine)
    const take = vi.spyOn(peer.port, 'take')
    const dm = await machineOn(engine, 0, undefined, {
      writer,
      images: peer.port,
      fatal: (e) => failures.push(e),
    })
    await Promise.all(dm.apply([open(), enqueue(1)]))
    disk.full = true
    await Promise.allSettled(dm.apply([enqueue(2)]))
    await expect(dm.snapshot()).rejects.toThrow('no space left')
    expect(take).not.toHaveBeenCalled()
    expect(failures.length).toBeGreaterThan(0)
  })

  it("writes nothing for an entry whose apply ends after an earlier entry's write failed", async () => {
    const engine = new MemoryEngine()
    index = 0
    const writes: { resolve: () => void; reject: (e: Error) => void }[] = []
    const writer: SmWriter = {
      write: (ops) =>
        new Promise<void>((resolve, reject) =>
          writes.push({ resolve: () => void engine.write(ops, { sync: false }).then(resolve), reject }),
        ),
    }
    // The third entry's apply (it reads the engine) is still running when the second entry's
    // write fails.
    const group = await DataGroupMachine.open(1, engine)
    const apply = group.apply.bind(group)
    let release = () => {}
    const gate = new Promise<void>((r) => (release = r))
    let applies = 0
    group.apply = (async (...args: Parameters<typeof apply>) => {
      if (++applies === 3) await gate
      return apply(...args)
    }) as typeof group.apply
    const failures: unknown[] = []
    const dm = await machineOn(engine, 0, undefined, { group, writer, fatal: (e) => failures.push(e) })
    const steps = dm.apply([open(), enqueue(1), enqueue(2)])
    await vi.waitFor(() => expect(writes).toHaveLength(2))
    writes[0]?.resolve()
    writes[1]?.reject(new Error('gave up waiting for room'))
    await vi.waitFor(() => expect(failures).toHaveLength(1))
    release()
    await Promise.allSettled(steps)
    expect(writes).toHaveLength(2) // the third entry's writes (and applied index) never went out
    expect(decodeIndex(await engine.get(appliedKeyOf(1)))).toBe(1)
  })
})
