import {
  CompactedError,
  type Entry,
  type Snapshot,
  SnapshotTooLargeError,
  UnavailableError,
} from '@mq/raft-core'
import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { Engine } from '../src/engine'
import {
  ClosedError,
  CorruptRecordError,
  GroupRemovingError,
  InvalidArgumentError,
  OverloadedError,
} from '../src/errors'
import type { GroupLog } from '../src/group-log'
import { appendBytes } from '../src/key-codec'
import { LevelEngine } from '../src/level-engine'
import { entryKey, groupRemovingKey, hardStateKey, stateMachineKey } from '../src/log-keys'
import { LogStore } from '../src/log-store'
import { MemoryEngine } from '../src/memory-engine'
import { entries, entry, GatedEngine, tempDir } from './helpers'

interface Env {
  engine: Engine
  /** Closes the engine (Level) and opens it again; the memory engine is kept as it is. */
  reopen(): Promise<Engine>
  dispose(): Promise<void>
}

const envs: [string, () => Promise<Env>][] = [
  [
    'MemoryEngine',
    async () => {
      const engine = new MemoryEngine()
      return { engine, reopen: async () => engine, dispose: () => engine.close() }
    },
  ],
  [
    'LevelEngine',
    async () => {
      const dir = await tempDir('kv-logstore')
      const path = `${dir.path}/db`
      const env: Env = {
        engine: await LevelEngine.open(path),
        reopen: async () => {
          await env.engine.close()
          env.engine = await LevelEngine.open(path)
          return env.engine
        },
        dispose: async () => {
          await env.engine.close()
          await dir.remove()
        },
      }
      return env
    },
  ],
]

const conf = { voters: ['n1', 'n2', 'n3'], learners: ['n4'], votersOutgoing: [], learnersNext: [] }
const snapshotAt = (index: number, term: number, text = `state@${index}`): Snapshot => ({
  meta: { index, term, conf },
  data: new TextEncoder().encode(text),
})
const indexes = (es: Entry[]) => es.map((e) => e.index)

