import { Metadata } from '@grpc/grpc-js'
import {
  type DataCommand,
  decodeDataCommand,
  encodeDataCommand,
  type KeyPair,
  storedQueueName,
} from '@mq/data-service'
import {
  FORMAT_LEVEL_FENCE_ORDER,
  FORMAT_LEVEL_MESSAGE_TTL,
  FORMAT_LEVEL_MOVE_ABORT,
  FORMAT_LEVEL_MOVE_IDS,
  FORMAT_LEVEL_MOVE_ORDER,
  FORMAT_LEVEL_PARTITION_CLOCK,
  FORMAT_LEVEL_RETRY_BACKOFF,
  type ImportPartitionRequest,
  type ImportPartitionResponse,
  type MovePartitionRequest,
} from '@mq/protocol'
import { describe, expect, it, vi } from 'vitest'
import type { Logger } from '../log'
import { capturedLog } from '../log-capture'
import { memoryGroup } from './memory-group'
import { IMPORT_CHUNK_BYTES, PartitionMover } from './partition-mover'
import type { PeerCalls } from './peer-calls'

const QUEUE = storedQueueName('jobs', 1)
type ImportCommand = Extract<DataCommand, { type: 'import' }>

/** Every key of the partition in `g`, relative to its prefix (a whole export). */
async function keysOf(g: Awaited<ReturnType<typeof memoryGroup>>): Promise<KeyPair[]> {
  const out: KeyPair[] = []
  let after: Uint8Array | undefined
  for (;;) {
    const { pairs, done } = await g.port.machine.exportChunk(QUEUE, 0, after, 1 << 20)
    out.push(...pairs)
    if (pairs.length > 0) after = (pairs[pairs.length - 1] as KeyPair)[0]
    if (done) return out
  }
}

/**
 * A source group (1) holding a partition with ready and leased messages, a target group (2),
 * and a mover on a node hosting both whose import calls go straight to its own `import`.
 * `duringCopy` runs at the first import call (before the fence: the partition still serves);
 * `everyImport` at every import call, with the chunk (its `fenced` says whether the source was).
 */
async function setup(
  bounds: { dirtyKeysMax?: number; settledKeys?: number; formatLevel?: number; log?: Logger } = {},
  duringCopy?: (s: Setup) => Promise<void>,
  everyImport?: (s: Setup, chunk: ImportCommand, fenced: boolean) => Promise<void>,
) {
  const source = await memoryGroup(1)
  const target = await memoryGroup(2)
  const run = async (command: Extract<DataCommand, { type: 'apply' }>['command']) => {
    const r = await source.port.propose({ type: 'apply', queue: QUEUE, partition: 0, command })
    if (r.type !== 'applied' || r.result.type === 'rejected') throw new Error(`refused: ${JSON.stringify(r)}`)
    return r.result
  }
  await source.port.propose({ type: 'open', queue: QUEUE, partition: 0, config: {} })
  for (let b = 0; b < 3; b++) {
    await run({
      type: 'enqueue',
      messages: Array.from({ length: 100 }, (_, i) => ({
        body: new Uint8Array(100).fill(i),
        weight: 1 + (i % 3),
      })),
    })
  }
  const leased = await run({ type: 'lease', consumerId: 'c', max: 50, visibilityMs: 60_000 })
  const chunks: DataCommand[] = []
  /** Whether the source was fenced when each import call came. */
  const fencedAt: boolean[] = []
  let first = true
  /** Each import call's `stillWanted`. */
  const wanted: ((() => boolean) | undefined)[] = []
  const calls = {
    callLeader: <T>(
      _replicas: unknown,
      fn: (...a: unknown[]) => void,
      _timeoutMs: number,
      options: { stillWanted?: () => boolean } = {},
    ) =>
      new Promise<T>((resolve, reject) => {
        wanted.push(options.stillWanted)
        fn(client, new Metadata(), { deadline: Date.now() + 5_000 }, (e: Error | null, r: T) =>
          e ? reject(e) : resolve(r),
        )
      }),
  } as unknown as PeerCalls
  const mover = new PartitionMover(
    {
      port: (id) => (id === 1 ? source.port : id === 2 ? target.port : undefined),
      formatLevel: () => bounds.formatLevel ?? FORMAT_LEVEL_MOVE_IDS - 1,
    },
    calls,
    'n1',
    bounds,
    bounds.log,
  )
  const client = importClient((req, cb) => {
    chunks.push(decodeDataCommand(req.command))
    const chunk = chunks[chunks.length - 1] as ImportCommand
    const fenced = source.port.machine.fenced(QUEUE, 0)
    fencedAt.push(fenced)
    const before = (async () => {
      if (first && duringCopy) await duringCopy(setupOf())
      if (everyImport) await everyImport(setupOf(), chunk, fenced)
    })()
    first = false
    before.then(() => mover.import(req)).then((r) => cb(null, r), cb)
  })
  const request = COPY_1_TO_2
  const result = { source, target, run, leased, chunks, fencedAt, mover, request, wanted }
  const setupOf = () => result
  return result
}

