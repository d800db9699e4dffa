import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  type BatchOp,
  DurabilityMark,
  LevelEngine,
  LogStore,
  MemoryEngine,
  nodeKey,
  OverloadedError,
} from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { holdsNothing, NO_CLUSTER_ENTRY, NodeFacts, type NodeFactsStore } from './node-facts'

/** A store over a MemoryEngine that counts its writes. */
function store(engine = new MemoryEngine()): NodeFactsStore & { writes: number } {
  const s = {
    writes: 0,
    get: (key: Uint8Array) => engine.get(key),
    write: async (ops: readonly BatchOp[]) => {
      s.writes++
      await engine.write(ops, { sync: true })
    },
  }
  return s
}

describe('NodeFacts', () => {
  it('remembers across a reopen that the node left the meta group', async () => {
    const engine = new MemoryEngine()
    const first = await NodeFacts.open(store(engine))
    expect(first.leftMeta).toBe(false)
    await first.markLeftMeta()
    expect(first.leftMeta).toBe(true)
    expect((await NodeFacts.open(store(engine))).leftMeta).toBe(true)
  })

  it('keeps the meta seeds sorted, writes only when they change, and reads them back', async () => {
    const engine = new MemoryEngine()
    const s = store(engine)
    const facts = await NodeFacts.open(s)
    expect(facts.metaSeeds).toEqual([])
    const seeds = [
      { nodeId: 'n4', address: '127.0.0.1:7004' },
      { nodeId: 'n2', address: '127.0.0.1:7002' },
      { nodeId: 'n9', address: '' }, // no address: not kept
    ]
    await facts.setMetaSeeds(seeds)
    await facts.setMetaSeeds([...seeds].reverse())
    await facts.setMetaSeeds([]) // an answer without members changes nothing
    expect(s.writes).toBe(2) // the store id at the first open, then the seeds
    const kept = [
      { nodeId: 'n2', address: '127.0.0.1:7002' },
      { nodeId: 'n4', address: '127.0.0.1:7004' },
    ]
    expect(facts.metaSeeds).toEqual(kept)
    expect((await NodeFacts.open(store(engine))).metaSeeds).toEqual(kept)
  })

  it('reads damaged or foreign seed bytes as no seeds (the configured ones remain)', async () => {
    for (const bytes of ['not json', '{"a":1}', '[{"nodeId":1}]']) {
      const engine = new MemoryEngine()
      await engine.write(
        [{ type: 'put', key: nodeKey('meta-seeds'), value: new TextEncoder().encode(bytes) }],
        { sync: true },
      )
      expect((await NodeFacts.open(store(engine))).metaSeeds).toEqual([])
    }
  })

  it('keeps the cluster format level across a reopen, writing only a change', async () => {
    const engine = new MemoryEngine()
    const s = store(engine)
    const facts = await NodeFacts.open(s)
    expect(facts.formatLevel).toBe(1) // a new node
    await facts.setFormatLevel(3)
    await facts.setFormatLevel(3)
    await facts.setFormatLevel(0) // not a level: ignored
    expect(s.writes).toBe(2) // the store id at the first open, then the level
    expect((await NodeFacts.open(store(engine))).formatLevel).toBe(3)
  })

  it('writes a fact again after its write failed (the group commit gave up): memory is not ahead of the disk', async () => {
    const engine = new MemoryEngine()
    const s = store(engine)
    const facts = await NodeFacts.open(s, true)
    const inner = s.write
    let failing = true
    s.write = async (ops) => {
      if (failing) throw new OverloadedError('group commit write gave up waiting for staging room')
      await inner(ops)
    }
    const seeds = [{ nodeId: 'n2', address: '127.0.0.1:7002' }]
    await expect(facts.setFormatLevel(2)).rejects.toBeInstanceOf(OverloadedError)
    await expect(facts.setMetaSeeds(seeds)).rejects.toBeInstanceOf(OverloadedError)
    await expect(facts.markAccepted()).rejects.toBeInstanceOf(OverloadedError)
    // The next heartbeat answer carries the same facts: they are kept this time.
    failing = false
    await facts.setFormatLevel(2)
    await facts.setMetaSeeds(seeds)
    await facts.markAccepted()
    const reopened = await NodeFacts.open(store(engine))
    expect(reopened.formatLevel).toBe(2)
    expect(reopened.metaSeeds).toEqual(seeds)
    expect(reopened.fresh).toBe(false)
  })

  it('makes a store id at the first open and keeps it; a damaged one is made again', async () => {
    const engine = new MemoryEngine()
    const s = store(engine)
    const first = await NodeFacts.open(s)
    expect(first.storeId).toMatch(/^[0-9a-f]{32}$/)
    expect(s.writes).toBe(1)
    const again = store(engine)
    expect((await NodeFacts.open(again)).storeId).toBe(first.storeId)
    expect(again.writes).toBe(0)
    expect((await NodeFacts.open(store())).storeId).not.toBe(first.storeId) // another database
    await engine.write([{ type: 'put', key: nodeKey('store-id'), value: new TextEncoder().encode('x') }], {
      sync: true,
    })
    expect((await NodeFacts.open(store(engine))).storeId).toMatch(/^[0-9a-f]{32}$/)
  })

  it('keeps a new database fresh across restarts until a meta leader accepts the node', async () => {
    const engine = new MemoryEngine()
    expect((await NodeFacts.open(store(engine), true)).fresh).toBe(true)
    const again = await NodeFacts.open(store(engine)) // restarted before any heartbeat answer
    expect(again.fresh).toBe(true)
    await again.markAccepted()
    expect(again.fresh).toBe(false)
    expect((await NodeFacts.open(store(engine))).fresh).toBe(false)
    // A database of an earlier version (no store id yet) is given one, but is not fresh.
    expect((await NodeFacts.open(store())).fresh).toBe(false)
  })

  it('takes a wiped data dir as fresh again after a first start that died before writing anything', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mq-facts-'))
    /** mq-server's start up to its facts, in its order; `die`: the process ends before them. */
    const start = async (die: boolean): Promise<NodeFacts | undefined> => {
      const engine = await LevelEngine.open(join(dir, 'db'))
      const empty = await holdsNothing(engine)
      const mark = await DurabilityMark.open(engine, engine.path)
      const logs = new LogStore(engine, { mark })
      await logs.finishRemovals()
      await logs.groupIdsOnDisk()
      const facts = die
        ? undefined
        : await NodeFacts.open({ get: (k) => engine.get(k), write: (ops) => logs.commit.write(ops) }, empty)
      await logs.close()
      await mark.close()
      await engine.close()
      return facts
    }
    try {
      // The first start after the wipe creates LevelDB's files, then fails (a full disk, a kill).
      expect(await start(true)).toBeUndefined()
      // Restarted, it is still a new store: a founder waits at its gate (its vote may be lost).
      const facts = await start(false)
      expect(facts?.fresh).toBe(true)
      // Once it holds its facts, it is no longer empty: the store id stays, and so does fresh.
      const again = await start(false)
      expect(again?.storeId).toBe(facts?.storeId)
      expect(again?.fresh).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it('refuses a data dir kept by another node id, before it writes anything', async () => {
    const engine = new MemoryEngine()
    const first = store(engine)
    const facts = await NodeFacts.open(first, true, 'n6')
    expect(first.writes).toBe(1) // the node id goes with the store id
    expect((await NodeFacts.open(store(engine), false, 'n6')).storeId).toBe(facts.storeId)
    const other = store(engine)
    await expect(NodeFacts.open(other, false, 'n7')).rejects.toThrow(
      /it belongs to node n6, not n7: start n6 with it, or give n7 a data dir of its own/,
    )
    expect(other.writes).toBe(0)
    // A data dir of an earlier version (a store id, no node id) is given the id it starts with.
    const older = new MemoryEngine()
    await NodeFacts.open(store(older))
    const upgraded = store(older)
    await NodeFacts.open(upgraded, false, 'n2')
    expect(upgraded.writes).toBe(1)
    await expect(NodeFacts.open(store(older), false, 'n3')).rejects.toThrow(/belongs to node n2, not n3/)
  })

  it("keeps the first start's --initial-meta or --join with its store id, and resumes from it without either", async () => {
    const founders = [
      { nodeId: 'n1', address: '127.0.0.1:7001' },
      { nodeId: 'n2', address: '127.0.0.1:7002' },
    ]
    const engine = new MemoryEngine()
    const first = store(engine)
    const facts = await NodeFacts.open(first, true, 'n1', { initialMeta: founders, join: '' })
    // One batch with the store id and the node id: a first start that dies leaves all or none.
    expect(first.writes).toBe(1)
    expect(facts.clusterEntry).toEqual({ initialMeta: founders, join: '' })
    const again = store(engine)
    const resumed = await NodeFacts.open(again, false, 'n1', { initialMeta: [], join: '' })
    expect(resumed.clusterEntry).toEqual({ initialMeta: founders, join: '' })
    expect(resumed.fresh).toBe(true) // not accepted yet: a founder still waits at its gate
    // A list given at a later start is used for that start; the first one stays kept.
    await NodeFacts.open(again, false, 'n1', { initialMeta: founders.slice(0, 1), join: '' })
    expect(again.writes).toBe(0)
    expect((await NodeFacts.open(store(engine))).clusterEntry).toEqual({ initialMeta: founders, join: '' })
    // A joined node.
    const joined = new MemoryEngine()
    await NodeFacts.open(store(joined), true, 'n4', { initialMeta: [], join: '127.0.0.1:7001' })
    expect(
      (await NodeFacts.open(store(joined), false, 'n4', { initialMeta: [], join: '' })).clusterEntry,
    ).toEqual({ initialMeta: [], join: '127.0.0.1:7001' })
  })

  it('refuses a start with neither flag on a data dir that keeps no entry, before it writes anything', async () => {
    const neither = { initialMeta: [], join: '' }
    const fresh = store()
    await expect(NodeFacts.open(fresh, true, 'n1', neither)).rejects.toThrow(NO_CLUSTER_ENTRY)
    expect(fresh.writes).toBe(0)
    expect(NO_CLUSTER_ENTRY).toMatch(
      /give --initial-meta to bootstrap a cluster or --join ADDRESS to join one/,
    )
    // A data dir of an earlier version (no entry) needs the flag once, then keeps it.
    const older = new MemoryEngine()
    await NodeFacts.open(store(older), true, 'n4')
    await expect(NodeFacts.open(store(older), false, 'n4', neither)).rejects.toThrow(NO_CLUSTER_ENTRY)
    const upgraded = store(older)
    await NodeFacts.open(upgraded, false, 'n4', { initialMeta: [], join: '127.0.0.1:7001' })
    expect(upgraded.writes).toBe(1)
    expect((await NodeFacts.open(store(older), false, 'n4', neither)).clusterEntry?.join).toBe(
      '127.0.0.1:7001',
    )
    // Damaged bytes are no entry: the flag is asked for again.
    const damaged = new MemoryEngine()
    await damaged.write(
      [{ type: 'put', key: nodeKey('cluster-entry'), value: new TextEncoder().encode('{') }],
      {
        sync: true,
      },
    )
    await expect(NodeFacts.open(store(damaged), false, 'n1', neither)).rejects.toThrow(NO_CLUSTER_ENTRY)
  })

  it('takes a database holding anything, without a store id, as an older store, not fresh', async () => {
    const engine = new MemoryEngine()
    expect(await holdsNothing(engine)).toBe(true)
    await engine.write([{ type: 'put', key: Uint8Array.of(1, 0x21, 0, 4), value: Uint8Array.of(7) }], {
      sync: true,
    })
    expect(await holdsNothing(engine)).toBe(false)
    const facts = await NodeFacts.open(store(engine), await holdsNothing(engine))
    expect(facts.fresh).toBe(false)
  })
})
