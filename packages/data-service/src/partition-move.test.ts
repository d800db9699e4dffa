import { MemoryEngine } from '@mq/kv-storage'
import type { Command, CommandResult } from '@mq/weighted-queue'
import { describe, expect, it } from 'vitest'
import { type DataCommand, decodeDataCommand, encodeDataCommand, type ImportChunk } from './data-command'
import { type DataApplied, DataGroupMachine, type DataResult } from './data-group'
import type { KeyPair } from './key-pairs'
import type { SweepEngine } from './range-sweeper'
import { staleMove } from './stale-move'

/** One replica's group: applies entries and writes their ops, as the host does. */
class Replica {
  readonly engine: MemoryEngine
  readonly machine: DataGroupMachine
  #written: Promise<void> = Promise.resolve()

  private constructor(engine: MemoryEngine, machine: DataGroupMachine) {
    this.engine = engine
    this.machine = machine
  }

  static async open(groupId: number, engine = new MemoryEngine(), sweepPageKeys?: number): Promise<Replica> {
    return new Replica(engine, await DataGroupMachine.open(groupId, engine, sweepPageKeys))
  }

  async apply(command: DataCommand, nowMs = 1_000): Promise<DataResult> {
    const applied: DataApplied = await this.machine.apply(
      encodeDataCommand(command),
      nowMs,
      () => this.#written,
    )
    this.#written = this.engine.write(applied.ops, { sync: false }).then(applied.written)
    await this.#written
    return applied.result
  }

  async run(command: Command, nowMs = 1_000): Promise<CommandResult> {
    const r = await this.apply({ type: 'apply', queue: 'q', partition: 0, command }, nowMs)
    if (r.type !== 'applied') throw new Error(`expected applied, got ${JSON.stringify(r)}`)
    return r.result
  }
}

/**
 * Ships every key of q/0 from `source` into `target` in chunks of about `bytesMax` bytes; the
 * last chunk with the partition's clock `end.clockMs` if given, applied at the target's `end.nowMs`.
 */
async function ship(
  source: Replica,
  target: Replica,
  moveId: number,
  session: string,
  bytesMax: number,
  end: { readonly clockMs?: number; readonly nowMs?: number } = {},
) {
  const chunk = (seq: number, last: boolean, pairs: readonly KeyPair[]): ImportChunk => ({
    moveId,
    session,
    seq,
    last,
    config: source.machine.configOf('q', 0) ?? {},
    pairs,
  })
  let after: Uint8Array | undefined
  let seq = 0
  const results: DataResult[] = []
  for (;;) {
    const { pairs, done } = await source.machine.exportChunk('q', 0, after, bytesMax)
    results.push(
      await target.apply({ type: 'import', queue: 'q', partition: 0, ...chunk(seq++, false, pairs) }),
    )
    after = pairs.length > 0 ? (pairs[pairs.length - 1] as KeyPair)[0] : after
    if (done) break
  }
  const last = { ...chunk(seq, true, []), ...(end.clockMs !== undefined ? { clockMs: end.clockMs } : {}) }
  results.push(await target.apply({ type: 'import', queue: 'q', partition: 0, ...last }, end.nowMs))
  return { results, chunks: seq + 1 }
}

/** A source group holding q/0 with 30 messages, fenced; an empty target; the first ~500 bytes of keys. */
async function fencedWithThirty() {
  const source = await Replica.open(1)
  const target = await Replica.open(2)
  await source.apply({ type: 'open', queue: 'q', partition: 0, config: {} })
  await source.run({
    type: 'enqueue',
    messages: Array.from({ length: 30 }, () => ({ body: new Uint8Array(100), weight: 1 })),
  })
  await source.apply({ type: 'fence', queue: 'q', partition: 0 })
  const { pairs } = await source.machine.exportChunk('q', 0, undefined, 500)
  return { source, target, pairs }
}

/** Group 1 (`a`) holding q/0 with 30 one-byte messages (0…29), unfenced; an empty group 2 (`b`). */
async function holdingThirty() {
  const a = await Replica.open(1)
  const b = await Replica.open(2)
  await a.apply({ type: 'open', queue: 'q', partition: 0, config: {} })
  await a.run({
    type: 'enqueue',
    messages: Array.from({ length: 30 }, (_, i) => ({ body: Uint8Array.of(i), weight: 1 })),
  })
  return { a, b }
}

/** `engine` as a machine reads it, counting the bytes of keys and values each read returns. */
function countingReads(engine: MemoryEngine): SweepEngine & { bytes: number } {
  const counted = {
    bytes: 0,
    get: async (key: Uint8Array) => {
      const value = await engine.get(key)
      counted.bytes += value?.length ?? 0
      return value
    },
    getMany: async (keys: readonly Uint8Array[]) => {
      const values = await engine.getMany(keys)
      for (const v of values) counted.bytes += v?.length ?? 0
      return values
    },
    range: async (range: Parameters<MemoryEngine['range']>[0]) => {
      const rows = await engine.range(range)
      for (const [k, v] of rows) counted.bytes += k.length + v.length
      return rows
    },
    keys: async (range: Parameters<MemoryEngine['keys']>[0]) => {
      const keys = await engine.keys(range)
      for (const k of keys) counted.bytes += k.length
      return keys
    },
    write: (ops: Parameters<MemoryEngine['write']>[0], options: Parameters<MemoryEngine['write']>[1]) =>
      engine.write(ops, options),
  }
  return counted
}