type Setup = Awaited<ReturnType<typeof setup>>

/** Acks 20 and nacks 5 of the leased messages and enqueues one more (the partition serves). */
async function serve(t: Setup): Promise<void> {
  const leases = t.leased.type === 'lease' ? t.leased.leases : []
  await t.run({ type: 'ack', leaseIds: leases.slice(0, 20).map((l) => l.leaseId) })
  await t.run({ type: 'nack', leaseIds: leases.slice(20, 25).map((l) => l.leaseId) })
  await t.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(9), weight: 2 }] })
}

describe('PartitionMover copy', () => {
  it('copies while the partition serves, then sends the keys written meanwhile, still serving', async () => {
    let servedDuringCopy = false
    const s = await setup({}, async (t) => {
      expect(t.source.port.machine.fenced(QUEUE, 0)).toBe(false)
      await serve(t)
      servedDuringCopy = true
    })
    const keysBefore = (await keysOf(s.source)).length
    const response = await s.mover.move(s.request)
    expect(servedDuringCopy).toBe(true)
    // The target holds exactly the frozen source's keys, and serves the partition.
    expect(await keysOf(s.target)).toEqual(await keysOf(s.source))
    const stats = await s.target.port.machine.stats(QUEUE, 0, 1_000)
    expect(stats?.messages).toBe(300 - 20 + 1)
    expect(s.source.port.machine.fenced(QUEUE, 0)).toBe(true)
    // Then, still serving, a round with the changed and new keys and the deletions (not the
    // whole partition); after the fence nothing was written, so only the last chunk.
    const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
    expect(response.chunks).toBe(imports.length)
    expect(s.fencedAt).toEqual([false, false, true])
    const round = imports[1] as ImportCommand
    expect(imports[0]?.pairs.length).toBe(keysBefore)
    expect(round.pairs.length).toBeGreaterThan(0)
    expect(round.pairs.length).toBeLessThan(keysBefore / 4)
    expect(round.dels?.length ?? 0).toBeGreaterThan(0)
    expect(imports[2]?.last).toBe(true)
    expect(new Set(imports.map((c) => c.session)).size).toBe(1)
    expect(imports.every((c) => c.sourceTerm === 1)).toBe(true)
  })

  it("logs the copy as a JSON line of the node's log, not as plain text on stdout", async () => {
    const { log, lines } = capturedLog()
    const plain = vi.spyOn(console, 'log').mockImplementation(() => {})
    try {
      const s = await setup({ log })
      await s.mover.move(s.request)
      expect(plain).not.toHaveBeenCalled()
    } finally {
      plain.mockRestore()
    }
    const copied = lines.find((l) => /copied .*jobs.* to group 2/.test(l.msg))
    expect(copied).toMatchObject({ level: 'info', node: 'n1' })
  })

  it('names the move in its fence and drop, and asks for fresh chunks, once every replica reads them', async () => {
    for (const level of [FORMAT_LEVEL_MOVE_IDS - 1, FORMAT_LEVEL_MOVE_IDS]) {
      const s = await setup({ formatLevel: level })
      await s.mover.move(s.request)
      await s.mover.move({ ...s.request, phase: 'drop' })
      const named = level >= FORMAT_LEVEL_MOVE_IDS
      const fence = s.source.proposed.find((c) => c.type === 'fence')
      const drop = s.source.proposed.find((c) => c.type === 'drop')
      expect(fence).toEqual({ type: 'fence', queue: QUEUE, partition: 0, ...(named ? { moveId: 7 } : {}) })
      expect(drop).toEqual({ type: 'drop', queue: QUEUE, partition: 0, ...(named ? { moveId: 7 } : {}) })
      const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
      expect(imports.every((c) => (c.fresh === true) === named)).toBe(true)
    }
  })

  it('asks the target and source replicas to refuse a stale chunk or drop once every replica does (ordered)', async () => {
    for (const level of [FORMAT_LEVEL_MOVE_ORDER - 1, FORMAT_LEVEL_MOVE_ORDER]) {
      const s = await setup({ formatLevel: level })
      await s.mover.move(s.request)
      await s.mover.move({ ...s.request, phase: 'drop' })
      const ordered = level >= FORMAT_LEVEL_MOVE_ORDER
      const drop = s.source.proposed.find((c) => c.type === 'drop')
      expect(drop).toEqual({
        type: 'drop',
        queue: QUEUE,
        partition: 0,
        moveId: 7,
        ...(ordered ? { ordered: true } : {}),
      })
      const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
      expect(imports.length).toBeGreaterThan(1)
      expect(imports.every((c) => (c.ordered === true) === ordered)).toBe(true)
    }
  })

  it('asks the source replicas to refuse a late fence of a move once a later one was there (ordered), once every replica does', async () => {
    for (const level of [FORMAT_LEVEL_FENCE_ORDER - 1, FORMAT_LEVEL_FENCE_ORDER]) {
      const s = await setup({ formatLevel: level })
      await s.mover.move(s.request)
      const fence = s.source.proposed.find((c) => c.type === 'fence')
      expect(fence).toEqual({
        type: 'fence',
        queue: QUEUE,
        partition: 0,
        moveId: 7,
        ...(level >= FORMAT_LEVEL_FENCE_ORDER ? { ordered: true } : {}),
      })
    }
  })

  it("hands the partition's clock on in its last chunk once every replica keeps it: leases keep their length", async () => {
    for (const level of [FORMAT_LEVEL_PARTITION_CLOCK - 1, FORMAT_LEVEL_PARTITION_CLOCK]) {
      const s = await setup({ formatLevel: level })
      // The target group's clock is a minute ahead of the source's (1,000); the 50 leases end at 61,000.
      s.target.port.nowMs = () => 61_000
      await s.mover.move(s.request)
      const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
      const kept = level >= FORMAT_LEVEL_PARTITION_CLOCK
      expect(imports.map((c) => c.clockMs)).toEqual(imports.map((c) => (kept && c.last ? 1_000 : undefined)))
      // Kept, the leases fall due a minute after the move (the target's 121,000); not kept, at once.
      expect(s.target.port.machine.nextTimedMs(QUEUE, 0)).toBe(kept ? 121_000 : 61_000)
      expect(s.target.port.machine.timedPartitionIds(61_000)).toEqual(kept ? [] : [`${QUEUE}/0`])
    }
  })

  it("ships the partition's config with only the fields every replica of the cluster's level reads", async () => {
    // The source's config is resolved (every field, 0s too); a level-15 replica refuses a
    // config naming the retry backoff (level 16), so it must not go out below that level.
    for (const level of [
      FORMAT_LEVEL_MESSAGE_TTL - 1,
      FORMAT_LEVEL_RETRY_BACKOFF - 1,
      FORMAT_LEVEL_RETRY_BACKOFF,
    ]) {
      const s = await setup({ formatLevel: level })
      expect(s.source.port.machine.configOf(QUEUE, 0)).toMatchObject({ retryBackoffMinMs: 0, orderedKeys: 0 })
      await s.mover.move(s.request)
      const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
      expect(imports.length).toBeGreaterThan(0)
      for (const chunk of imports) {
        const fields = Object.keys(chunk.config)
        expect(fields.includes('messageTtlMs')).toBe(level >= FORMAT_LEVEL_MESSAGE_TTL)
        expect(fields.includes('retryBackoffMinMs')).toBe(level >= FORMAT_LEVEL_RETRY_BACKOFF)
        expect(fields.includes('retryBackoffMaxMs')).toBe(level >= FORMAT_LEVEL_RETRY_BACKOFF)
        expect(fields).not.toContain('orderedKeys')
        expect(chunk.config).toMatchObject({ maxDeliveries: expect.any(Number) })
      }
    }
  })

  it('sends a chunk again only while this node still leads the source group in the same term', async () => {
    const s = await setup({}, async (t) => {
      // The source's leadership passes to a newer term during the first chunk's call.
      expect(t.wanted[0]?.()).toBe(true)
      t.source.port.assertLeader = () => 2
      expect(t.wanted[0]?.()).toBe(false)
      t.source.port.assertLeader = () => {
        throw new Error('not the leader')
      }
      expect(t.wanted[0]?.()).toBe(false)
    })
    await expect(s.mover.move(s.request)).rejects.toThrow(/not the leader|changed leader/)
    expect(s.wanted.length).toBe(1)
  })

  it('copies everything again after the fence when more keys were written meanwhile than it notes', async () => {
    const s = await setup({ dirtyKeysMax: 10 }, serve)
    await s.mover.move(s.request)
    expect(await keysOf(s.target)).toEqual(await keysOf(s.source))
    const imports = s.chunks.filter((c): c is Extract<DataCommand, { type: 'import' }> => c.type === 'import')
    const sessions = [...new Set(imports.map((c) => c.session))]
    expect(sessions).toHaveLength(2)
    const again = imports.filter((c) => c.session === sessions[1])
    expect(again.map((c) => c.seq)).toEqual(again.map((_, i) => i))
    expect(again.reduce((n, c) => n + c.pairs.length, 0)).toBe((await keysOf(s.source)).length)
    expect((await s.target.port.machine.stats(QUEUE, 0, 1_000))?.messages).toBe(300 - 20 + 1)
  })

  it('answers every chunk it shipped when it copies everything again, the first session too', async () => {
    const s = await setup({ dirtyKeysMax: 10 }, serve)
    const response = await s.mover.move(s.request)
    const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
    expect(new Set(imports.map((c) => c.session)).size).toBe(2)
    // Counted over both sessions, as the bytes are (the second's seq starts at 0 again).
    expect(response.chunks).toBe(imports.length)
    expect(response.bytes).toBe(imports.reduce((n, c) => n + encodeDataCommand(c).length, 0))
  })

  it('sends what was written meanwhile in chunks of about a MiB, however big the messages', async () => {
    const big = new Uint8Array(200 * 1024).fill(5)
    const s = await setup({}, async (t) => {
      // Ten messages of 200 KiB each arrive during the copy: about 2 MiB to correct.
      await t.run({ type: 'enqueue', messages: Array.from({ length: 10 }, () => ({ body: big, weight: 1 })) })
    })
    await s.mover.move(s.request)
    expect(await keysOf(s.target)).toEqual(await keysOf(s.source))
    const imports = s.chunks.filter((c): c is Extract<DataCommand, { type: 'import' }> => c.type === 'import')
    const corrections = imports.slice(1, -1)
    expect(corrections.length).toBeGreaterThanOrEqual(2)
    for (const c of corrections) {
      const bytes = c.pairs.reduce((n, [k, v]) => n + k.length + v.length, 0)
      expect(bytes).toBeLessThan(IMPORT_CHUNK_BYTES + big.length + 1024)
    }
    expect((await s.target.port.machine.stats(QUEUE, 0, 1_000))?.messages).toBe(310)
  })

  it('reads back what was written meanwhile about a chunk at a time, not 256 values at once', async () => {
    const big = new Uint8Array(200 * 1024).fill(6)
    const s = await setup({}, async (t) => {
      // 64 messages of 200 KiB each arrive during the copy: 12.5 MiB to correct.
      for (let b = 0; b < 8; b++)
        await t.run({
          type: 'enqueue',
          messages: Array.from({ length: 8 }, () => ({ body: big, weight: 1 })),
        })
    })
    const machine = s.source.port.machine
    const readKeys = machine.readKeys.bind(machine)
    const reads: number[] = []
    machine.readKeys = async (...args) => {
      const values = await readKeys(...args)
      reads.push(values.reduce((n, v) => n + (v?.length ?? 0), 0))
      return values
    }
    await s.mover.move(s.request)
    // The same keys and values (compared as hex and by Buffer.equals: a deep equality of
    // 12.5 MiB of bytes takes minutes).
    const [copied, frozen] = [await keysOf(s.target), await keysOf(s.source)]
    const hex = (pairs: KeyPair[]) => pairs.map(([k]) => Buffer.from(k).toString('hex'))
    expect(hex(copied)).toEqual(hex(frozen))
    expect(copied.filter(([, v], i) => !Buffer.from(v).equals((frozen[i] as KeyPair)[1]))).toEqual([])
    expect((await s.target.port.machine.stats(QUEUE, 0, 1_000))?.messages).toBe(364)
    expect(reads.reduce((n, r) => n + r, 0)).toBeGreaterThan(64 * big.length)
    // A read answers at most what fills the chunk, and what the machine read past it: at most
    // 4 MiB of values at the partition's message size limit (256 KiB); one read of every key
    // written read all 12.5 MiB at once.
    expect(Math.max(...reads)).toBeLessThan(IMPORT_CHUNK_BYTES + 4 * 1024 * 1024 + 64 * 1024)
  })

  it("corrects in rounds while writes go on, and fences for the last round's writes alone", async () => {
    let n = 0
    const s = await setup({ settledKeys: 0 }, undefined, async (t, chunk, fenced) => {
      // A write during every chunk sent while serving, none once fenced.
      if (!fenced && !chunk.last)
        await t.run({ type: 'enqueue', messages: [{ body: Uint8Array.of(n++), weight: 1 }] })
    })
    await s.mover.move(s.request)
    expect(await keysOf(s.target)).toEqual(await keysOf(s.source))
    const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
    // The full copy, three correction rounds (writes never stop), then after the fence the
    // keys of the last round's write, and the last chunk.
    expect(s.fencedAt.filter((f) => !f)).toHaveLength(4)
    const fenced = imports.filter((_, i) => s.fencedAt[i])
    expect(fenced).toHaveLength(2)
    expect(fenced[0]?.pairs.length).toBeGreaterThan(0)
    expect(fenced[0]?.pairs.length).toBeLessThan(10)
    expect((await s.target.port.machine.stats(QUEUE, 0, 1_000))?.messages).toBe(300 + 4)
  })
})