for (const [name, makeEnv] of envs) {
  describe(`LogStore on ${name}`, () => {
    let env: Env
    let store: LogStore

    beforeEach(async () => {
      env = await makeEnv()
      store = new LogStore(env.engine)
    })
    afterEach(async () => {
      await store.close()
      await env.dispose()
    })

    /** Flushes, closes the store, reopens the engine and a new store, reopens the group. */
    async function restart(groupId: number): Promise<GroupLog> {
      await store.durability.flush()
      await store.close()
      store = new LogStore(await env.reopen())
      return store.openGroup(groupId)
    }

    it('a new group is empty', async () => {
      const log = await store.openGroup(1)
      expect(log.firstIndex()).toBe(1)
      expect(log.lastIndex()).toBe(0)
      expect(log.term(0)).toBe(0)
      expect(log.entries(1, 1, 100)).toEqual([])
      expect(log.initialState()).toEqual({
        hardState: { term: 0, vote: '', commit: 0 },
        conf: { voters: [], learners: [], votersOutgoing: [], learnersNext: [] },
      })
      expect(log.snapshot().meta.index).toBe(0)
      expect(() => log.term(1)).toThrow(UnavailableError)
    })

    it('reports the bootstrap membership until a snapshot carries one', async () => {
      const boot = { voters: ['a', 'b', 'c'], learners: [], votersOutgoing: [], learnersNext: [] }
      let log = await store.openGroup(8, boot)
      expect(log.initialState().conf).toEqual(boot)
      log.append(entries(1, 4, 1))
      log.compact(snapshotAt(3, 1), 1)
      expect(log.initialState().conf).toEqual(conf)
      // An older snapshot is not recorded, but the log is still compacted.
      log.compact(snapshotAt(2, 1, 'old'), 2)
      expect(log.firstIndex()).toBe(3)
      expect(new TextDecoder().decode(log.snapshot().data)).toBe('state@3')
      log = await restart(8)
      expect(log.initialState().conf).toEqual(conf)
      expect(log.snapshot().meta.index).toBe(3)
      expect(log.firstIndex()).toBe(3)
      expect(log.term(2)).toBe(1)
    })

    it('appends, reads by range with a byte limit, answers terms, and survives a restart', async () => {
      let log = await store.openGroup(1)
      log.append(entries(1, 6, 1))
      log.append(entries(6, 11, 2))
      log.setHardState({ term: 2, vote: 'n2', commit: 7 })
      const check = (log: GroupLog) => {
        expect(log.lastIndex()).toBe(10)
        expect(indexes(log.entries(1, 11, 1 << 20))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        // e1..e9 have 2 data bytes: at least one entry, then no more than bytesMax in all.
        expect(indexes(log.entries(3, 11, 0))).toEqual([3])
        expect(indexes(log.entries(3, 11, 5))).toEqual([3, 4])
        expect(indexes(log.entries(3, 11, 6))).toEqual([3, 4, 5])
        expect(log.term(5)).toBe(1)
        expect(log.term(6)).toBe(2)
        expect(log.entries(4, 5, 0)[0]).toEqual(entry(4, 1))
        expect(() => log.entries(1, 12, 100)).toThrow(UnavailableError)
        expect(log.initialState().hardState).toEqual({ term: 2, vote: 'n2', commit: 7 })
      }
      check(log)
      log = await restart(1)
      check(log)
    })

    it('records the clock offset and gives it back after a restart; none before one is recorded', async () => {
      let log = await store.openGroup(4)
      expect(log.initialState().clockOffsetMs).toBeUndefined()
      log.setClockOffset(-12_345)
      expect(log.initialState().clockOffsetMs).toBe(-12_345)
      log = await restart(4)
      expect(log.initialState().clockOffsetMs).toBe(-12_345)
      log.setClockOffset(678)
      log = await restart(4)
      expect(log.initialState().clockOffsetMs).toBe(678)
      expect(() => log.setClockOffset(1.5)).toThrow(InvalidArgumentError)
      expect(() => log.setClockOffset(Number.NaN)).toThrow(/whole number of milliseconds, got NaN/)
      expect(log.initialState().clockOffsetMs).toBe(678)
    })

    it('truncates a conflicting suffix (Raft §5.3), also after a restart', async () => {
      let log = await store.openGroup(3)
      log.append(entries(1, 8, 1))
      log.append([entry(4, 2, 'x4'), entry(5, 2, 'x5')])
      expect(log.lastIndex()).toBe(5)
      expect(log.entries(4, 6, 100).map((e) => new TextDecoder().decode(e.data))).toEqual(['x4', 'x5'])
      log = await restart(3)
      expect(log.lastIndex()).toBe(5)
      expect(log.term(5)).toBe(2)
      expect(log.term(3)).toBe(1)
      expect(await env.engine.get(entryKey(3, 6))).toBeUndefined()
    })

    it('rejects appends that leave a hole or go back in term, changing nothing (an empty append is a no-op)', async () => {
      const log = await store.openGroup(1)
      log.append(entries(1, 4, 2))
      expect(() => log.append([entry(6, 2)])).toThrow(InvalidArgumentError)
      expect(() => log.append([entry(4, 1)])).toThrow(InvalidArgumentError)
      expect(() => log.append([entry(4, 2), entry(6, 2)])).toThrow(InvalidArgumentError)
      log.append([])
      expect(log.lastIndex()).toBe(3)
    })

    it('refuses an entry whose type or timestamp its record cannot hold, changing nothing (it was stored, and the group did not open again)', async () => {
      let log = await store.openGroup(1)
      log.append(entries(1, 3, 1))
      const bad: Partial<Entry>[] = [
        { timestampMs: 2 ** 53 + 2 },
        { timestampMs: 1.5 },
        { timestampMs: -1 },
        { timestampMs: Number.NaN },
        { type: 2 as Entry['type'] },
      ]
      for (const b of bad) {
        expect(() => log.append([{ ...entry(3, 1), ...b }]), JSON.stringify(b)).toThrow(InvalidArgumentError)
        expect(log.lastIndex()).toBe(2)
      }
      log.append([{ ...entry(3, 1), timestampMs: 1_700_000_000_123 }])
      log = await restart(1)
      expect(log.lastIndex()).toBe(3)
      expect(log.entries(3, 4, 100)[0]?.timestampMs).toBe(1_700_000_000_123)
    })

    it('compacts behind a snapshot: first index, term at the boundary, CompactedError below', async () => {
      let log = await store.openGroup(2)
      log.append(entries(1, 11, 1))
      log.append(entries(11, 21, 3))
      log.compact(snapshotAt(15, 3), 12)
      const check = (log: GroupLog) => {
        expect(log.firstIndex()).toBe(13)
        expect(log.lastIndex()).toBe(20)
        expect(log.term(12)).toBe(3)
        expect(() => log.term(11)).toThrow(CompactedError)
        expect(() => log.entries(12, 14, 100)).toThrow(CompactedError)
        expect(indexes(log.entries(13, 15, 100))).toEqual([13, 14])
        expect(log.snapshot().meta).toEqual({ index: 15, term: 3, conf })
        expect(new TextDecoder().decode(log.snapshot().data)).toBe('state@15')
        expect(log.initialState().conf).toEqual(conf)
        expect(log.tailStats().entries).toBe(8)
      }
      check(log)
      log = await restart(2)
      check(log)
      expect(await env.engine.get(entryKey(2, 12))).toBeUndefined()
      expect(await env.engine.get(entryKey(2, 13))).toBeDefined()
    })

    it("keeps a snapshot's timestamp across a restart: a log compacted to its end has no other stamp floor", async () => {
      let log = await store.openGroup(3)
      log.append(entries(1, 6, 1))
      log.compact(
        { ...snapshotAt(5, 1), meta: { index: 5, term: 1, conf, timestampMs: 1_700_000_000_005 } },
        5,
      )
      log = await restart(3)
      expect(log.firstIndex()).toBe(6) // no entry left to carry a stamp
      expect(log.snapshot().meta).toEqual({ index: 5, term: 1, conf, timestampMs: 1_700_000_000_005 })
      // Received from a leader too.
      log.applySnapshot({
        ...snapshotAt(9, 2),
        meta: { index: 9, term: 2, conf, timestampMs: 1_700_000_000_009 },
      })
      log = await restart(3)
      expect(log.snapshot().meta.timestampMs).toBe(1_700_000_000_009)
    })

    it('applySnapshot keeps the entries after it when the log holds its index and term', async () => {
      let log = await store.openGroup(4)
      log.append(entries(1, 11, 2))
      log.applySnapshot(snapshotAt(6, 2))
      const check = (log: GroupLog) => {
        expect(log.firstIndex()).toBe(7)
        expect(log.lastIndex()).toBe(10)
        expect(log.term(6)).toBe(2)
      }
      check(log)
      log = await restart(4)
      check(log)
    })

    it('applySnapshot discards the whole log when it does not hold the snapshot’s entry', async () => {
      let log = await store.openGroup(4)
      log.append(entries(1, 11, 2))
      log.applySnapshot(snapshotAt(8, 5))
      const check = (log: GroupLog) => {
        expect(log.firstIndex()).toBe(9)
        expect(log.lastIndex()).toBe(8)
        expect(log.term(8)).toBe(5)
        expect(log.entries(9, 9, 10)).toEqual([])
      }
      check(log)
      log = await restart(4)
      check(log)
      log.append(entries(9, 12, 5))
      expect(log.lastIndex()).toBe(11)
      expect(() => log.applySnapshot(snapshotAt(3, 1))).toThrow(InvalidArgumentError)
    })

    it('records a snapshot of metadata only (no data), then an image over it without compacting', async () => {
      let log = await store.openGroup(8)
      log.append(entries(1, 10, 1))
      log.compact(snapshotAt(7, 1, ''), 5)
      log = await restart(8)
      expect(log.snapshot().meta).toEqual({ index: 7, term: 1, conf })
      expect(log.snapshot().data.length).toBe(0)
      expect(log.firstIndex()).toBe(6)
      // An image made later for a follower, recorded at the log's start: nothing more compacted.
      log.compact(snapshotAt(9, 1, 'image@9'), log.firstIndex() - 1)
      log = await restart(8)
      expect(new TextDecoder().decode(log.snapshot().data)).toBe('image@9')
      expect(log.firstIndex()).toBe(6)
      expect(indexes(log.entries(6, 10, 1e9))).toEqual([6, 7, 8, 9])
    })

    it('stores snapshot data in chunks and reads back the same bytes', async () => {
      await store.close()
      store = new LogStore(env.engine, { snapshotChunkBytes: 7, snapshotDataBytesMax: 1000 })
      let log = await store.openGroup(9)
      log.append(entries(1, 4, 1))
      const big = snapshotAt(3, 1, 'x'.repeat(100))
      log.compact(big, 3)
      log.compact(snapshotAt(3, 1, 'short'), 3)
      expect(() => log.compact(snapshotAt(3, 1, 'y'.repeat(2000)), 3)).toThrow(SnapshotTooLargeError)
      expect(() => log.compact(snapshotAt(3, 1, 'y'.repeat(2000)), 3)).toThrow(/snapshotDataBytesMax/)
      log = await restart(9)
      expect(new TextDecoder().decode(log.snapshot().data)).toBe('short')
    })

    it('keeps many groups apart in one database, lists them, and removes one as a range', async () => {
      const a = await store.openGroup(1)
      const b = await store.openGroup(2)
      const c = await store.openGroup(300)
      a.append(entries(1, 4, 1))
      b.append(entries(1, 6, 1))
      c.append(entries(1, 2, 7))
      store.stage([{ type: 'put', key: stateMachineKey(2, ['msg', 1]), value: Uint8Array.of(1) }])
      await store.durability.flush()
      expect(store.stats().batches).toBe(1)
      expect(await store.groupIdsOnDisk()).toEqual([1, 2, 300])
      await store.removeGroup(2)
      expect(() => b.lastIndex() && b.term(1)).toThrow(ClosedError)
      expect(await store.groupIdsOnDisk()).toEqual([1, 300])
      expect(await env.engine.get(stateMachineKey(2, ['msg', 1]))).toBeUndefined()
      expect((await restart(1)).lastIndex()).toBe(3)
      expect((await store.openGroup(2)).lastIndex()).toBe(0)
      expect((await store.openGroup(300)).term(1)).toBe(7)
    })

    it('removes a group a page of keys per write, and finishes a removal a crash cut short at the next start', async () => {
      await store.close()
      store = new LogStore(env.engine, { removePageKeys: 100 })
      const keep = await store.openGroup(1)
      keep.append(entries(1, 3, 1))
      await store.openGroup(2)
      const sm = (g: number, n: number) =>
        Array.from({ length: n }, (_, i) => ({
          type: 'put' as const,
          key: stateMachineKey(g, ['m', i]),
          value: Uint8Array.of(1),
        }))
      store.stage([...sm(2, 450), ...sm(3, 250)])
      await store.durability.flush()
      const before = store.stats().batches
      await store.removeGroupInPages(2)
      // The marker, five pages of at most 100 keys, and the final clear: no batch of 450 deletions.
      expect(store.stats().batches - before).toBe(7)
      expect(store.stats().batchOps.count).toBe(store.stats().batches)
      expect(await store.groupIdsOnDisk()).toEqual([1, 3])
      // While a removal runs, the group is not opened (half deleted); it is once it ended.
      const removing = store.removeGroupInPages(3)
      await expect(store.openGroup(3)).rejects.toBeInstanceOf(GroupRemovingError)
      await removing
      expect((await store.openGroup(3)).lastIndex()).toBe(0)
      store.stage(sm(3, 250))
      await store.durability.flush()
      // A removal of group 3 cut short by a crash after its marker and a first page.
      const marker = groupRemovingKey(3)
      await env.engine.write(
        [
          { type: 'put', key: marker, value: new Uint8Array(0) },
          ...sm(3, 100).map((p) => ({ type: 'del' as const, key: p.key })),
        ],
        { sync: true },
      )
      await store.close()
      store = new LogStore(await env.reopen(), { removePageKeys: 100 })
      expect(await store.finishRemovals()).toEqual([3])
      expect(await store.groupIdsOnDisk()).toEqual([1])
      expect(await env.engine.get(marker)).toBeUndefined()
      expect(await store.finishRemovals()).toEqual([])
      expect((await store.openGroup(1)).lastIndex()).toBe(2)
    })

    it('lists the groups on disk whatever their first key holds, up to the largest id', async () => {
      const log = await store.openGroup(Number.MAX_SAFE_INTEGER)
      log.append(entries(1, 2, 1))
      // A group whose first key is a state machine's, with raw bytes after its tuple.
      store.stage([
        {
          type: 'put',
          key: appendBytes(stateMachineKey(5, ['p', 0]), Uint8Array.of(1)),
          value: Uint8Array.of(1),
        },
      ])
      await store.durability.flush()
      expect(await store.groupIdsOnDisk()).toEqual([5, Number.MAX_SAFE_INTEGER])
    })

    it('a removal in pages waits for room when the commit is overloaded, and ends', async () => {
      await store.close()
      const gated = new GatedEngine(env.engine)
      store = new LogStore(gated, { stagedOpsMax: 4, removePageKeys: 100 })
      const log = await store.openGroup(2)
      log.append(entries(1, 3, 1))
      await store.durability.flush()
      // A batch in flight and the staging queue at its hard bound (twice stagedOpsMax): a
      // slow disk. The removal's marker cannot be staged now.
      gated.hold()
      store.stage([{ type: 'put', key: stateMachineKey(9, ['x']), value: Uint8Array.of(1) }])
      const inFlight = store.durability.flush()
      await gated.arrived(gated.writes.length + 1)
      store.stage(
        Array.from({ length: 8 }, (_, i) => ({
          type: 'put' as const,
          key: stateMachineKey(9, ['y', i]),
          value: Uint8Array.of(1),
        })),
      )
      expect(() =>
        store.stage([{ type: 'put', key: stateMachineKey(9, ['z']), value: Uint8Array.of(1) }]),
      ).toThrow(OverloadedError)
      let settled: unknown = 'pending'
      const removal = store.removeGroupInPages(2).then(
        () => (settled = 'done'),
        (e: unknown) => (settled = e),
      )
      await new Promise((r) => setTimeout(r, 30))
      expect(settled).toBe('pending') // not refused: it waits for room
      gated.release()
      await inFlight
      await removal
      expect(settled).toBe('done')
      expect(await store.groupIdsOnDisk()).toEqual([9])
      expect((await store.openGroup(2)).lastIndex()).toBe(0)
    })

    it('writes are visible at once and reach the engine only at the next flush', async () => {
      const log = await store.openGroup(1)
      log.append(entries(1, 3, 1))
      expect(log.lastIndex()).toBe(2)
      expect(await env.engine.get(entryKey(1, 1))).toBeUndefined()
      await store.durability.flush()
      expect(await env.engine.get(entryKey(1, 1))).toBeDefined()
    })

    it('an overloaded stage leaves the log unchanged', async () => {
      await store.close()
      const gated = new GatedEngine(env.engine)
      store = new LogStore(gated, { stagedOpsMax: 2 })
      const log = await store.openGroup(1)
      log.append(entries(1, 3, 1))
      // Hold a batch in flight: a stage past the hard bound must be refused.
      gated.hold()
      const inFlight = store.durability.flush()
      await gated.arrived(1)
      log.append(entries(3, 5, 1))
      // The hard bound for the synchronous log path is twice stagedOpsMax.
      expect(() => log.append(entries(5, 8, 1))).toThrow(OverloadedError)
      expect(log.lastIndex()).toBe(4)
      gated.release()
      await inFlight
      await store.durability.flush()
      log.append(entries(5, 8, 1))
      expect((await restart(1)).lastIndex()).toBe(7)
    })

    it('a corrupt entry fails the open with an error naming the group and the index', async () => {
      const log = await store.openGroup(5)
      log.append(entries(1, 6, 1))
      await store.durability.flush()
      const rec = (await env.engine.get(entryKey(5, 3))) as Uint8Array
      rec[rec.length - 1] = (rec[rec.length - 1] as number) ^ 0x01
      await env.engine.write([{ type: 'put', key: entryKey(5, 3), value: rec }], { sync: true })
      await store.close()
      store = new LogStore(await env.reopen())
      const err = await store.openGroup(5).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(CorruptRecordError)
      expect(err).toMatchObject({ groupId: 5, index: 3, code: 'KV_CORRUPT_RECORD' })
      expect((err as Error).message).toMatch(/group 5: entry 3 is corrupt: checksum mismatch/)
    })

    it('a hole in the log or a commit past the last index fails the open', async () => {
      const log = await store.openGroup(6)
      log.append(entries(1, 6, 1))
      log.setHardState({ term: 1, vote: '', commit: 5 })
      await store.durability.flush()
      await env.engine.write([{ type: 'del', key: entryKey(6, 3) }], { sync: true })
      await store.close()
      store = new LogStore(await env.reopen())
      await expect(store.openGroup(6)).rejects.toMatchObject({ groupId: 6, index: 3, message: /hole/ })
      await env.engine.write(
        [
          { type: 'clear', gte: entryKey(6, 3), lt: entryKey(6, 100) },
          { type: 'put', key: hardStateKey(6), value: (await env.engine.get(hardStateKey(6))) as Uint8Array },
        ],
        { sync: true },
      )
      await expect(store.openGroup(6)).rejects.toThrow(/commit 5 is past the last index 2/)
    })
  })
}

describe('GroupLog against a reference model', () => {
  it('agrees after random appends, truncations, compactions, snapshots and restarts', async () => {
    const cmd = fc.oneof(
      fc.record({
        t: fc.constant('append' as const),
        back: fc.nat({ max: 4 }),
        n: fc.integer({ min: 1, max: 4 }),
      }),
      fc.record({ t: fc.constant('compact' as const), back: fc.nat({ max: 5 }) }),
      fc.record({
        t: fc.constant('snap' as const),
        ahead: fc.integer({ min: -3, max: 3 }),
        keep: fc.boolean(),
      }),
      fc.record({ t: fc.constant('restart' as const) }),
    )
    await fc.assert(
      fc.asyncProperty(fc.array(cmd, { minLength: 1, maxLength: 40 }), async (cmds) => {
        const engine = new MemoryEngine()
        let store = new LogStore(engine)
        let log = await store.openGroup(1)
        let model: Entry[] = []
        let start = { index: 0, term: 0 }
        let term = 1
        for (const c of cmds) {
          const last = start.index + model.length
          if (c.t === 'append') {
            term++
            const from = Math.max(start.index + 1, last + 1 - c.back)
            const es = entries(from, from + c.n, term)
            log.append(es)
            model = model.slice(0, from - start.index - 1).concat(es)
          } else if (c.t === 'compact') {
            const idx = last - c.back
            if (idx <= start.index) continue
            const t = (model[idx - start.index - 1] as Entry).term
            log.compact(snapshotAt(idx, t), idx)
            model = model.slice(idx - start.index)
            start = { index: idx, term: t }
          } else if (c.t === 'snap') {
            const idx = Math.max(start.index, last + c.ahead)
            const held = idx > start.index && idx <= last
            const t = held && c.keep ? (model[idx - start.index - 1] as Entry).term : term + 1
            if (!held || !c.keep) term = Math.max(term, t)
            log.applySnapshot(snapshotAt(idx, t))
            model = held && c.keep ? model.slice(idx - start.index) : []
            start = { index: idx, term: t }
          } else {
            await store.close()
            store = new LogStore(engine)
            log = await store.openGroup(1)
          }
          expect(log.firstIndex()).toBe(start.index + 1)
          expect(log.lastIndex()).toBe(start.index + model.length)
          expect(log.term(start.index)).toBe(start.term)
          if (model.length > 0)
            expect(log.entries(start.index + 1, log.lastIndex() + 1, 1 << 30)).toEqual(model)
        }
        await store.close()
      }),
      { numRuns: 150 },
    )
  })
})

describe('corruption on disk', () => {
  it('a flipped byte inside a LevelDB table is caught by the record checksum, naming group and index', async () => {
    const dir = await tempDir('kv-flip')
    const path = `${dir.path}/db`
    try {
      // Without the engine's value checksums (which would catch it first, see
      // value-checksum.test.ts), as in a database made before they existed.
      let engine = await LevelEngine.open(path, { valueChecksums: false })
      let store = new LogStore(engine)
      const log = await store.openGroup(3)
      // Pseudo-random payloads (seeded): LevelDB leaves incompressible blocks uncompressed,
      // so a payload's bytes can be found in the table file.
      let x = 0x9e3779b9
      const next = () => {
        x ^= x << 13
        x ^= x >>> 17
        x ^= x << 5
        return x & 0xff
      }
      const payloads = Array.from({ length: 50 }, () => Uint8Array.from({ length: 128 }, next))
      log.append(payloads.map((data, i) => ({ index: i + 1, term: 1, type: 0, timestampMs: 0, data })))
      log.setHardState({ term: 1, vote: '', commit: 10 })
      await store.close()
      await engine.close()
      // Reopening replays the write-ahead log into a table (.ldb).
      engine = await LevelEngine.open(path)
      await engine.close()
      const { readdir, readFile, writeFile } = await import('node:fs/promises')
      const tables = (await readdir(path)).filter((f) => f.endsWith('.ldb'))
      expect(tables.length).toBeGreaterThan(0)
      let flipped = false
      for (const t of tables) {
        const bytes = await readFile(`${path}/${t}`)
        const at = bytes.indexOf(Buffer.from(payloads[19] as Uint8Array))
        if (at < 0) continue
        bytes[at + 64] = (bytes[at + 64] as number) ^ 0x10
        await writeFile(`${path}/${t}`, bytes)
        flipped = true
      }
      expect(flipped).toBe(true)
      engine = await LevelEngine.open(path)
      store = new LogStore(engine)
      const err = await store.openGroup(3).catch((e: unknown) => e)
      await store.close()
      await engine.close()
      expect(err).toBeInstanceOf(CorruptRecordError)
      expect(err).toMatchObject({ groupId: 3, index: 20 })
      expect((err as Error).message).toMatch(/group 3: entry 20 is corrupt: checksum mismatch/)
    } finally {
      await dir.remove()
    }
  })
})