describe('moving a partition between data groups (fence, export, import)', () => {
  it('exports large messages reading about bytesMax a call, not a page of 256 pairs of which it keeps a few', async () => {
    const bytesMax = 1 << 20
    const body = new Uint8Array(200 * 1024).fill(3)
    // The default limit (256 KiB), and a larger one than the messages (4 MiB).
    for (const messageBytesMax of [256 * 1024, 4 << 20]) {
      const engine = new MemoryEngine()
      const reads = countingReads(engine)
      const source = await DataGroupMachine.open(1, reads)
      const apply = async (command: DataCommand) => {
        const applied = await source.apply(encodeDataCommand(command), 1_000)
        await engine.write(applied.ops, { sync: false })
        applied.written()
        return applied.result
      }
      await apply({ type: 'open', queue: 'q', partition: 0, config: { messageBytesMax } })
      for (let i = 0; i < 4; i++)
        await apply({
          type: 'apply',
          queue: 'q',
          partition: 0,
          command: { type: 'enqueue', messages: Array.from({ length: 10 }, () => ({ body, weight: 1 })) },
        })
      await apply({ type: 'fence', queue: 'q', partition: 0 })
      let after: Uint8Array | undefined
      let read = 0
      let mostRead = 0
      let shipped = 0
      const exported: KeyPair[] = []
      for (let calls = 0; calls < 100; calls++) {
        const before = reads.bytes
        const { pairs, done } = await source.exportChunk('q', 0, after, bytesMax)
        read += reads.bytes - before
        mostRead = Math.max(mostRead, reads.bytes - before)
        const bytes = pairs.reduce((n, [k, v]) => n + k.length + v.length, 0)
        // Up to the pair that fills the chunk, and no further.
        expect(bytes).toBeLessThan(bytesMax + body.length + 1024)
        shipped += bytes
        exported.push(...pairs)
        if (pairs.length > 0) after = (pairs[pairs.length - 1] as KeyPair)[0]
        if (done) break
      }
      // Every key once, in order, as one read of the whole partition has them.
      const whole = (await source.exportChunk('q', 0, undefined, Number.POSITIVE_INFINITY)).pairs
      // (Compared as hex keys and equal values: a deep equality of 8 MiB of bytes takes a minute.)
      const hex = (pairs: KeyPair[]) => pairs.map(([k]) => Buffer.from(k).toString('hex'))
      expect(hex(exported)).toEqual(hex(whole))
      expect(exported.filter(([, v], i) => !Buffer.from(v).equals((whole[i] as KeyPair)[1]))).toHaveLength(0)
      expect(shipped).toBeGreaterThan(40 * body.length)
      // Pages of 256 pairs read all 8 MiB at the first call, and most of it again at the next ones.
      expect(mostRead).toBeLessThan(bytesMax + 4 * 1024 * 1024 + 64 * 1024)
      if (messageBytesMax > 1 << 20) expect(mostRead).toBeLessThan(bytesMax + body.length + 64 * 1024)
      expect(read).toBeLessThan(1.5 * shipped)
    }
  })

  it('carries ready, leased (ids and deadlines), dedup and producer state; the source refuses from the fence on', async () => {
    const source = await Replica.open(1)
    const target = await Replica.open(2)
    await source.apply({ type: 'open', queue: 'q', partition: 0, config: { maxDeliveries: 3 } })
    const body = new Uint8Array(200).fill(7)
    const enq = await source.run({
      type: 'enqueue',
      producerId: 'p',
      producerSeq: 1,
      messages: Array.from({ length: 40 }, (_, i) => ({ body, weight: 1 + (i % 3), dedupKey: `k${i}` })),
    })
    expect(enq).toMatchObject({ type: 'enqueue', duplicate: false })
    const leased = await source.run({ type: 'lease', consumerId: 'c', max: 5, visibilityMs: 60_000 }, 2_000)
    if (leased.type !== 'lease') throw new Error('lease')
    expect(leased.leases).toHaveLength(5)

    expect(await source.apply({ type: 'fence', queue: 'q', partition: 0 })).toEqual({ type: 'fenced' })
    expect(await source.apply({ type: 'fence', queue: 'q', partition: 0 })).toEqual({ type: 'fenced' })
    expect(
      await source.apply({ type: 'apply', queue: 'q', partition: 0, command: { type: 'tick' } }),
    ).toMatchObject({
      type: 'refused',
      reason: 'fenced',
    })

    const { results, chunks } = await ship(source, target, 9, 's1', 1_000)
    expect(chunks).toBeGreaterThan(3)
    expect(results.at(-1)).toEqual({ type: 'imported', complete: true })
    expect(target.machine.holds('q', 0)).toBe(true)

    // The outstanding leases are valid on the target with their ids and deadlines.
    const extended = await target.run({ type: 'ack', leaseIds: leased.leases.map((l) => l.leaseId) }, 3_000)
    expect(extended).toMatchObject({ type: 'ack', statuses: ['ok', 'ok', 'ok', 'ok', 'ok'] })
    // A retried producer batch and a repeated dedup key are recognised on the target.
    const retried = await target.run({
      type: 'enqueue',
      producerId: 'p',
      producerSeq: 1,
      messages: [{ body, weight: 1 }],
    })
    expect(retried).toMatchObject({ duplicate: true })
    const rest = await target.run({ type: 'lease', consumerId: 'c', max: 100, visibilityMs: 60_000 }, 4_000)
    if (rest.type !== 'lease') throw new Error('lease')
    const leasedIds = new Set(leased.leases.map((l) => l.messageId))
    expect(rest.leases.map((l) => l.messageId).sort((a, b) => a - b)).toEqual(
      (enq.type === 'enqueue' ? enq.ids : []).filter((id) => !leasedIds.has(id)),
    )
  })

  it('expired leases move too: the target redelivers them after their deadline', async () => {
    const source = await Replica.open(1)
    const target = await Replica.open(2)
    await source.apply({ type: 'open', queue: 'q', partition: 0, config: {} })
    await source.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] })
    const first = await source.run({ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 1_000 }, 1_000)
    await source.apply({ type: 'fence', queue: 'q', partition: 0 })
    await ship(source, target, 1, 's', 64 * 1024)
    const again = await target.run({ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 1_000 }, 2_500)
    expect(again).toMatchObject({ type: 'lease', leases: [{ messageId: 1, deliveryCount: 2 }] })
    expect(first).toMatchObject({ leases: [{ messageId: 1, deliveryCount: 1 }] })
  })

  it('a fenced partition is never opened again, is dropped, and the fence survives a reopen', async () => {
    const engine = new MemoryEngine()
    const source = await Replica.open(1, engine)
    // Fenced before it was ever opened here (no traffic): still closed for good.
    expect(await source.apply({ type: 'fence', queue: 'q', partition: 0 })).toEqual({ type: 'fenced' })
    expect(await source.apply({ type: 'open', queue: 'q', partition: 0, config: {} })).toMatchObject({
      type: 'refused',
      reason: 'fenced',
    })
    expect(await source.apply({ type: 'drop', queue: 'q', partition: 0 })).toEqual({ type: 'dropped' })
    const reopened = await Replica.open(1, engine)
    expect(reopened.machine.fenced('q', 0)).toBe(true)
    expect(await reopened.apply({ type: 'open', queue: 'q', partition: 0, config: {} })).toMatchObject({
      reason: 'fenced',
    })
  })

  it('a partition moved away and back is imported only after its dropped keys are swept', async () => {
    const a = await Replica.open(1, new MemoryEngine(), 2)
    const b = await Replica.open(2)
    await a.apply({ type: 'open', queue: 'q', partition: 0, config: {} })
    await a.run({
      type: 'enqueue',
      messages: Array.from({ length: 30 }, (_, i) => ({ body: Uint8Array.of(i), weight: 1 })),
    })
    await a.apply({ type: 'fence', queue: 'q', partition: 0 })
    await ship(a, b, 1, 'away', 500)
    // The drop leaves ~100 keys to sweep two at a time; the move back starts at once, and its
    // keys are the very keys being swept (the same messages).
    expect(await a.apply({ type: 'drop', queue: 'q', partition: 0 })).toEqual({ type: 'dropped' })
    expect(a.machine.garbageRanges()).toHaveLength(1)
    await b.apply({ type: 'fence', queue: 'q', partition: 0 })
    const { results } = await ship(b, a, 2, 'back', 500)
    expect(results.at(-1)).toEqual({ type: 'imported', complete: true })
    await a.machine.swept()
    expect(a.machine.garbageRanges()).toEqual([])
    expect((await a.machine.stats('q', 0, 2_000))?.messages).toBe(30)
    const reopened = await Replica.open(1, a.engine)
    const leased = await reopened.run({ type: 'lease', consumerId: 'c', max: 100, visibilityMs: 1_000 })
    expect(leased.type === 'lease' ? leased.leases.length : 0).toBe(30)
  })

  it('a late drop or chunk 0 of an earlier move does not touch the partition moved back (moves named)', async () => {
    const { a, b } = await holdingThirty()
    // Move 1: a → b, fenced and dropped by name.
    expect(await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 1 })).toEqual({ type: 'fenced' })
    await ship(a, b, 1, 'away', 500)
    // Another move's drop of a partition move 1 fenced: refused.
    expect(await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 9 })).toMatchObject({
      type: 'refused',
      reason: 'not-held',
    })
    expect(await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 1 })).toEqual({ type: 'dropped' })
    // The fence and its move survive a reopen.
    const reopened = await Replica.open(1, a.engine)
    expect(await reopened.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 9 })).toMatchObject({
      reason: 'not-held',
    })
    // Move 2: back b → a.
    await b.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 2 })
    const { results } = await ship(b, reopened, 2, 'back', 500)
    expect(results.at(-1)).toEqual({ type: 'imported', complete: true })
    // Move 1's drop again (a deposed meta leader's late call): a serves the partition, unfenced.
    expect(await reopened.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 1 })).toMatchObject({
      type: 'refused',
      reason: 'not-held',
    })
    // A late chunk 0 of a move into a, which serves the partition: refused when it asks for fresh.
    const chunk0 = {
      type: 'import',
      queue: 'q',
      partition: 0,
      moveId: 3,
      session: 'late',
      seq: 0,
      last: false,
      config: {},
      pairs: [],
    } as const
    expect(await reopened.apply({ ...chunk0, fresh: true })).toMatchObject({
      type: 'refused',
      reason: 'import-order',
    })
    expect((await reopened.machine.stats('q', 0, 2_000))?.messages).toBe(30)
  })

  it('an ordered late drop or chunk of an earlier move is refused while a later move imports the partition back (FORMAT_LEVEL_MOVE_ORDER)', async () => {
    /** a → b (move 1, dropped at a), then b → a (move 2) up to its chunk 1 of 2; the late request goes to a. */
    const backHalfway = async () => {
      const { a, b } = await holdingThirty()
      await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 1 })
      await ship(a, b, 1, 'away', 500)
      expect(await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 1, ordered: true })).toEqual({
        type: 'dropped',
      })
      await b.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 2 })
      const { pairs } = await b.machine.exportChunk('q', 0, undefined, 1_000_000)
      const back = {
        type: 'import',
        queue: 'q',
        partition: 0,
        moveId: 2,
        session: 'back',
        config: {},
      } as const
      const chunk = (seq: number, last: boolean, chunkPairs: readonly KeyPair[]) =>
        a.apply({ ...back, seq, last, pairs: chunkPairs, fresh: true, ordered: true })
      expect(await chunk(0, false, pairs)).toEqual({ type: 'imported', complete: false })
      const late0 = {
        type: 'import',
        queue: 'q',
        partition: 0,
        moveId: 1,
        session: 'late',
        seq: 0,
        last: false,
        config: {},
        pairs: [],
        fresh: true,
      } as const
      return { a, chunk, late0 }
    }

    const ordered = await backHalfway()
    const { a, chunk, late0 } = ordered
    expect(a.machine.movesOf('q', 0)).toEqual({ fencedBy: 1, importing: 2 })
    expect(await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 1, ordered: true })).toMatchObject(
      {
        type: 'refused',
        reason: 'not-held',
        message: expect.stringMatching(/move 1 is stale here: drop in this group.*being imported by move 2/),
      },
    )
    expect(await a.apply({ ...late0, ordered: true })).toMatchObject({
      type: 'refused',
      reason: 'import-order',
      message: expect.stringMatching(/move 1 is stale here: import into/),
    })
    // Move 2 goes on where it was and completes.
    expect(await chunk(1, false, [])).toEqual({ type: 'imported', complete: false })
    expect(await chunk(2, true, [])).toEqual({ type: 'imported', complete: true })
    expect((await a.machine.stats('q', 0, 2_000))?.messages).toBe(30)
    // Move 3 takes it from a to another group: a late chunk 0 of move 1 finds a fenced by a later
    // move (its `fresh` check passes: a fenced partition is not served) and is refused too;
    // without `ordered` it starts a session over the fenced partition, whose last chunk would
    // serve move 1's keys here again.
    await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 3 })
    expect(await a.apply({ ...late0, ordered: true })).toMatchObject({
      reason: 'import-order',
      message: expect.stringMatching(/fenced by move 3, imported by move 2/),
    })
    expect(a.machine.importIds()).toEqual([])
    expect(await a.apply(late0)).toEqual({ type: 'imported', complete: false })
    expect(a.machine.importIds()).toEqual(['q/0'])
    // Below the level (no `ordered`), the same late requests end move 2's import: it would start over.
    const unordered = await backHalfway()
    expect(await unordered.a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 1 })).toEqual({
      type: 'dropped',
    })
    expect(unordered.a.machine.importIds()).toEqual([])
    expect(await unordered.chunk(1, false, [])).toMatchObject({ reason: 'import-order' })
    const restarted = await backHalfway()
    expect(await restarted.a.apply(restarted.late0)).toEqual({ type: 'imported', complete: false })
    expect(restarted.a.machine.movesOf('q', 0)).toEqual({ fencedBy: 1, importing: 1 })
  })

  it("reports as served only the partitions it holds unfenced: a moved one is the target group's", async () => {
    const { source, target } = await fencedWithThirty()
    const other = { type: 'open', queue: 'q', partition: 1, config: {} } as const
    await source.apply(other)
    expect(source.machine.partitionIds()).toEqual(['q/0', 'q/1'])
    expect(source.machine.servedPartitionIds()).toEqual(['q/1'])
    await ship(source, target, 1, 's', 500)
    expect(target.machine.servedPartitionIds()).toEqual(['q/0'])
  })

  it('drops an unfinished import (its queue deleted mid-move): keys and session go, on every replica alike', async () => {
    const { target, pairs } = await fencedWithThirty()
    const base = { type: 'import', queue: 'q', partition: 0, moveId: 6, session: 's', config: {} } as const
    expect(target.machine.importIds()).toEqual([])
    expect(await target.apply({ ...base, seq: 0, last: false, pairs })).toMatchObject({ complete: false })
    expect(target.machine.importIds()).toEqual(['q/0'])
    const written = await target.engine.range({})
    expect(written.length).toBeGreaterThan(pairs.length)
    expect(await target.apply({ type: 'drop', queue: 'q', partition: 0 })).toEqual({ type: 'dropped' })
    expect(target.machine.importIds()).toEqual([])
    await target.machine.swept()
    // Nothing of the copy is left (the session, the pairs, the tombstone), and a reopen agrees.
    expect(await target.engine.range({})).toEqual([])
    const reopened = await Replica.open(2, target.engine)
    expect(reopened.machine.importIds()).toEqual([])
    expect(reopened.machine.partitionIds()).toEqual([])
    // The abandoned session's later chunks are refused; a drop of nothing is refused as before.
    expect(await target.apply({ ...base, seq: 1, last: false, pairs: [] })).toMatchObject({
      reason: 'import-order',
    })
    expect(await target.apply({ type: 'drop', queue: 'q', partition: 0 })).toMatchObject({
      reason: 'not-held',
    })
  })

  it('imports are restartable: a new session clears the old one, stale chunks are refused, a done move is not redone', async () => {
    const { source, target, pairs } = await fencedWithThirty()
    const base = { type: 'import', queue: 'q', partition: 0, moveId: 4, config: {} } as const
    expect(await target.apply({ ...base, session: 'a', seq: 0, last: false, pairs })).toEqual({
      type: 'imported',
      complete: false,
    })
    // Another driver starts over: session a's chunks are refused from then on.
    expect(await target.apply({ ...base, session: 'b', seq: 0, last: false, pairs })).toMatchObject({
      complete: false,
    })
    expect(await target.apply({ ...base, session: 'a', seq: 1, last: false, pairs: [] })).toMatchObject({
      reason: 'import-order',
    })
    expect(await target.apply({ ...base, session: 'b', seq: 2, last: true, pairs: [] })).toMatchObject({
      reason: 'import-order',
    })
    // The chunk just taken, sent again (its answer was lost): taken, not a reason to start over;
    // one further back is out of order.
    expect(await target.apply({ ...base, session: 'b', seq: 1, last: false, pairs })).toMatchObject({
      complete: false,
    })
    expect(await target.apply({ ...base, session: 'b', seq: 1, last: false, pairs })).toEqual({
      type: 'imported',
      complete: false,
    })
    expect(await target.apply({ ...base, session: 'b', seq: 2, last: false, pairs: [] })).toMatchObject({
      complete: false,
    })
    expect(await target.apply({ ...base, session: 'b', seq: 1, last: false, pairs })).toMatchObject({
      reason: 'import-order',
    })
    // While importing, the partition takes no commands and is not opened empty.
    expect(await target.apply({ type: 'open', queue: 'q', partition: 0, config: {} })).toMatchObject({
      reason: 'importing',
    })
    const { chunks } = await ship(source, target, 4, 'c', 1_000)
    expect(chunks).toBeGreaterThan(1)
    const leased = await target.run({ type: 'lease', consumerId: 'c', max: 100, visibilityMs: 1_000 })
    expect(leased).toMatchObject({ type: 'lease' })
    expect(leased.type === 'lease' ? leased.leases.length : 0).toBe(30)
    // The same move again (a driver that did not hear it finished): a no-op, state kept.
    expect(await target.apply({ ...base, session: 'd', seq: 0, last: false, pairs: [] })).toEqual({
      type: 'imported',
      complete: true,
    })
    const stats = await target.machine.stats('q', 0, 2_000)
    expect(stats?.messages).toBe(30)
  })

  it("a source leader of an older term cannot restart a newer one's import; a newer term takes over", async () => {
    const { target, pairs } = await fencedWithThirty()
    const base = { type: 'import', queue: 'q', partition: 0, moveId: 5, config: {} } as const
    // The leader of term 7 starts; a deposed leader of term 6 (still shipping) cannot restart it.
    expect(
      await target.apply({ ...base, session: 'n1:5:1', sourceTerm: 7, seq: 0, last: false, pairs }),
    ).toEqual({ type: 'imported', complete: false })
    expect(
      await target.apply({ ...base, session: 'n3:5:1', sourceTerm: 6, seq: 0, last: false, pairs }),
    ).toMatchObject({ type: 'refused', reason: 'import-order', message: expect.stringMatching(/superseded/) })
    expect(
      await target.apply({ ...base, session: 'n1:5:1', sourceTerm: 7, seq: 1, last: false, pairs: [] }),
    ).toEqual({ type: 'imported', complete: false })
    // A leader of a newer term (or the same) starts over.
    expect(
      await target.apply({ ...base, session: 'n2:5:1', sourceTerm: 8, seq: 0, last: false, pairs }),
    ).toEqual({ type: 'imported', complete: false })
    expect(
      await target.apply({ ...base, session: 'n1:5:1', sourceTerm: 7, seq: 2, last: false, pairs: [] }),
    ).toMatchObject({ reason: 'import-order' })
    expect(
      await target.apply({ ...base, session: 'n2:5:1', sourceTerm: 8, seq: 1, last: true, pairs: [] }),
    ).toEqual({ type: 'imported', complete: true })
    const stats = await target.machine.stats('q', 0, 2_000)
    expect(stats?.messages).toBe(30)
    // The term survives the codec; a bad one is refused as malformed.
    const chunk = { ...base, session: 's', sourceTerm: 90, seq: 0, last: false, pairs: [] }
    expect(decodeDataCommand(encodeDataCommand(chunk))).toMatchObject({ sourceTerm: 90 })
    const bad = encodeDataCommand(chunk)
    const text = new TextDecoder().decode(bad)
    expect(() =>
      decodeDataCommand(new TextEncoder().encode(text.replace('"sourceTerm":90', '"sourceTerm":-9'))),
    ).toThrow(/malformed/)
  })

  it('refuses malformed import chunks without changing anything', async () => {
    const target = await Replica.open(2)
    const base = { type: 'import', queue: 'q', partition: 0, moveId: 1, session: 's', config: {} } as const
    expect(await target.apply({ ...base, seq: 0, last: true, pairs: [] })).toMatchObject({
      reason: 'malformed',
    })
    expect(
      await target.apply({ ...base, seq: 0, last: false, pairs: [[new Uint8Array(0), Uint8Array.of(1)]] }),
    ).toMatchObject({ reason: 'malformed' })
    expect(await target.apply({ ...base, seq: 1, last: false, pairs: [] })).toMatchObject({
      reason: 'import-order',
    })
    expect(await target.apply({ type: 'open', queue: 'q', partition: 0, config: {} })).toEqual({
      type: 'opened',
    })
  })

  it('deletes keys only in a middle chunk of a session', async () => {
    const other = await Replica.open(4)
    const base = { type: 'import', queue: 'q', partition: 0, moveId: 1, session: 's', config: {} } as const
    // Deletions only correct earlier chunks: never in chunk 0 or the last, never an empty key.
    const del = [Uint8Array.of(1)]
    expect(await other.apply({ ...base, seq: 0, last: false, pairs: [], dels: del })).toMatchObject({
      reason: 'malformed',
    })
    expect(await other.apply({ ...base, seq: 0, last: false, pairs: [] })).toMatchObject({ type: 'imported' })
    expect(
      await other.apply({ ...base, seq: 1, last: false, pairs: [], dels: [new Uint8Array(0)] }),
    ).toMatchObject({ reason: 'malformed' })
    expect(await other.apply({ ...base, seq: 1, last: true, pairs: [], dels: del })).toMatchObject({
      reason: 'malformed',
    })
    // A chunk with deletions survives the codec.
    const chunk = {
      ...base,
      seq: 1,
      last: false,
      pairs: [[Uint8Array.of(2), Uint8Array.of(3)]] as KeyPair[],
      dels: del,
    }
    expect(decodeDataCommand(encodeDataCommand(chunk))).toEqual(chunk)
  })

  it('notes the keys a partition writes while watched, up to a bound, and gives up on a drop', async () => {
    const g = await Replica.open(1)
    await g.apply({ type: 'open', queue: 'q', partition: 0, config: {} })
    await g.apply({ type: 'open', queue: 'q', partition: 1, config: {} })
    const watch = g.machine.watchWrites('q', 0, 1_000)
    const small = g.machine.watchWrites('q', 0, 2)
    await g.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] })
    await g.apply({
      type: 'apply',
      queue: 'q',
      partition: 1,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(2), weight: 1 }] },
    })
    const leased = await g.run({ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 1_000 })
    const leaseId = leased.type === 'lease' ? (leased.leases[0]?.leaseId as string) : ''
    await g.run({ type: 'ack', leaseIds: [leaseId] })
    const keys = watch.keys() ?? []
    expect(keys.length).toBeGreaterThan(0)
    // Every noted key is the partition's; read back now, the acked message's are gone.
    const values = await g.machine.readKeys('q', 0, keys)
    const { pairs } = await g.machine.exportChunk('q', 0, undefined, 1 << 20)
    const live = new Set(pairs.map(([k]) => Buffer.from(k).toString('hex')))
    for (const [i, key] of keys.entries()) {
      expect(values[i] !== undefined).toBe(live.has(Buffer.from(key).toString('hex')))
    }
    expect(small.keys()).toBeUndefined()
    small.close()
    await g.apply({ type: 'drop', queue: 'q', partition: 0 })
    expect(watch.keys()).toBeUndefined()
    watch.close()
  })
})