describe('PartitionMover: an aborted move (FORMAT_LEVEL_MOVE_ABORT)', () => {
  it('aborted before its fence: the fence still to come is refused, the partition never stops serving', async () => {
    let abort: Promise<unknown> | undefined
    const s = await setup({ formatLevel: FORMAT_LEVEL_MOVE_ABORT }, async (t) => {
      abort = t.mover.move({ ...t.request, phase: 'abort' })
      await abort
    })
    await expect(s.mover.move(s.request)).rejects.toThrow(/move 7 was aborted/)
    expect(await abort).toEqual({ chunks: 0, bytes: 0 })
    expect(s.source.proposed.filter((c) => c.type === 'unfence')).toEqual([
      { type: 'unfence', queue: QUEUE, partition: 0, moveId: 7 },
    ])
    expect(s.source.port.machine.fenced(QUEUE, 0)).toBe(false)
    expect(s.chunks.some((c) => c.type === 'import' && c.last)).toBe(false)
    expect(s.target.port.machine.holds(QUEUE, 0)).toBe(false)
    // The partition serves: the next lease takes ready messages.
    const r = await s.run({ type: 'lease', consumerId: 'c', max: 5, visibilityMs: 1_000 })
    expect(r.type === 'lease' && r.leases.length).toBe(5)
    // A copy asked again (a late call of the meta leader's) is refused at once.
    await expect(s.mover.move(s.request)).rejects.toThrow(/move 7 was aborted/)
  })

  it('aborted once fenced: the fence is lifted, and the last chunk (which would make the target hold it) is never sent', async () => {
    let abort: Promise<unknown> | undefined
    const s = await setup(
      { formatLevel: FORMAT_LEVEL_MOVE_ABORT, dirtyKeysMax: 1 },
      serve,
      async (t, _chunk, fenced) => {
        if (!fenced || abort) return
        abort = t.mover.move({ ...t.request, phase: 'abort' })
        await abort
      },
    )
    await expect(s.mover.move(s.request)).rejects.toThrow(/move 7 was aborted/)
    expect(abort).toBeDefined()
    expect(s.source.proposed.filter((c) => c.type === 'fence')).toHaveLength(1)
    expect(s.source.port.machine.fenced(QUEUE, 0)).toBe(false)
    expect(s.chunks.some((c) => c.type === 'import' && c.last)).toBe(false)
    expect(s.target.port.machine.holds(QUEUE, 0)).toBe(false)
  })

  it('aborted while its last chunk is on its way: that chunk is not sent again (a retry would make the target hold it)', async () => {
    let lastWanted: (() => boolean) | undefined
    const s = await setup({ formatLevel: FORMAT_LEVEL_MOVE_ABORT }, serve, async (t, chunk) => {
      if (!chunk.last) return
      // The call of the last chunk fails (the target has no leader), and the abort lands meanwhile.
      lastWanted = t.wanted.at(-1)
      expect(lastWanted?.()).toBe(true)
      await t.mover.move({ ...t.request, phase: 'abort' })
    })
    await s.mover.move(s.request).catch(() => undefined)
    expect(s.source.port.machine.fenced(QUEUE, 0)).toBe(false)
    expect(lastWanted?.()).toBe(false)
  })

  it(`is refused below format level ${FORMAT_LEVEL_MOVE_ABORT}; chunk 0 asks to replace an aborted move's copy from it on`, async () => {
    const old = await setup({ formatLevel: FORMAT_LEVEL_MOVE_ABORT - 1 })
    expect(() => old.mover.move({ ...old.request, phase: 'abort' })).toThrow(/format level 37/)
    expect(old.source.proposed.some((c) => c.type === 'unfence')).toBe(false)
    for (const level of [FORMAT_LEVEL_MOVE_ABORT - 1, FORMAT_LEVEL_MOVE_ABORT]) {
      const s = await setup({ formatLevel: level })
      await s.mover.move(s.request)
      const imports = s.chunks.filter((c): c is ImportCommand => c.type === 'import')
      expect(imports.map((c) => c.replaces === true)).toEqual(
        imports.map((c) => c.seq === 0 && level >= FORMAT_LEVEL_MOVE_ABORT),
      )
    }
    expect(() => old.mover.move({ ...old.request, phase: 'undo' })).toThrow(/copy, drop or abort, got "undo"/)
  })
})

describe('PartitionMover: a late request of an earlier move', () => {
  /** Groups 1 and 2 (10 messages in group 1) and a mover whose import calls go straight to it. */
  async function twoGroups() {
    const g1 = await memoryGroup(1)
    const g2 = await memoryGroup(2)
    const groups = new Map([
      [1, g1],
      [2, g2],
    ])
    const calls = importCalls((req, cb) => {
      mover.import(req).then((r) => cb(null, r), cb)
    })
    const mover = new PartitionMover(
      { port: (id) => groups.get(id)?.port, formatLevel: () => FORMAT_LEVEL_MOVE_IDS },
      calls,
      'n1',
    )
    const req = (moveId: number, fromGroup: number, toGroup: number, phase: 'copy' | 'drop') => ({
      moveId,
      storedAs: QUEUE,
      partition: 0,
      fromGroup,
      toGroup,
      phase,
      targetReplicas: [],
      configJson: '{}',
    })
    const move = async (moveId: number, from: number, to: number) => {
      await mover.move(req(moveId, from, to, 'copy'))
      await mover.move(req(moveId, from, to, 'drop'))
    }
    const messages = async (g: typeof g1) => (await g.port.machine.stats(QUEUE, 0, 1_000))?.messages
    await g1.port.propose({ type: 'open', queue: QUEUE, partition: 0, config: {} })
    await g1.port.propose({
      type: 'apply',
      queue: QUEUE,
      partition: 0,
      command: {
        type: 'enqueue',
        messages: Array.from({ length: 10 }, () => ({ body: Uint8Array.of(1), weight: 1 })),
      },
    })
    return { g1, g2, mover, req, move, messages }
  }

  it('refuses a late copy from a group past that move: it would clear the only copy of the partition', async () => {
    const t = await twoGroups()
    await t.move(1, 1, 2)
    await t.move(2, 2, 1)
    await t.move(3, 1, 2)
    expect(await t.messages(t.g2)).toBe(10)
    // Move 4 (2 -> 1) fences group 2; a deposed meta leader's copy of move 1 (1 -> 2) arrives late.
    expect((await t.g2.port.propose({ type: 'fence', queue: QUEUE, partition: 0, moveId: 4 })).type).toBe(
      'fenced',
    )
    await expect(t.mover.move(t.req(1, 1, 2, 'copy'))).rejects.toThrow(/move 1 is stale here: copy from/)
    // Straight to the target (a source that knew nothing of the later moves): refused there too.
    const chunk = encodeDataCommand({
      type: 'import',
      queue: QUEUE,
      partition: 0,
      moveId: 1,
      session: 'late',
      seq: 0,
      last: true,
      config: {},
      pairs: [],
      sourceTerm: 1,
      fresh: true,
    })
    await expect(t.mover.import({ groupId: 2, command: chunk })).rejects.toThrow(
      /move 1 is stale here: import into/,
    )
    expect(await t.messages(t.g2)).toBe(10)
    await t.move(4, 2, 1)
    expect(await t.messages(t.g1)).toBe(10)
  })

  it('refuses a late copy from the group serving the partition now: it would fence it for a finished move', async () => {
    const t = await twoGroups()
    for (const [id, from, to] of [
      [1, 1, 2],
      [2, 2, 1],
      [3, 1, 2],
      [4, 2, 1],
    ] as const)
      await t.move(id, from, to)
    await expect(t.mover.move(t.req(1, 1, 2, 'copy'))).rejects.toThrow(/imported by move 4/)
    expect(t.g1.port.machine.fenced(QUEUE, 0)).toBe(false)
    expect(await t.messages(t.g1)).toBe(10)
    await t.move(5, 1, 2) // the next move goes as usual
    expect(await t.messages(t.g2)).toBe(10)
  })
})