describe('an aborted move (FORMAT_LEVEL_MOVE_ABORT)', () => {
  it('unfence lifts its fence: the partition serves again, and survives a reopen', async () => {
    const { a, b } = await holdingThirty()
    expect(await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 5 })).toEqual({ type: 'fenced' })
    const lease = { type: 'lease', max: 100, visibilityMs: 30_000, consumerId: 'c' } as const
    expect(await a.apply({ type: 'apply', queue: 'q', partition: 0, command: lease })).toMatchObject({
      reason: 'fenced',
    })
    // Another move's unfence leaves it fenced (and the partition is not served).
    expect(await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 4 })).toEqual({
      type: 'unfenced',
    })
    expect(a.machine.fenced('q', 0)).toBe(true)
    expect(await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 5 })).toEqual({
      type: 'unfenced',
    })
    expect(a.machine.fenced('q', 0)).toBe(false)
    expect(a.machine.servedPartitionIds()).toEqual(['q/0'])
    const leased = await a.run(lease)
    expect(leased.type === 'lease' && leased.leases.length).toBe(30)
    // Replayed, the unfence is a no-op; reopened, the partition serves, and move 5 stays aborted.
    expect(await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 5 })).toEqual({
      type: 'unfenced',
    })
    const reopened = await Replica.open(1, a.engine)
    expect(reopened.machine.fenced('q', 0)).toBe(false)
    expect(reopened.machine.movesOf('q', 0)).toEqual({ aborted: 5 })
    // Nothing was shipped to b.
    expect(b.machine.partitionIds()).toEqual([])
  })

  it("refuses a late fence, copy or drop of the aborted move (a copy still under way), not a later move's", async () => {
    const { a } = await holdingThirty()
    // Aborted before its copy fenced: the fence that comes late is refused.
    await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 5 })
    for (const moveId of [5, 3])
      expect(await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId })).toMatchObject({
        type: 'refused',
        reason: 'not-held',
        message: expect.stringMatching(/was aborted/),
      })
    expect(a.machine.fenced('q', 0)).toBe(false)
    expect(staleMove(5, a.machine.movesOf('q', 0), 'copy from')).toMatch(/move 5 was aborted/)
    expect(staleMove(5, a.machine.movesOf('q', 0), 'drop in')).toMatch(/move 5 was aborted/)
    expect(staleMove(5, a.machine.movesOf('q', 0), 'import into')).toBeUndefined()
    expect(await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 5, ordered: true })).toMatchObject(
      {
        type: 'refused',
      },
    )
    expect(staleMove(6, a.machine.movesOf('q', 0), 'copy from')).toBeUndefined()
    expect(await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 6 })).toEqual({ type: 'fenced' })
    // A later move's fence is not lifted by the earlier move's unfence, replayed late.
    expect(await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 5 })).toEqual({
      type: 'unfenced',
    })
    expect(a.machine.fenced('q', 0)).toBe(true)
    // Dropped by the later move, the aborted mark goes with the partition.
    expect(await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 6, ordered: true })).toEqual({
      type: 'dropped',
    })
    expect(a.machine.movesOf('q', 0)).toEqual({ fencedBy: 6 })
    const reopened = await Replica.open(1, a.engine)
    expect(reopened.machine.movesOf('q', 0)).toEqual({ fencedBy: 6 })
  })

  it("an ordered late fence of an aborted move refuses a partition a later move brought back, once the abort's mark went with a drop", async () => {
    const { a, b } = await holdingThirty()
    // Move 5 from a is aborted while its copy still runs; move 6 then takes q/0 from a to b.
    await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 5 })
    await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 6 })
    await ship(a, b, 6, 'six', 500)
    await a.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 6, ordered: true })
    // Move 7 brings it back to a, which serves it again.
    await b.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 7 })
    await ship(b, a, 7, 'seven', 500)
    expect(a.machine.servedPartitionIds()).toEqual(['q/0'])
    // Move 5's copy ends with its fence, landing now: the aborted mark went with move 6's drop.
    // Taken, it would fence the partition for good (no move is left to drop or unfence it).
    expect(
      await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 5, ordered: true }),
    ).toMatchObject({ type: 'refused', reason: 'not-held', message: expect.stringMatching(/stale/) })
    expect(a.machine.servedPartitionIds()).toEqual(['q/0'])
    const reopened = await Replica.open(1, a.engine)
    expect(reopened.machine.servedPartitionIds()).toEqual(['q/0'])
  })

  it('a final retire keeps a fence a move set: an unfence of that move landing after it lifts nothing', async () => {
    for (const final of [false, true]) {
      const { a } = await holdingThirty()
      await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 5 })
      // The queue is deleted while the move is aborted: the retire lands before the unfence.
      expect(
        await a.apply({
          type: 'retire',
          queue: 'q',
          partition: 0,
          ...(final ? { final: true as const } : {}),
        }),
      ).toEqual({ type: 'fenced' })
      await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 5 })
      expect(a.machine.fenced('q', 0)).toBe(final)
      const reopened = await Replica.open(1, a.engine)
      expect(reopened.machine.fenced('q', 0)).toBe(final)
      // The drop that the orphan sweeper then proposes still drops it.
      expect(await reopened.apply({ type: 'drop', queue: 'q', partition: 0 })).toEqual({ type: 'dropped' })
    }
  })

  it("a later move's chunk 0 that `replaces` clears the copy an aborted move left in its target; only then", async () => {
    const { a, b } = await holdingThirty()
    // Move 1 a → b ran to its last chunk as it was aborted: b holds a copy, a serves again.
    await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 1 })
    await ship(a, b, 1, 'aborted', 500)
    await a.apply({ type: 'unfence', queue: 'q', partition: 0, moveId: 1 })
    expect(b.machine.holds('q', 0)).toBe(true)
    await a.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(99), weight: 1 }] })
    // Move 2 a → b: its chunk 0 finds the copy served (unfenced) at b.
    const chunk0 = {
      type: 'import',
      queue: 'q',
      partition: 0,
      moveId: 2,
      session: 'again',
      seq: 0,
      last: false,
      config: {},
      pairs: [],
      fresh: true,
      ordered: true,
    } as const
    expect(await b.apply(chunk0)).toMatchObject({ type: 'refused', reason: 'import-order' })
    expect(await b.apply({ ...chunk0, replaces: true })).toEqual({ type: 'imported', complete: false })
    expect(b.machine.holds('q', 0)).toBe(false)
    // The rest of move 2 brings the 31 messages.
    await a.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 2 })
    const { results } = await ship(a, b, 2, 'again2', 500)
    expect(results.at(-1)).toEqual({ type: 'imported', complete: true })
    expect((await b.machine.stats('q', 0, 2_000))?.messages).toBe(31)
    // A partition a group opened itself (imported by no move) is never cleared so.
    const c = await Replica.open(3)
    await c.apply({ type: 'open', queue: 'q', partition: 0, config: {} })
    expect(await c.apply({ ...chunk0, moveId: 7, replaces: true })).toMatchObject({
      type: 'refused',
      reason: 'import-order',
    })
    // Nor a copy imported by the same or a later move than the chunk's.
    expect(await b.apply({ ...chunk0, moveId: 2, session: 'x', replaces: true })).toEqual({
      type: 'imported',
      complete: true,
    })
    expect(b.machine.holds('q', 0)).toBe(true)
  })
})