describe('PartitionMover: a copy begun again after the node restarted', () => {
  it("takes no late chunk of the copy the node ran before it restarted for one of the new copy's", async () => {
    const source = await memoryGroup(1)
    const target = await memoryGroup(2)
    let term = 1
    source.port.assertLeader = () => term
    const run = async (command: Extract<DataCommand, { type: 'apply' }>['command']) => {
      const r = await source.port.propose({ type: 'apply', queue: QUEUE, partition: 0, command })
      if (r.type !== 'applied' || r.result.type === 'rejected')
        throw new Error(`refused: ${JSON.stringify(r)}`)
      return r.result
    }
    const enqueue = (n: number, fill: number) =>
      run({
        type: 'enqueue',
        messages: Array.from({ length: n }, () => ({ body: new Uint8Array(50).fill(fill), weight: 1 })),
      })
    await source.port.propose({ type: 'open', queue: QUEUE, partition: 0, config: {} })
    await enqueue(20, 1)
    const leased = await run({ type: 'lease', consumerId: 'c', max: 10, visibilityMs: 60_000 })
    const leases = leased.type === 'lease' ? leased.leases.map((l) => l.leaseId) : []
    const groups = {
      port: (id: number) => (id === 1 ? source.port : id === 2 ? target.port : undefined),
      formatLevel: () => FORMAT_LEVEL_MOVE_IDS,
    }
    // The target's side: its import proposes the chunk into the local target group.
    const importer = new PartitionMover(groups, {} as PeerCalls, 'n2')
    /** Import calls that go to `importer` once `before` says so ('hold': never answered). */
    const callsWith = (
      before: (req: ImportPartitionRequest, chunk: ImportCommand) => Promise<'send' | 'hold'>,
    ) =>
      importCalls((req, cb) => {
        void before(req, decodeDataCommand(req.command) as ImportCommand).then((what) => {
          if (what === 'send') importer.import(req).then((r) => cb(null, r), cb)
        })
      })
    const request = COPY_1_TO_2
    // Before the restart: node n1 leads the source in term 1 and copies; 5 acks during its
    // first chunk make a second one, whose call is still on its way when the node goes down.
    let late: ImportPartitionRequest | undefined
    const before = new PartitionMover(
      groups,
      callsWith(async (req, chunk) => {
        if (chunk.seq === 0) {
          await run({ type: 'ack', leaseIds: leases.slice(0, 5) })
          return 'send'
        }
        late = req
        return 'hold'
      }),
      'n1',
    )
    void before.move(request)
    while (!late) await new Promise((r) => setTimeout(r, 1))
    // Restarted, n1 leads the source again (term 2) and copies again; the partition serves on:
    // during the new copy's first chunk 5 messages come and 3 more are acked, so it has a second
    // chunk too. The first copy's second chunk arrives at the target just before it.
    term = 2
    let lateAnswer: ImportPartitionResponse | Error | undefined
    const after = new PartitionMover(
      groups,
      callsWith(async (_req, chunk) => {
        if (chunk.seq === 0 && !chunk.last) {
          await enqueue(5, 2)
          await run({ type: 'ack', leaseIds: leases.slice(5, 8) })
        }
        if (chunk.seq === 1 && !chunk.last)
          lateAnswer = await importer.import(late as ImportPartitionRequest).catch((e: Error) => e)
        return 'send'
      }),
      'n1',
    )
    await after.move(request)
    // The late chunk is refused: its session is not the new copy's, though the same node began both.
    expect(lateAnswer).toBeInstanceOf(Error)
    expect((lateAnswer as Error).message).toMatch(/out of order/)
    // The target holds exactly the frozen source: 20 - 8 acked + 5.
    expect(await keysOf(target)).toEqual(await keysOf(source))
    expect((await target.port.machine.stats(QUEUE, 0, 1_000))?.messages).toBe(17)
  })
})

describe('PartitionMover: an aborted move of a partition never opened in its source', () => {
  it('lifts the fence all the same: the partition serves there again, and a later move copies it', async () => {
    // The partition was never used: its source group never opened it (groups open one at its
    // first request). The copy fences it, then its last chunk fails (the target lost its majority).
    const source = await memoryGroup(1)
    const target = await memoryGroup(2)
    let targetUp = true
    const mover: PartitionMover = new PartitionMover(
      {
        port: (id) => (id === 1 ? source.port : id === 2 ? target.port : undefined),
        formatLevel: () => FORMAT_LEVEL_MOVE_ABORT,
      },
      importCalls((req, cb) => {
        const chunk = decodeDataCommand(req.command) as ImportCommand
        if (chunk.last && chunk.moveId === 7) targetUp = false
        if (!targetUp) cb(new Error('group 2 has no leader'))
        else mover.import(req).then((r) => cb(null, r), cb)
      }),
      'n1',
    )
    const request = COPY_1_TO_2
    expect(source.port.machine.holds(QUEUE, 0)).toBe(false)
    await expect(mover.move(request)).rejects.toThrow(/no leader/)
    expect(source.port.machine.fenced(QUEUE, 0)).toBe(true)
    // The meta state gives the move up; the source lifts its fence.
    await mover.move({ ...request, phase: 'abort' })
    expect(source.port.machine.fenced(QUEUE, 0)).toBe(false)
    // The partition serves there again: a request opens it and enqueues.
    expect((await source.port.propose({ type: 'open', queue: QUEUE, partition: 0, config: {} })).type).toBe(
      'opened',
    )
    // The plan moves it again (move 8, into a group with a majority): the copy is not refused.
    targetUp = true
    await mover.move({ ...request, moveId: 8 })
    expect(target.port.machine.holds(QUEUE, 0)).toBe(true)
  })
})