describe('a moved partition keeps its clock (FORMAT_LEVEL_PARTITION_CLOCK)', () => {
  /** Source group at 1,000 ms: q/0 with one message leased for 10 s (deadline 11,000), fenced at 2,000. */
  async function leasedThenFenced() {
    const source = await Replica.open(1)
    await source.apply({ type: 'open', queue: 'q', partition: 0, config: {} }, 1_000)
    await source.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] }, 1_000)
    const leased = await source.run({ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 10_000 }, 1_000)
    expect(leased.type === 'lease' && leased.leases[0]?.deadlineMs).toBe(11_000)
    await source.apply({ type: 'fence', queue: 'q', partition: 0 }, 2_000)
    return source
  }
  const leaseOnce = async (r: Replica, nowMs: number) => {
    await r.run({ type: 'tick' }, nowMs)
    const got = await r.run({ type: 'lease', consumerId: 'd', max: 1, visibilityMs: 10_000 }, nowMs)
    return got.type === 'lease' ? got.leases.length : -1
  }

  it('a lease granted before a move into a group a minute ahead runs its real length there', async () => {
    const source = await leasedThenFenced()
    const target = await Replica.open(2)
    // The target group's clock is a minute ahead: the partition's clock (2,000 at the fence) goes
    // on from the last chunk's entry, stamped 62,000 there.
    await ship(source, target, 1, 's', 1 << 20, { clockMs: 2_000, nowMs: 62_000 })
    expect(target.machine.partitionTimeMs('q', 0, 62_000)).toBe(2_000)
    // The deadline (11,000 in the partition's time) falls due at group time 71,000.
    expect(target.machine.nextTimedMs('q', 0)).toBe(71_000)
    expect(target.machine.timedPartitionIds(70_999)).toEqual([])
    expect(target.machine.timedPartitionIds(71_000)).toEqual(['q/0'])
    expect(await leaseOnce(target, 70_000)).toBe(0) // 8 s into the move's partition time: still held
    expect(await leaseOnce(target, 71_000)).toBe(1) // its deadline: redelivered
    // Stats and new messages are in the partition's time.
    await target.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(2), weight: 1 }] }, 72_000)
    expect((await target.machine.stats('q', 0, 75_000))?.weights[0]?.oldestAgeMs).toBe(3_000)
    const got = await target.run({ type: 'lease', consumerId: 'e', max: 1, visibilityMs: 1_000 }, 72_000)
    expect(got.type === 'lease' && got.leases[0]?.enqueuedAtMs).toBe(12_000)
  })

  it('without the source clock (below the level) the partition takes the group clock: the lease ends a minute early', async () => {
    const source = await leasedThenFenced()
    const target = await Replica.open(2)
    await ship(source, target, 1, 's', 1 << 20, { nowMs: 62_000 })
    expect(target.machine.partitionTimeMs('q', 0, 62_000)).toBe(62_000)
    expect(await leaseOnce(target, 62_000)).toBe(1)
  })

  it('a move into a group behind keeps it too (no wait for the group to catch up)', async () => {
    const source = await leasedThenFenced()
    const target = await Replica.open(2)
    await ship(source, target, 1, 's', 1 << 20, { clockMs: 2_000, nowMs: 500 })
    expect(target.machine.nextTimedMs('q', 0)).toBe(9_500)
    expect(await leaseOnce(target, 9_499)).toBe(0)
    expect(await leaseOnce(target, 9_500)).toBe(1)
  })

  it('the offset is replicated state: kept over a reopen, gone with a drop, replaced by the next import', async () => {
    const source = await leasedThenFenced()
    const engine = new MemoryEngine()
    const target = await Replica.open(2, engine)
    await ship(source, target, 1, 's', 1 << 20, { clockMs: 2_000, nowMs: 62_000 })
    const reopened = await Replica.open(2, engine)
    expect(reopened.machine.partitionTimeMs('q', 0, 62_000)).toBe(2_000)
    expect(reopened.machine.nextTimedMs('q', 0)).toBe(71_000)
    // Moved on (fenced, dropped), then moved back without a clock: the group's own.
    await reopened.apply({ type: 'fence', queue: 'q', partition: 0, moveId: 2 }, 63_000)
    await reopened.apply({ type: 'drop', queue: 'q', partition: 0, moveId: 2 }, 63_000)
    expect(reopened.machine.partitionTimeMs('q', 0, 63_000)).toBe(63_000)
    const again = await Replica.open(2, engine)
    expect(again.machine.partitionTimeMs('q', 0, 63_000)).toBe(63_000)
    // An import with a clock over one that set another replaces it.
    const source2 = await leasedThenFenced()
    await ship(source2, again, 3, 's3', 1 << 20, { clockMs: 2_000, nowMs: 64_000 })
    await ship(source2, again, 4, 's4', 1 << 20, { clockMs: 3_000, nowMs: 64_000 })
    expect(again.machine.partitionTimeMs('q', 0, 64_000)).toBe(3_000)
    await ship(source2, again, 5, 's5', 1 << 20, { nowMs: 64_000 })
    expect(again.machine.partitionTimeMs('q', 0, 64_000)).toBe(64_000)
    expect((await Replica.open(2, engine)).machine.partitionTimeMs('q', 0, 64_000)).toBe(64_000)
  })
})