type ImportHandler = (
  req: ImportPartitionRequest,
  cb: (e: Error | null, r?: ImportPartitionResponse) => void,
) => void

/** A peer client whose ImportPartition is `importPartition`. */
function importClient(importPartition: ImportHandler) {
  return {
    peer: {
      importPartition: (
        req: ImportPartitionRequest,
        _md: Metadata,
        _opts: unknown,
        cb: (e: Error | null, r?: ImportPartitionResponse) => void,
      ) => importPartition(req, cb),
    },
  }
}

/** Peer calls whose leader's ImportPartition is `importPartition` (nothing else is called). */
function importCalls(importPartition: ImportHandler): PeerCalls {
  const client = importClient(importPartition)
  return {
    callLeader: <T>(_replicas: unknown, fn: (...a: unknown[]) => void) =>
      new Promise<T>((resolve, reject) =>
        fn(client, new Metadata(), {}, (e: Error | null, r: T) => (e ? reject(e) : resolve(r))),
      ),
  } as unknown as PeerCalls
}

/** Move 7's copy of QUEUE's partition 0 from group 1 to group 2. */
const COPY_1_TO_2: MovePartitionRequest = {
  moveId: 7,
  storedAs: QUEUE,
  partition: 0,
  fromGroup: 1,
  toGroup: 2,
  phase: 'copy',
  targetReplicas: [],
  configJson: '{}',
}
