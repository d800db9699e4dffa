import { describe, expect, it } from 'vitest'
import {
  type Durability,
  type Entry,
  EntryType,
  type GroupId,
  type HostOptions,
  HostStoppedError,
  MemoryLogStorage,
  type Message,
  MessageType,
  message,
  NotLeaderError,
  OverloadedError,
  Prng,
  ProposalDroppedError,
  RaftHost,
  Role,
  type Snapshot,
  SnapshotTooLargeError,
  type StateMachine,
  type Transport,
} from '../src/index'
import { conf } from './harness'

const enc = new TextEncoder()
const dec = new TextDecoder()

/** A state machine that keeps the applied strings; each proposal's result is the list length. */
class ListMachine implements StateMachine {
  items: string[] = []
  apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      if (e.type !== EntryType.Normal || e.data.length === 0) return undefined
      this.items.push(dec.decode(e.data))
      return this.items.length
    })
  }
  snapshot(): Uint8Array | Promise<Uint8Array> {
    return enc.encode(JSON.stringify(this.items))
  }
  restore(s: Snapshot): void | Promise<void> {
    this.items = JSON.parse(dec.decode(s.data)) as string[]
  }
}

/**
 * A state machine that applies asynchronously (each result a promise, applied in order behind
 * a chain), and snapshots and restores asynchronously: the shape of a state machine over an
 * async key-value engine.
 */
class AsyncListMachine extends ListMachine {
  #tail: Promise<unknown> = Promise.resolve()
  override apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      const step = this.#tail.then(async () => {
        await new Promise((r) => setImmediate(r))
        return super.apply([e])[0]
      })
      this.#tail = step
      return step
    })
  }
  override async snapshot(): Promise<Uint8Array> {
    await this.#tail
    return super.snapshot()
  }
  override async restore(s: Snapshot): Promise<void> {
    await this.#tail
    await new Promise((r) => setImmediate(r))
    super.restore(s)
  }
}

/** A durability over memory storages that records which storages each flush made durable. */
class RecordingDurability implements Durability {
  readonly storages: MemoryLogStorage[] = []
  readonly flushedGroups: number[] = []
  gate: Promise<void> | null = null
  fail: Error | null = null
  /** Holds every flush from now on; the returned function lets them (and later ones) through. */
  hold(): () => void {
    let open: () => void = () => {}
    this.gate = new Promise<void>((r) => {
      open = r
    })
    return () => {
      this.gate = null
      open()
    }
  }
  async flush(): Promise<void> {
    if (this.gate !== null) await this.gate
    if (this.fail !== null) throw this.fail
    this.flushedGroups.push(this.storages.filter((s) => s.unsyncedWrites() > 0).length)
    for (const s of this.storages) s.sync()
  }
}

/** Hosts wired by an in-memory network: messages queue until run() delivers them. */
class Net {
  readonly hosts = new Map<string, RaftHost>()
  readonly queue: { groupId: GroupId; m: Message }[] = []
  readonly cut = new Set<string>()
  /** Hosts halted by the test: still sent messages, but neither ticked nor awaited. */
  readonly halted = new Set<string>()
  readonly sent: Message[] = []
  transport(): Transport {
    return {
      send: (groupId, messages) => {
        for (const m of messages) {
          this.sent.push(m)
          if (this.queue.length < 100_000) this.queue.push({ groupId, m })
        }
      },
    }
  }
  async run(roundsMax = 1000): Promise<void> {
    for (let round = 0; round < roundsMax; round++) {
      for (const [id, h] of this.hosts) if (!this.halted.has(id)) await h.idle()
      if (this.queue.length === 0) return
      const batch = this.queue.splice(0)
      for (const { groupId, m } of batch) {
        if (this.cut.has(m.to) || this.cut.has(m.from)) continue
        this.hosts.get(m.to)?.receive(groupId, m)
      }
    }
    throw new Error('Net.run: not quiet')
  }
  /**
   * One heartbeat round: ticks every host, then delivers until quiet (at most 50 batches,
   * waiting for `leader` between them). Each Snap message goes to `snap` first, which says
   * whether to deliver it. Returns the Snap messages of the round.
   */
  async snapRound(leader: RaftHost, snap: (groupId: GroupId, m: Message) => boolean): Promise<Message[]> {
    for (const [id, h] of this.hosts) if (!this.halted.has(id)) h.tick()
    const snaps: Message[] = []
    for (let i = 0; i < 50; i++) {
      await leader.idle()
      const batch = this.queue.splice(0)
      if (batch.length === 0) break
      for (const { groupId, m } of batch) {
        if (m.type === MessageType.Snap) {
          snaps.push(m)
          if (!snap(groupId, m)) continue
        }
        this.hosts.get(m.to)?.receive(groupId, m)
      }
    }
    return snaps
  }
  async tickAll(times: number): Promise<void> {
    for (let i = 0; i < times; i++) {
      for (const [id, h] of this.hosts) if (!this.halted.has(id)) h.tick()
      await this.run()
    }
  }
}

interface Node {
  host: RaftHost
  durability: RecordingDurability
  storages: Map<GroupId, MemoryLogStorage>
  machines: Map<GroupId, ListMachine>
}

/**
 * Keeps its state "durably" (persisted waits for the applies, as a state machine over an
 * engine does); records each image it takes, a distinct byte array whatever the state (so a
 * transfer can be told apart), and returns it only once `hold` resolves; `persisted()` waits
 * for `persistHold` too.
 */
class DurableListMachine extends AsyncListMachine {
  readonly images: Uint8Array[] = []
  hold: Promise<void> = Promise.resolve()
  persistHold: Promise<void> = Promise.resolve()
  override async snapshot(): Promise<Uint8Array> {
    const image = new Uint8Array(await super.snapshot())
    this.images.push(image)
    await this.hold
    return image
  }
  async persisted(): Promise<void> {
    await this.persistHold
    await AsyncListMachine.prototype.snapshot.call(this)
  }
}

function cluster(
  groups: GroupId[],
  limits: Record<string, number> = {},
  ids = ['n1', 'n2', 'n3'],
  newMachine: () => ListMachine = () => new ListMachine(),
  extra: { snapshotsOnDemand?: boolean; appliedIndex?: number } = {},
  hostOptions: Partial<HostOptions> = {},
): { net: Net; nodes: Map<string, Node> } {
  const net = new Net()
  const nodes = new Map<string, Node>()
  let seed = 1
  for (const id of ids) {
    const durability = new RecordingDurability()
    const host = new RaftHost({
      transport: net.transport(),
      durability,
      clock: { nowMs: () => 1_000 },
      ...hostOptions,
    })
    const node: Node = { host, durability, storages: new Map(), machines: new Map() }
    for (const g of groups) {
      const storage = new MemoryLogStorage(conf(ids))
      const machine = newMachine()
      durability.storages.push(storage)
      node.storages.set(g, storage)
      node.machines.set(g, machine)
      host.addGroup({
        groupId: g,
        raft: { id, prng: new Prng(seed++), electionTicks: 10 },
        storage,
        stateMachine: machine,
        limits,
        ...extra,
      })
    }
    net.hosts.set(id, host)
    nodes.set(id, node)
  }
  return { net, nodes }
}

/** A host of one node, no network: its flushes make `storage`'s writes durable. */
function soloHost(storage: MemoryLogStorage, options: Partial<HostOptions> = {}): RaftHost {
  return new RaftHost({
    transport: { send: () => {} },
    durability: {
      flush: async () => {
        storage.sync()
      },
    },
    clock: { nowMs: () => 0 },
    ...options,
  })
}

/** Proposes `text` on `host` and lets the network run until every replica heard of its commit. */
async function proposeAndSpread(net: Net, host: RaftHost, groupId: GroupId, text: string): Promise<void> {
  const proposed = host.propose(groupId, enc.encode(text))
  await net.run()
  await proposed
  await net.tickAll(2)
}

async function electAll(net: Net, leader: RaftHost, groups: GroupId[]): Promise<void> {
  for (const g of groups) leader.campaign(g)
  await net.run()
}

/** A 3-node cluster with snapshots on demand (compacting every 20 entries), n1 elected. */
async function electedOnDemand(): Promise<{ net: Net; nodes: Map<string, Node> }> {
  const { net, nodes } = cluster(
    [1],
    { compactEntries: 20, compactKeepEntries: 2 },
    undefined,
    () => new DurableListMachine(),
    { snapshotsOnDemand: true, appliedIndex: 0 },
  )
  await electAll(net, nodes.get('n1')!.host, [1])
  return { net, nodes }
}

/**
 * A 3-node cluster with snapshots on demand (compacting every 20 entries) in which n3 was cut
 * off while `count` entries were committed: the leader n1 compacted past it. n3 is still cut.
 */
async function laggingOnDemand(count: number): Promise<{ net: Net; nodes: Map<string, Node> }> {
  const { net, nodes } = await electedOnDemand()
  const n1 = nodes.get('n1')!
  net.cut.add('n3')
  const ps = Array.from({ length: count }, (_, i) => n1.host.propose(1, enc.encode(`v${i}`)))
  await net.run()
  await Promise.all(ps)
  await net.tickAll(1)
  return { net, nodes }
}

/**
 * A state machine whose applies finish only when the test releases them (writes stuck behind a
 * slow disk, say); it reports them as its backlog.
 */
class GatedListMachine extends ListMachine {
  readonly #waiting: (() => void)[] = []
  handed = 0
  /** Told when applies finish (the node wires RaftHost.backlogDown). */
  onDown: () => void = () => {}
  applyBacklog(): number {
    return this.#waiting.length
  }
  override apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      this.handed++
      return new Promise((resolve) =>
        this.#waiting.push(() => resolve(ListMachine.prototype.apply.call(this, [e])[0])),
      )
    })
  }
  /** Finishes every apply handed so far, in order. */
  release(): void {
    for (const finish of this.#waiting.splice(0)) finish()
    this.onDown()
  }
}

describe('RaftHost', () => {
  it('stamps the group clock when its Clock has a steady clock: a wall clock stepped forward moves it at most 1.01x', async () => {
    const clock = { wall: 1_000_000, mono: 5_000 }
    const { net, nodes } = cluster(
      [1],
      {},
      undefined,
      undefined,
      {},
      {
        clock: { nowMs: () => clock.wall, monoMs: () => clock.mono },
      },
    )
    const n1 = nodes.get('n1')!
    n1.host.campaign(1)
    await net.run()
    expect(n1.host.groupClockMs(1)).toBe(1_000_000)
    clock.wall += 3_600_000 // stepped an hour forward…
    clock.mono += 100 // …while 100 ms passed
    expect(n1.host.groupClockMs(1)).toBe(1_000_101)
    await proposeAndSpread(net, n1.host, 1, 'x')
    const log = nodes.get('n2')!.storages.get(1)!
    expect(log.entries(log.lastIndex(), log.lastIndex() + 1, 1 << 20)[0]!.timestampMs).toBe(1_000_101)
    expect(n1.host.groupClockMs(99)).toBe(clock.wall) // a group not hosted here: the wall clock
    // Each replica recorded the group clock minus its wall clock with its Ready's writes (the
    // followers at what the leader told them): −3 599 899 ms on every node, one wall clock here.
    for (const n of nodes.values()) {
      expect(n.storages.get(1)!.initialState().clockOffsetMs).toBe(1_000_101 - clock.wall)
    }
  })

  it('hands a state machine no more entries while its backlog is at applyBacklogMax; the replica still acknowledges', async () => {
    const { net, nodes } = cluster(
      [1],
      {},
      undefined,
      () => new GatedListMachine(),
      {},
      { applyBacklogMax: 3 },
    )
    const n1 = nodes.get('n1')!
    n1.host.campaign(1)
    await net.run()
    for (const n of nodes.values()) (n.machines.get(1) as GatedListMachine).release()
    await net.tickAll(1)
    // One at a time: each commit a Ready of its own (a Ready taken hands all it carries).
    const proposals: Promise<{ result: unknown }>[] = []
    for (let i = 0; i < 10; i++) {
      proposals.push(n1.host.propose(1, enc.encode(`v${i}`)))
      await net.run()
    }
    await net.tickAll(2)
    const last = nodes.get('n2')!.storages.get(1)!.lastIndex()
    for (const [id, n] of nodes) {
      const machine = n.machines.get(1) as GatedListMachine
      // Persisted and committed everywhere (the followers acknowledged), applied nowhere past 3.
      expect([id, n.storages.get(1)!.lastIndex()]).toEqual([id, last])
      expect([id, n.host.status(1).commit]).toEqual([id, last])
      expect([id, machine.applyBacklog()]).toEqual([id, 3])
      expect(machine.items).toEqual([])
      expect(n.host.stats.applyPauses).toBeGreaterThanOrEqual(1)
    }
    // Released, the rest is handed a few at a time, in order, and every proposal is answered:
    // resumed as the backlog goes down (backlogDown), without waiting for a tick.
    for (const n of nodes.values())
      (n.machines.get(1) as GatedListMachine).onDown = () => n.host.backlogDown(1)
    for (let round = 0; round < 10; round++) {
      for (const n of nodes.values()) (n.machines.get(1) as GatedListMachine).release()
      await net.run()
    }
    const answered = await Promise.all(proposals)
    expect(await Promise.all(answered.map((p) => p.result))).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    for (const n of nodes.values())
      expect(n.machines.get(1)!.items).toEqual(Array.from({ length: 10 }, (_, i) => `v${i}`))
  })

  it('answers proposals with the state machine’s result once applied, for many groups', async () => {
    const { net, nodes } = cluster([1, 2])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1, 2])
    const p1 = n1.propose(1, enc.encode('a'))
    const p2 = n1.propose(2, enc.encode('b'))
    const p3 = n1.propose(1, enc.encode('c'))
    await net.run()
    expect(await p1).toMatchObject({ result: 1 })
    expect(await p3).toMatchObject({ result: 2 })
    expect(await p2).toMatchObject({ result: 1 })
    await net.tickAll(2)
    for (const n of nodes.values()) {
      expect(n.machines.get(1)!.items).toEqual(['a', 'c'])
      expect(n.machines.get(2)!.items).toEqual(['b'])
    }
  })

  it('coalesces the ready work of many groups into one flush', async () => {
    const groups = [1, 2, 3, 4]
    const { net, nodes } = cluster(groups)
    const n1 = nodes.get('n1')!
    await electAll(net, n1.host, groups)
    n1.durability.flushedGroups.length = 0
    const ps = groups.map((g) => n1.host.propose(g, enc.encode(`x${g}`)))
    await net.run()
    await Promise.all(ps)
    expect(Math.max(...n1.durability.flushedGroups)).toBe(4) // one fsync made all four durable
    expect(n1.host.stats.flushes).toBeLessThan(n1.host.stats.cycles + 1)
  })

  it('a follower acknowledges appends only once they are durable', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!
    const n2 = nodes.get('n2')!
    await electAll(net, n1.host, [1])
    const open = n2.durability.hold()
    const p = n1.host.propose(1, enc.encode('durable-first'))
    await n1.host.idle()
    const appends = net.queue.splice(0).filter(({ m }) => m.type === MessageType.App && m.to === 'n2')
    expect(appends.length).toBe(1)
    const before = net.sent.length
    for (const { groupId, m } of appends) n2.host.receive(groupId, m)
    for (let i = 0; i < 10; i++) await Promise.resolve()
    expect(net.sent.slice(before).filter((m) => m.from === 'n2')).toEqual([])
    open()
    await net.run()
    expect(net.sent.slice(before).some((m) => m.from === 'n2' && m.type === MessageType.AppResp)).toBe(true)
    await p
  })

  it('a leader sends its appends while its own flush is pending', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!
    await electAll(net, n1.host, [1])
    const open = n1.durability.hold()
    const before = net.sent.length
    const p = n1.host.propose(1, enc.encode('in-parallel'))
    for (let i = 0; i < 10; i++) await Promise.resolve()
    const sent = net.sent.slice(before)
    expect(
      sent
        .filter((m) => m.type === MessageType.App)
        .map((m) => m.to)
        .sort(),
    ).toEqual(['n2', 'n3'])
    open()
    await net.run()
    await p
  })

  it('pipelines: while its own flush is pending, a leader commits with its followers and keeps sending', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!
    await electAll(net, n1.host, [1])
    const open = n1.durability.hold()
    const flushedBefore = n1.durability.flushedGroups.length
    // Delivers what is queued, without waiting for n1's gated flush.
    const exchange = async (): Promise<void> => {
      for (let round = 0; round < 20; round++) {
        await new Promise((r) => setImmediate(r))
        for (const { groupId, m } of net.queue.splice(0)) nodes.get(m.to)!.host.receive(groupId, m)
      }
    }
    const a = n1.host.propose(1, enc.encode('a'))
    await exchange()
    // n2 and n3 made it durable: a majority without n1's own disk.
    await expect(a).resolves.toMatchObject({ result: 1 })
    const before = net.sent.length
    const b = n1.host.propose(1, enc.encode('b'))
    await exchange()
    expect(
      new Set(
        net.sent
          .slice(before)
          .filter((m) => m.type === MessageType.App && m.entries.length > 0)
          .map((m) => m.to),
      ),
    ).toEqual(new Set(['n2', 'n3']))
    await expect(b).resolves.toMatchObject({ result: 2 })
    expect(n1.durability.flushedGroups.length).toBe(flushedBefore) // n1's first flush is still pending
    open()
    await net.run()
    expect(nodes.get('n1')!.machines.get(1)!.items).toEqual(['a', 'b'])
  })

  it('with pipelineMax 1, a leader waits for its own flush before its next cycle', async () => {
    const net = new Net()
    const ids = ['n1', 'n2', 'n3']
    const durabilities = new Map<string, RecordingDurability>()
    for (const [i, id] of ids.entries()) {
      const durability = new RecordingDurability()
      durabilities.set(id, durability)
      const host = new RaftHost({
        transport: net.transport(),
        durability,
        clock: { nowMs: () => 1_000 },
        pipelineMax: 1,
      })
      const storage = new MemoryLogStorage(conf(ids))
      durability.storages.push(storage)
      host.addGroup({
        groupId: 1,
        raft: { id, prng: new Prng(i + 1), electionTicks: 10 },
        storage,
        stateMachine: new ListMachine(),
      })
      net.hosts.set(id, host)
    }
    const n1 = net.hosts.get('n1')!
    await electAll(net, n1, [1])
    const open = durabilities.get('n1')!.hold()
    let settled = false
    const a = n1.propose(1, enc.encode('a')).then((v) => {
      settled = true
      return v
    })
    for (let round = 0; round < 20; round++) {
      await new Promise((r) => setImmediate(r))
      for (const { groupId, m } of net.queue.splice(0)) net.hosts.get(m.to)!.receive(groupId, m)
    }
    expect(settled).toBe(false)
    open()
    await net.run()
    await expect(a).resolves.toMatchObject({ result: 1 })
    expect(
      () =>
        new RaftHost({
          transport: net.transport(),
          durability: durabilities.get('n1')!,
          clock: { nowMs: () => 0 },
          pipelineMax: 0,
        }),
    ).toThrow(/pipelineMax/)
  })

  it('stop(): later messages and ticks are ignored, pending and new proposals fail, so the storage can close', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!
    await electAll(net, n1.host, [1])
    const before = n1.host.propose(1, enc.encode('before'))
    await net.run()
    await before
    // A proposal that cannot commit: its followers are cut off.
    net.cut.add('n2')
    net.cut.add('n3')
    const pending = n1.host.propose(1, enc.encode('stuck'))
    await n1.host.stop()
    await expect(pending).rejects.toBeInstanceOf(ProposalDroppedError)
    await expect(n1.host.propose(1, enc.encode('after'))).rejects.toBeInstanceOf(HostStoppedError)
    // The storage is gone: a message that reached the host now would throw from it.
    n1.storages.get(1)!.term = () => {
      throw new Error('the store is closed')
    }
    const app = net.sent.find((m) => m.type === MessageType.App && m.to === 'n2')!
    expect(() => n1.host.receive(1, { ...app, from: 'n2', to: 'n1' })).not.toThrow()
    expect(() => n1.host.tick()).not.toThrow()
    await n1.host.idle()
  })

  it('fails a proposal on a follower with a retriable NotLeaderError carrying the leader hint', async () => {
    const { net, nodes } = cluster([1])
    await electAll(net, nodes.get('n1')!.host, [1])
    const err = await nodes
      .get('n2')!
      .host.propose(1, enc.encode('x'))
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(NotLeaderError)
    expect((err as NotLeaderError).leaderHint).toBe('n1')
    expect((err as NotLeaderError).retriable).toBe(true)
  })

  it('applies back-pressure when the proposal queue or in-flight bytes pass their limits', async () => {
    const { net, nodes } = cluster([1], { pendingProposalsMax: 2, inflightBytesMax: 10 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const a = n1.propose(1, enc.encode('1'))
    const b = n1.propose(1, enc.encode('2'))
    await expect(n1.propose(1, enc.encode('3'))).rejects.toBeInstanceOf(OverloadedError)
    await net.run()
    await Promise.all([a, b])
    await expect(n1.propose(1, new Uint8Array(11))).rejects.toThrow(/bytes of proposals pending/)
    const ok = n1.propose(1, enc.encode('ok'))
    await net.run()
    await expect(ok).resolves.toMatchObject({ result: 3 })
  })

  it("bounds the bytes of proposals pending in all of a host's groups together", async () => {
    const { net, nodes } = cluster(
      [1, 2],
      { inflightBytesMax: 10 },
      ['n1', 'n2', 'n3'],
      undefined,
      {},
      {
        inflightBytesMax: 15,
      },
    )
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1, 2])
    const a = n1.propose(1, new Uint8Array(8))
    expect(n1.inflightBytes).toBe(8)
    // Within group 2's own bound (10), past the host's (15) with group 1's 8.
    await expect(n1.propose(2, new Uint8Array(8))).rejects.toThrow(
      /this node has 8 bytes of proposals pending in all its groups \(limit 15\)/,
    )
    await expect(n1.propose(2, new Uint8Array(8))).rejects.toBeInstanceOf(OverloadedError)
    const b = n1.propose(2, new Uint8Array(7))
    expect(n1.inflightBytes).toBe(15)
    await net.run()
    await Promise.all([a, b])
    expect(n1.inflightBytes).toBe(0)
    const c = n1.propose(2, new Uint8Array(8))
    await net.run()
    await expect(c).resolves.toMatchObject({ index: expect.any(Number) })
    // A removed group's pending bytes leave the host's count.
    const d = n1.propose(1, new Uint8Array(9)).catch(() => 'dropped')
    expect(n1.inflightBytes).toBe(9)
    n1.removeGroup(1)
    expect(n1.inflightBytes).toBe(0)
    expect(await d).toBe('dropped')
    expect(
      () =>
        new RaftHost({
          transport: net.transport(),
          durability: new RecordingDurability(),
          clock: { nowMs: () => 0 },
          inflightBytesMax: 0,
        }),
    ).toThrow(/inflightBytesMax must be a positive integer/)
  })

  it('resolves a linearizable read on a follower once it has applied the read index', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const p = n1.propose(1, enc.encode('w'))
    await net.run()
    const { index } = await p
    const read = nodes.get('n3')!.host.readIndex(1)
    await net.run()
    await net.tickAll(1)
    expect(await read).toBeGreaterThanOrEqual(index)
    expect(nodes.get('n3')!.machines.get(1)!.items).toContain('w')
  })

  it('reads that arrive before a cycle share one read index: one ReadIndex asked, one heartbeat round', async () => {
    const { net, nodes } = cluster([1], { pendingReadsMax: 6 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const p = n1.propose(1, enc.encode('w'))
    await net.run()
    const { index } = await p
    const n3 = nodes.get('n3')!.host
    const forwarded = () => net.sent.filter((m) => m.type === MessageType.ReadIndex && m.from === 'n3').length
    const rounds = () =>
      new Set(net.sent.filter((m) => m.type === MessageType.Heartbeat && m.context > 0).map((m) => m.context))
        .size
    // Five reads in one turn on a follower: one forwarded ReadIndex; at the leader, one round.
    const first = Array.from({ length: 5 }, () => n3.readIndex(1))
    // Past the bound on waiting reads (6), however many share a context.
    const sixth = n3.readIndex(1)
    await expect(n3.readIndex(1)).rejects.toThrow(/group 1 has 6 reads pending/)
    await net.run()
    await net.tickAll(1)
    for (const read of [...first, sixth]) expect(await read).toBeGreaterThanOrEqual(index)
    expect(forwarded()).toBe(1)
    expect(rounds()).toBe(1)
    // A read after the ask is not answered with the earlier context's index: it asks again.
    const q = n1.propose(1, enc.encode('x'))
    await net.run()
    const later = await q
    const again = n3.readIndex(1)
    await net.run()
    await net.tickAll(1)
    expect(await again).toBeGreaterThanOrEqual(later.index)
    expect(forwarded()).toBe(2)
    // On the leader too: four reads in one turn, one heartbeat round more.
    const onLeader = Array.from({ length: 4 }, () => n1.readIndex(1))
    await net.run()
    await net.tickAll(1)
    for (const read of onLeader) expect(await read).toBeGreaterThanOrEqual(later.index)
    expect(rounds()).toBe(3)
  })

  it('reads that come while a read index is being confirmed wait for it, then share the next one', async () => {
    const { net, nodes } = cluster([1], { proposalTimeoutTicks: 10_000 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const n3 = nodes.get('n3')!.host
    const forwarded = () => net.sent.filter((m) => m.type === MessageType.ReadIndex && m.from === 'n3').length
    const first = n3.readIndex(1)
    await n3.idle()
    expect(forwarded()).toBe(1)
    // Three reads, each in its own turn, while the first is unanswered: none is asked yet.
    const waiting: Promise<number>[] = []
    for (let i = 0; i < 3; i++) {
      waiting.push(n3.readIndex(1))
      await n3.idle()
    }
    expect(forwarded()).toBe(1)
    // The first is answered: the three ask once, together.
    await net.run()
    await net.tickAll(1)
    await first
    await Promise.all(waiting)
    expect(forwarded()).toBe(2)
    // A read index lost on the way (the leader cut off) holds the next reads 2 ticks at most.
    net.cut.add('n1')
    void n3.readIndex(1).catch(() => {})
    await n3.idle()
    const held = n3.readIndex(1)
    held.catch(() => {})
    await n3.idle()
    expect(forwarded()).toBe(3)
    await net.tickAll(1)
    expect(forwarded()).toBe(3)
    await net.tickAll(1)
    expect(forwarded()).toBe(4)
  })

  it("a late answer to a read of a replica's earlier incarnation resolves no read of the new one", async () => {
    const { net, nodes } = cluster([1], { proposalTimeoutTicks: 10_000 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const n3 = nodes.get('n3')!
    const forwarded = () => net.sent.filter((m) => m.type === MessageType.ReadIndex && m.from === 'n3')
    net.cut.add('n1') // the forwarded read goes unanswered
    void n3.host.readIndex(1).catch(() => {})
    await net.run()
    const old = forwarded()[0]
    expect(old).toBeDefined()
    // The replica goes and comes back (as after a restart), and asks again.
    n3.host.removeGroup(1)
    n3.host.addGroup({
      groupId: 1,
      raft: { id: 'n3', prng: new Prng(99), electionTicks: 10 },
      storage: n3.storages.get(1)!,
      stateMachine: n3.machines.get(1)!,
      limits: { proposalTimeoutTicks: 10_000 },
    })
    net.cut.delete('n1')
    await net.tickAll(2) // the new incarnation learns the leader
    net.cut.add('n1')
    let settled = false
    const read = n3.host.readIndex(1).finally(() => {
      settled = true
    })
    read.catch(() => {})
    await net.run()
    const now = forwarded().at(-1)!
    expect(now.requestCtx).not.toBe(old!.requestCtx)
    // The leader's late answer to the old read, with an index long passed: not taken for the new one.
    n3.host.receive(
      1,
      message({
        type: MessageType.ReadIndexResp,
        from: 'n1',
        to: 'n3',
        term: old!.term,
        index: 0,
        requestCtx: old!.requestCtx,
      }),
    )
    await net.run()
    expect(settled).toBe(false)
  })

  it('a Ready of a removed replica is neither applied nor sent when its group is added again before its flush', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    net.cut.add('n2')
    const a = n1.propose(1, enc.encode('a')) // committed with n3 alone
    await net.run()
    await a
    net.cut.delete('n2')
    const n2 = nodes.get('n2')!
    const old = n2.machines.get(1)!
    const open = n2.durability.hold()
    // n2 takes the entry and its commit, and its Ready (apply 'a', answer n1) waits for the flush.
    for (let round = 0; round < 10; round++) {
      n1.tick()
      await new Promise((r) => setImmediate(r))
      for (const { groupId, m } of net.queue.splice(0)) nodes.get(m.to)!.host.receive(groupId, m)
    }
    expect(n2.storages.get(1)!.lastIndex()).toBe(n1.status(1).commit)
    expect(old.items).toEqual([])
    // The replica goes and comes back (a new state machine, a new log) before that flush lands.
    n2.host.removeGroup(1)
    const fresh = new ListMachine()
    n2.host.addGroup({
      groupId: 1,
      raft: { id: 'n2', prng: new Prng(99), electionTicks: 10 },
      storage: new MemoryLogStorage(conf(['n1', 'n2', 'n3'])),
      stateMachine: fresh,
    })
    const since = net.sent.length
    open()
    await n2.host.idle()
    expect(old.items).toEqual([])
    expect(fresh.items).toEqual([])
    expect(net.sent.slice(since).filter((m) => m.from === 'n2')).toEqual([])
  })

  it('asks a new leader again for a follower’s read that the old one left unanswered (silent, then gone)', async () => {
    // Deadlines far away: the read must not finish by expiring.
    const { net, nodes } = cluster([1], { proposalTimeoutTicks: 10_000 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const p = n1.propose(1, enc.encode('w'))
    await net.run()
    const { index } = await p
    net.cut.add('n1') // silent: the ReadIndex that n3 forwards to it is never answered
    let settled = false
    const read = nodes
      .get('n3')!
      .host.readIndex(1)
      .finally(() => {
        settled = true
      })
    await net.tickAll(3)
    expect(settled).toBe(false)
    expect(nodes.get('n2')!.host.leaderGone('n1')).toEqual([1])
    expect(nodes.get('n3')!.host.leaderGone('n1')).toEqual([1])
    await net.tickAll(4) // n2 is elected; n3 learns it and asks n2
    expect(nodes.get('n3')!.host.status(1).lead).toBe('n2')
    await net.tickAll(2)
    expect(settled).toBe(true)
    expect(await read).toBeGreaterThanOrEqual(index)
  })

  it('compacts behind snapshots and catches a lagging follower up with one', async () => {
    const { net, nodes } = cluster([1], { compactEntries: 20, compactKeepEntries: 2 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    net.cut.add('n3')
    const ps = Array.from({ length: 60 }, (_, i) => n1.propose(1, enc.encode(`v${i}`)))
    await net.run()
    await Promise.all(ps)
    expect(nodes.get('n1')!.storages.get(1)!.firstIndex()).toBeGreaterThan(20)
    net.cut.clear()
    await net.tickAll(3)
    expect(net.sent.some((m) => m.type === MessageType.Snap && m.to === 'n3')).toBe(true)
    expect(nodes.get('n3')!.machines.get(1)!.items.length).toBe(60)
    expect(nodes.get('n3')!.storages.get(1)!.snapshot().meta.index).toBeGreaterThan(0)
  })

  it('snapshots, compacts and installs with a state machine that works asynchronously', async () => {
    const { net, nodes } = cluster(
      [1],
      { compactEntries: 20, compactKeepEntries: 2 },
      undefined,
      () => new AsyncListMachine(),
    )
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    net.cut.add('n3')
    const ps = Array.from({ length: 60 }, (_, i) => n1.propose(1, enc.encode(`v${i}`)))
    await net.run()
    const results = await Promise.all(ps.map(async (p) => (await p).result))
    expect(results).toEqual(Array.from({ length: 60 }, (_, i) => i + 1))
    const stored = nodes.get('n1')!.storages.get(1)!.snapshot()
    expect(stored.meta.index).toBeGreaterThan(20)
    // The image holds exactly the entries up to its index (none lost, none from later).
    const image = JSON.parse(dec.decode(stored.data)) as string[]
    expect(image).toEqual(Array.from({ length: image.length }, (_, i) => `v${i}`))
    net.cut.clear()
    await net.tickAll(3)
    await nodes.get('n3')!.host.idle()
    expect(net.sent.some((m) => m.type === MessageType.Snap && m.to === 'n3')).toBe(true)
    const n3 = nodes.get('n3')!.machines.get(1)!
    await n3.snapshot() // waits for its pending applies
    expect(n3.items).toEqual(Array.from({ length: 60 }, (_, i) => `v${i}`))
  })

  it("does not hold the other groups' work while one group's snapshot is being read", async () => {
    let release = (): void => {}
    const held = new Promise<void>((r) => {
      release = r
    })
    const asked: number[] = []
    /** Group 1's machine: its snapshot (the image of the entries so far) waits for `held`. */
    class SlowSnapshots extends ListMachine {
      override snapshot(): Promise<Uint8Array> {
        const image = super.snapshot()
        asked.push(this.items.length)
        return held.then(() => image)
      }
    }
    const machines: ListMachine[] = []
    const { net, nodes } = cluster([1, 2], { compactEntries: 20, compactKeepEntries: 2 }, ['n1'], () => {
      const m = machines.length === 0 ? new SlowSnapshots() : new ListMachine()
      machines.push(m)
      return m
    })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1, 2])
    await Promise.all(Array.from({ length: 30 }, (_, i) => n1.propose(1, enc.encode(`a${i}`))))
    // (Not net.run(): it waits for the host to be idle, and the snapshot is held.)
    expect(asked).toHaveLength(1) // one snapshot at a time, however many entries pass meanwhile
    const storage = nodes.get('n1')!.storages.get(1)!
    expect(storage.firstIndex()).toBe(1)
    // Group 2 (and group 1's own proposals) go on while the image is read.
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => n1.propose(2, enc.encode(`b${i}`))),
    )
    expect(results.at(-1)?.result).toBe(30)
    expect((await n1.propose(1, enc.encode('a30'))).result).toBe(31)
    release()
    await held
    await n1.idle()
    const image = JSON.parse(dec.decode(storage.snapshot().data)) as string[]
    expect(image).toHaveLength(asked[0] as number) // exactly the state of the index it is labelled with
    expect(storage.snapshot().meta.index).toBeGreaterThanOrEqual(image.length)
    expect(storage.firstIndex()).toBeGreaterThan(1)
  })

  it("installs a snapshot without holding the node's other groups", async () => {
    let release = (): void => {}
    const held = new Promise<void>((r) => {
      release = r
    })
    let restoring = false
    /** n3's machine of group 1: its restore waits for `held`. */
    class SlowRestore extends AsyncListMachine {
      override async restore(s: Snapshot): Promise<void> {
        restoring = true
        await held
        await super.restore(s)
      }
    }
    let made = 0
    // Machines are made node by node, group by group: the fifth is n3's of group 1.
    const { net, nodes } = cluster([1, 2], { compactEntries: 20, compactKeepEntries: 2 }, undefined, () =>
      ++made === 5 ? new SlowRestore() : new ListMachine(),
    )
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1, 2])
    net.cut.add('n3')
    const first = Array.from({ length: 60 }, (_, i) => n1.propose(1, enc.encode(`a${i}`)))
    await net.run()
    await Promise.all(first)
    net.cut.clear()
    const n3 = nodes.get('n3')!
    // Deliver and tick by hand (Net.run waits for every host to be idle, and n3 is not).
    const pump = async (until: () => boolean) => {
      for (let round = 0; round < 500 && !until(); round++) {
        await new Promise((r) => setImmediate(r))
        if (round % 5 === 0) for (const h of net.hosts.values()) h.tick()
        for (const { groupId, m } of net.queue.splice(0)) net.hosts.get(m.to)?.receive(groupId, m)
      }
    }
    await pump(() => restoring)
    expect(restoring).toBe(true)
    const ps = Array.from({ length: 10 }, (_, i) => n1.propose(2, enc.encode(`b${i}`)))
    await pump(() => n3.machines.get(2)!.items.length === 10)
    // Group 2 committed and applied on n3 while its group 1 was restoring.
    expect(n3.machines.get(2)!.items).toEqual(Array.from({ length: 10 }, (_, i) => `b${i}`))
    expect(n3.machines.get(1)!.items).toEqual([])
    release()
    await net.run()
    await Promise.all(ps)
    const n3g1 = n3.machines.get(1)!
    await n3g1.snapshot() // waits for its pending applies
    expect(n3g1.items).toEqual(Array.from({ length: 60 }, (_, i) => `a${i}`))
    // The group goes on normally after the install.
    await proposeAndSpread(net, n1, 1, 'a60')
    await n3g1.snapshot()
    expect(n3g1.items.at(-1)).toBe('a60')
  })

  it('goes on when a snapshot is too large for the storage, and compacts once one fits', async () => {
    /** A storage that keeps snapshots of at most 60 bytes (the list of up to ~10 items). */
    class SmallSnapshots extends MemoryLogStorage {
      override compact(snapshot: Snapshot, compactIndex: number): void {
        if (snapshot.data.length > 60) throw new SnapshotTooLargeError(`${snapshot.data.length} bytes`)
        super.compact(snapshot, compactIndex)
      }
    }
    /** Its state: the items applied, less those a 'clear' entry dropped. */
    class Clearing extends ListMachine {
      override apply(entries: readonly Entry[]): readonly unknown[] {
        return entries.map((e) => {
          if (e.type === EntryType.Normal && dec.decode(e.data) === 'clear') this.items = []
          else super.apply([e])
          return this.items.length
        })
      }
    }
    const storage = new SmallSnapshots(conf(['n1']))
    const tooLarge: GroupId[] = []
    const host = soloHost(storage, { onSnapshotTooLarge: (groupId) => tooLarge.push(groupId) })
    host.addGroup({
      groupId: 1,
      raft: { id: 'n1', prng: new Prng(3), electionTicks: 10 },
      storage,
      stateMachine: new Clearing(),
      limits: { compactEntries: 20, compactKeepEntries: 2 },
    })
    host.campaign(1)
    await host.idle()
    for (let i = 0; i < 30; i++) await host.propose(1, enc.encode(`item-${i}`))
    await host.idle()
    // Past 20 entries the image (~30 items) is too large: not fatal, the log stays whole.
    expect(tooLarge).toEqual([1])
    expect(host.stats.snapshotsTooLarge).toBe(1)
    expect(storage.firstIndex()).toBe(1)
    // The state shrinks; after another 20 entries the next snapshot fits and the log is compacted.
    await host.propose(1, enc.encode('clear'))
    for (let i = 0; i < 18; i++) await host.propose(1, enc.encode(`x${i}`))
    await host.idle()
    expect(host.stats.snapshotsTooLarge).toBe(1)
    expect(storage.firstIndex()).toBeGreaterThan(1)
    expect((await host.propose(1, enc.encode('after'))).result).toBeGreaterThan(0)
  })

  it('with snapshots on demand, compacts without an image and makes one only for a lagging follower', async () => {
    const { net, nodes } = await laggingOnDemand(60)
    const n1 = nodes.get('n1')!
    const storage = n1.storages.get(1)!
    const leaderMachine = n1.machines.get(1) as DurableListMachine
    // Compacted by the entry count, recording metadata only: no image taken.
    expect(storage.firstIndex()).toBeGreaterThan(20)
    expect(storage.snapshot().meta.index).toBeGreaterThan(20)
    expect(storage.snapshot().data.length).toBe(0)
    expect(leaderMachine.images.length).toBe(0)
    // n3 comes back: the leader makes one image (however many heartbeats' replies ask for it
    // while it is being read), records it, and sends it.
    let release = (): void => {}
    leaderMachine.hold = new Promise<void>((r) => {
      release = r
    })
    net.cut.clear()
    for (let round = 0; round < 60; round++) {
      await new Promise((r) => setImmediate(r))
      if (round % 3 === 0) for (const h of net.hosts.values()) h.tick()
      for (const { groupId, m } of net.queue.splice(0)) net.hosts.get(m.to)?.receive(groupId, m)
    }
    expect(leaderMachine.images.length).toBe(1)
    release()
    for (let i = 0; i < 5; i++) {
      await net.tickAll(1)
      await n1.host.idle()
    }
    await nodes.get('n3')!.host.idle()
    expect(leaderMachine.images.length).toBe(1)
    expect(n1.host.stats.imagesOnDemand).toBe(1)
    expect(storage.snapshot().data.length).toBeGreaterThan(0)
    expect(net.sent.some((m) => m.type === MessageType.Snap && m.to === 'n3')).toBe(true)
    const n3 = nodes.get('n3')!.machines.get(1)!
    await n3.snapshot()
    expect(n3.items).toEqual(Array.from({ length: 60 }, (_, i) => `v${i}`))
    // The group goes on; the follower keeps up from the log again.
    await proposeAndSpread(net, n1.host, 1, 'v60')
    await n3.snapshot()
    expect(n3.items.at(-1)).toBe('v60')
  })

  it('a snapshot restored while a compaction waits for persisted(): the compaction, recorded later, leaves the count of entries applied since', async () => {
    const { net, nodes } = await electedOnDemand()
    const n1 = nodes.get('n1')!
    const n3 = nodes.get('n3')!
    // n3's state machine persists nothing for now: its compaction at 20 entries waits.
    let release = (): void => {}
    ;(n3.machines.get(1) as DurableListMachine).persistHold = new Promise<void>((r) => {
      release = r
    })
    net.halted.add('n3') // still sent messages, but not awaited
    let v = 0
    const propose = async (count: number): Promise<void> => {
      const ps = Array.from({ length: count }, () => n1.host.propose(1, enc.encode(`v${v++}`)))
      await net.run()
      await Promise.all(ps)
      await net.tickAll(1)
    }
    await propose(25)
    // Cut off, n3 falls behind the leader's compactions; back, it restores the leader's image.
    net.cut.add('n3')
    await propose(60)
    net.cut.delete('n3')
    await net.tickAll(3)
    await propose(3)
    // n3 restores the image (in the background: not awaited while halted) and applies the rest.
    const leaderApplied = n1.host.status(1).applied
    for (let i = 0; i < 1_000 && n3.host.status(1).applied < leaderApplied; i++)
      await new Promise((r) => setImmediate(r))
    const storage = n3.storages.get(1)!
    expect(storage.snapshot().meta.index).toBeGreaterThan(25)
    const held = (): number =>
      storage
        .entries(storage.firstIndex(), n3.host.status(1).applied + 1, Number.MAX_SAFE_INTEGER)
        .reduce((n, e) => n + e.data.length, 0)
    expect(held()).toBeGreaterThan(0)
    expect(n3.host.appliedLogBytes(1)).toBe(held())
    // The old compaction goes on now; the image replaced the log it was for.
    release()
    net.halted.delete('n3')
    await n3.host.idle()
    expect(n3.host.appliedLogBytes(1)).toBe(held())
  })

  it('refreshImage: an image the follower cannot fetch is replaced, and the follower gets the new one', async () => {
    const { net, nodes } = await laggingOnDemand(40)
    net.cut.clear()
    const n1 = nodes.get('n1')!.host
    const images = (nodes.get('n1')!.machines.get(1) as DurableListMachine).images
    // n3 takes no Snap for now (as if it could not fetch the image the handle names).
    const snapsTo3: Message[] = []
    const rounds = async (count: number, letSnapsThrough: boolean): Promise<void> => {
      for (let i = 0; i < count; i++) {
        const snaps = await net.snapRound(n1, (_g, m) => m.to !== 'n3' || letSnapsThrough)
        snapsTo3.push(...snaps.filter((m) => m.to === 'n3'))
      }
    }
    await rounds(4, false)
    expect(images.length).toBe(1)
    expect(snapsTo3.length).toBeGreaterThan(0)
    expect(snapsTo3.every((m) => m.snapshot!.data.buffer === images[0]!.buffer)).toBe(true)
    n1.refreshImage(1, 'n3')
    snapsTo3.length = 0
    await rounds(6, true)
    expect(images.length).toBe(2)
    expect(n1.stats.imagesOnDemand).toBe(2)
    // Only the new image went out after the refresh, and n3 installed it.
    expect(snapsTo3.length).toBeGreaterThan(0)
    expect(snapsTo3.every((m) => m.snapshot!.data.buffer === images[1]!.buffer)).toBe(true)
    await nodes.get('n3')!.host.idle()
    const n3 = nodes.get('n3')!.machines.get(1)!
    await n3.snapshot()
    expect(n3.items).toEqual(Array.from({ length: 40 }, (_, i) => `v${i}`))
  })

  it('a follower refusing a snapshot stops the transfer until a later heartbeat’s reply, not in a tight loop', async () => {
    const { net, nodes } = await laggingOnDemand(40)
    net.cut.clear()
    const n1 = nodes.get('n1')!.host
    // n3 refuses every Snap (as it does one above its snapshotBytesMax); n2 behaves.
    const refuse = (groupId: GroupId, m: Message): boolean => {
      if (m.to !== 'n3') return true
      n1.receive(
        groupId,
        message({
          type: MessageType.SnapResp,
          from: 'n3',
          to: 'n1',
          term: m.term,
          index: m.snapshot!.meta.index,
          context: 0,
          reject: true,
        }),
      )
      return false
    }
    const perRound: number[] = []
    for (let i = 0; i < 8; i++)
      perRound.push((await net.snapRound(n1, refuse)).filter((m) => m.to === 'n3').length)
    const refusals = perRound.reduce((a, b) => a + b, 0)
    // At most one Snap per heartbeat round (before: each refusal was answered by the next chunk at once).
    expect(refusals).toBeGreaterThan(2)
    expect(Math.max(...perRound)).toBe(1)
  })

  it('with snapshots on demand, compacts by bytes too, keeping about a tenth of them', async () => {
    const storage = new MemoryLogStorage(conf(['n1']))
    const machine = new ListMachine()
    const host = soloHost(storage)
    host.addGroup({
      groupId: 1,
      raft: { id: 'n1', prng: new Prng(5), electionTicks: 10 },
      storage,
      stateMachine: Object.assign(machine, { persisted: async () => {} }),
      appliedIndex: 0,
      snapshotsOnDemand: true,
      limits: { compactEntries: 1_000_000, compactBytes: 1_000, compactKeepEntries: 50 },
    })
    host.campaign(1)
    await host.idle()
    let tailMax = 0
    for (let i = 0; i < 100; i++) {
      await host.propose(1, enc.encode('x'.repeat(100)))
      await host.idle()
      tailMax = Math.max(tailMax, storage.lastIndex() - storage.firstIndex() + 1)
    }
    // ~10 entries of 100 bytes per compaction, one kept (a tenth of 1,000 bytes).
    expect(storage.firstIndex()).toBeGreaterThan(80)
    expect(tailMax).toBeLessThanOrEqual(12)
    expect(storage.snapshot().data.length).toBe(0)
  })

  /**
   * Three single-replica groups with snapshots on demand whose own thresholds never compact;
   * `restartFrom`: on those logs (a restart: each group applied to its last index, no campaign);
   * `persisted`: the state machines' (by default at once).
   */
  function threeGroups(
    options: Partial<HostOptions>,
    restartFrom?: MemoryLogStorage[],
    persisted: () => Promise<void> = async () => {},
  ): { host: RaftHost; storages: MemoryLogStorage[] } {
    const storages = restartFrom ?? [1, 2, 3].map(() => new MemoryLogStorage(conf(['n1'])))
    const host = new RaftHost({
      transport: { send: () => {} },
      durability: {
        flush: async () => {
          for (const s of storages) s.sync()
        },
      },
      clock: { nowMs: () => 0 },
      ...options,
    })
    storages.forEach((storage, i) => {
      host.addGroup({
        groupId: i + 1,
        raft: { id: 'n1', prng: new Prng(11 + i), electionTicks: 10 },
        storage,
        stateMachine: Object.assign(new ListMachine(), { persisted }),
        appliedIndex: restartFrom ? storage.lastIndex() : 0,
        snapshotsOnDemand: true,
        limits: { compactEntries: 1_000_000, compactBytes: 5_000, compactKeepEntries: 1 },
      })
      if (!restartFrom) host.campaign(i + 1)
    })
    return { host, storages }
  }

  async function fill(host: RaftHost, groupId: GroupId, entries: number): Promise<void> {
    for (let i = 0; i < entries; i++) await host.propose(groupId, enc.encode('x'.repeat(100)))
    await host.idle()
  }

  const tail = (s: MemoryLogStorage): number => s.lastIndex() - s.firstIndex() + 1

  it('bounds the applied entries all groups hold together (logBytesMax): a tick compacts the one holding the most, an idle one too', async () => {
    const { host, storages } = threeGroups({ logBytesMax: 3_000 })
    await host.idle()
    await fill(host, 1, 20) // 2,000 bytes, then idle
    await fill(host, 2, 15) // 1,500: 3,500 in all
    const before = storages.map(tail)
    host.tick()
    await host.idle()
    // Group 1 held the most; its own threshold (5,000 bytes) would not have compacted it.
    expect(tail(storages[0]!)).toBeLessThan(3)
    expect(storages.slice(1).map(tail)).toEqual(before.slice(1))
    expect(host.stats.logBoundCompactions).toBe(1)
    // Under the bound now: more ticks compact nothing.
    for (let i = 0; i < 5; i++) host.tick()
    await host.idle()
    expect(host.stats.logBoundCompactions).toBe(1)
    // Past it again, by entries into group 3 (1,200 bytes) and group 2 (now 1,800): group 2
    // holds the most and is compacted, not the group that took the latest entries.
    await fill(host, 3, 12)
    await fill(host, 2, 3)
    host.tick()
    await host.idle()
    expect(tail(storages[2]!)).toBeGreaterThan(12)
    expect(tail(storages[1]!)).toBeLessThan(3)
    expect(host.stats.logBoundCompactions).toBe(2)
  })

  it('passes over a group whose compaction would free little (one large entry), instead of compacting it every tick', async () => {
    const { host, storages } = threeGroups({ logBytesMax: 3_000 })
    await host.idle()
    await host.propose(1, enc.encode('x'.repeat(3_000))) // kept whole by a compaction (its last entry)
    await host.idle()
    await fill(host, 2, 15) // 1,500: 4,500 in all
    const before = storages.map(tail)
    for (let i = 0; i < 5; i++) host.tick()
    await host.idle()
    // Group 2 was compacted once; group 1, the largest, never (it would have freed nothing).
    expect(tail(storages[0]!)).toBe(before[0])
    expect(tail(storages[1]!)).toBeLessThan(3)
    expect(host.stats.logBoundCompactions).toBe(1)
  })

  it('does not count what a compaction under way will free: a slow persisted() starts no second one the bound does not need', async () => {
    let release = (): void => {}
    let slow = false
    const gate = (): Promise<void> =>
      slow ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve()
    const { host, storages } = threeGroups({ logBytesMax: 3_000 }, undefined, gate)
    await host.idle()
    await fill(host, 1, 20) // 2,000 bytes
    await fill(host, 2, 15) // 1,500: 3,500 in all
    slow = true
    host.tick() // group 1's compaction starts and waits for its state machine
    expect(host.stats.logBoundCompactions).toBe(1)
    // Its 20 entries (and its first, configuration entry).
    expect(host.appliedLogBytes(1)).toBeGreaterThanOrEqual(2_000)
    const group2Bytes = host.appliedLogBytes(2)
    // Once group 1's ~1,900 bytes are freed, 1,600 remain: group 2 needs no compaction.
    for (let i = 0; i < 5; i++) host.tick()
    expect(host.stats.logBoundCompactions).toBe(1)
    release()
    await host.idle()
    expect(tail(storages[0]!)).toBeLessThan(3)
    expect(tail(storages[1]!)).toBeGreaterThan(15)
    expect(host.appliedLogBytes(1)).toBeLessThanOrEqual(200)
    expect(host.appliedLogBytes(2)).toBe(group2Bytes)
  })

  it('counts the applied tail a restarted replica holds again, so the bound compacts it though idle', async () => {
    const first = threeGroups({ logBytesMax: 100_000 })
    await first.host.idle()
    await fill(first.host, 1, 20)
    await fill(first.host, 2, 20)
    await first.host.stop()
    // The same logs under a new host with a bound they exceed: no entry is proposed.
    const { host } = threeGroups({ logBytesMax: 3_000 }, first.storages)
    host.tick()
    await host.idle()
    expect(host.stats.logBoundCompactions).toBe(1)
    expect(tail(first.storages[0]!)).toBeLessThan(3)
  })

  it('leaves each group to its own thresholds with logBytesMax Infinity, and refuses a bound that is not a positive integer', async () => {
    const { host, storages } = threeGroups({ logBytesMax: Infinity })
    await host.idle()
    await fill(host, 1, 20)
    await fill(host, 2, 20)
    for (let i = 0; i < 5; i++) host.tick()
    await host.idle()
    expect(
      storages
        .map(tail)
        .slice(0, 2)
        .every((n) => n > 20),
    ).toBe(true)
    expect(host.stats.logBoundCompactions).toBe(0)
    for (const bad of [0, -1, 1.5, Number.NaN]) {
      expect(() => threeGroups({ logBytesMax: bad })).toThrow(
        /logBytesMax must be a positive integer or Infinity/,
      )
    }
  })

  it('refuses snapshots on demand without persisted() and an appliedIndex', () => {
    const storage = new MemoryLogStorage(conf(['n1']))
    const host = soloHost(storage)
    expect(() =>
      host.addGroup({
        groupId: 1,
        raft: { id: 'n1', prng: new Prng(1) },
        storage,
        stateMachine: new ListMachine(),
        snapshotsOnDemand: true,
      }),
    ).toThrow(/persisted\(\) and its appliedIndex/)
  })

  it('refuses a state machine that would restore asynchronously when its group is added', () => {
    const storage = new MemoryLogStorage(conf(['n1']))
    storage.applySnapshot({ meta: { index: 5, term: 1, conf: conf(['n1']) }, data: enc.encode('[]') })
    const host = soloHost(storage)
    expect(() =>
      host.addGroup({
        groupId: 1,
        raft: { id: 'n1', prng: new Prng(1) },
        storage,
        stateMachine: new AsyncListMachine(),
      }),
    ).toThrow(/restores asynchronously; pass its appliedIndex/)
  })

  it('fails a proposal that is not applied in time with a retriable ProposalDroppedError', async () => {
    const { net, nodes } = cluster([1], { proposalTimeoutTicks: 5 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    net.cut.add('n2')
    net.cut.add('n3')
    const p = n1.propose(1, enc.encode('stuck')).catch((e: unknown) => e)
    await net.tickAll(6)
    const err = await p
    expect(err).toBeInstanceOf(ProposalDroppedError)
    expect((err as ProposalDroppedError).retriable).toBe(true)
  })

  it('fails an appended proposal that times out after its leader stepped down as outcome unknown, not NotLeaderError', async () => {
    // A majority may have stored and, under a new leader, committed it: "not the leader"
    // would tell a client it was not stored, and a plain producer would send it again.
    const { net, nodes } = cluster([1], { proposalTimeoutTicks: 40 })
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const p = n1.propose(1, enc.encode('x')).catch((e: unknown) => e)
    await n1.idle()
    // Its App reaches n2 and n3, which store it; their answers are lost; then n1 is cut off.
    for (const { groupId, m } of net.queue.splice(0)) net.hosts.get(m.to)?.receive(groupId, m)
    for (const id of ['n2', 'n3']) await net.hosts.get(id)!.idle()
    net.queue.splice(0)
    net.cut.add('n1')
    await net.tickAll(60)
    expect(nodes.get('n2')!.machines.get(1)!.items).toEqual(['x'])
    expect(n1.status(1).role).not.toBe(Role.Leader)
    const err = await p
    expect(err).toBeInstanceOf(ProposalDroppedError)
    expect((err as Error).message).toMatch(/outcome unknown/)
  })

  it('stops on a storage failure: pending work fails and later calls get HostStoppedError', async () => {
    let fatal: unknown = null
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!
    await electAll(net, n1.host, [1])
    const host = new RaftHost({
      transport: net.transport(),
      durability: {
        flush: () => Promise.reject(new Error('disk on fire')),
      },
      clock: { nowMs: () => 0 },
      onFatal: (e) => {
        fatal = e
      },
    })
    host.addGroup({
      groupId: 9,
      raft: { id: 'solo', prng: new Prng(1) },
      storage: new MemoryLogStorage(conf(['solo'])),
      stateMachine: new ListMachine(),
    })
    host.campaign(9)
    await expect(host.idle()).rejects.toThrow('disk on fire')
    expect(fatal).toBeInstanceOf(Error)
    await expect(host.propose(9, enc.encode('x'))).rejects.toBeInstanceOf(HostStoppedError)
  })

  it('halt: a replica whose state machine failed takes no part any more, even when handed the leadership', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    await proposeAndSpread(net, n1, 1, 'a')
    const n2 = nodes.get('n2')!
    const failure = new Error('state machine write failed')
    n2.host.halt(failure)
    net.halted.add('n2')
    const logEnd = n2.storages.get(1)!.lastIndex()
    await expect(n2.host.propose(1, enc.encode('x'))).rejects.toBeInstanceOf(HostStoppedError)
    expect(() => n2.host.tick()).toThrow(HostStoppedError)
    // The leader hands over to n2: n2 ignores it, and n1 goes on leading after the transfer times out.
    n1.transferLeader(1, 'n2')
    await net.tickAll(30)
    expect(n1.status(1).role).toBe(Role.Leader)
    await proposeAndSpread(net, n1, 1, 'b')
    expect(nodes.get('n3')!.machines.get(1)!.items).toEqual(['a', 'b'])
    // n2 acknowledged nothing, stored nothing and applied nothing after the halt.
    expect(n2.storages.get(1)!.lastIndex()).toBe(logEnd)
    expect(n2.machines.get(1)!.items).toEqual(['a'])
    await expect(n2.host.idle()).rejects.toBe(failure)
  })

  it('halt: a flush that lands after the halt sends nothing and applies nothing', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    await proposeAndSpread(net, n1, 1, 'a')
    const n2 = nodes.get('n2')!
    const open = n2.durability.hold()
    const p = n1.propose(1, enc.encode('b')).catch((e: unknown) => e)
    // n3 acknowledges 'b' and n1 commits it; then n2 gets the append and the commit together:
    // one Ready stores, acknowledges and applies 'b', and waits for the held flush.
    const toN2: { groupId: GroupId; m: Message }[] = []
    for (let round = 0; round < 10; round++) {
      await new Promise((r) => setImmediate(r))
      for (const q of net.queue.splice(0)) {
        if (q.m.to === 'n2') toN2.push(q)
        else net.hosts.get(q.m.to)!.receive(q.groupId, q.m)
      }
    }
    expect(n1.status(1).commit).toBe(n2.host.status(1).commit + 1)
    for (const { groupId, m } of toN2) n2.host.receive(groupId, m)
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r))
    expect(n2.host.status(1).commit).toBe(n1.status(1).commit)
    const failure = new Error('state machine write failed')
    n2.host.halt(failure)
    net.halted.add('n2')
    const before = net.sent.length
    open()
    await expect(n2.host.idle()).rejects.toBe(failure)
    // n2 neither acknowledged the append nor applied 'b'.
    const sent = net.sent.slice(before).filter((m) => m.from === 'n2')
    expect({ sent: sent.map((m) => m.type), items: n2.machines.get(1)!.items }).toEqual({
      sent: [],
      items: ['a'],
    })
    await net.run()
    expect(await p).toEqual({ index: n1.status(1).commit, result: 2 })
  })

  it('halt: a run already scheduled takes no Ready (a leader neither stores nor sends the proposal)', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    await proposeAndSpread(net, n1, 1, 'a')
    const ends = [...nodes.values()].map((n) => n.storages.get(1)!.lastIndex())
    const p = n1.propose(1, enc.encode('x')).catch((e: unknown) => e) // schedules a run
    n1.halt(new Error('state machine write failed')) // before that run's first cycle
    net.halted.add('n1')
    await net.run()
    await net.tickAll(2)
    expect(await p).toBeInstanceOf(Error)
    expect([...nodes.values()].map((n) => n.storages.get(1)!.lastIndex())).toEqual(ends)
  })

  it('restarts a group from durable storage and re-applies its committed log', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const ps = ['a', 'b', 'c'].map((x) => n1.propose(1, enc.encode(x)))
    await net.run()
    await Promise.all(ps)
    await net.tickAll(2)
    const n2 = nodes.get('n2')!
    n2.host.removeGroup(1)
    const storage = n2.storages.get(1)!
    storage.crash()
    const machine = new ListMachine()
    n2.host.addGroup({ groupId: 1, raft: { id: 'n2', prng: new Prng(99) }, storage, stateMachine: machine })
    await net.tickAll(3)
    expect(machine.items).toEqual(['a', 'b', 'c'])
  })

  it('resumes a persistent state machine from its own applied index without re-applying', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const ps = ['a', 'b'].map((x) => n1.propose(1, enc.encode(x)))
    await net.run()
    await Promise.all(ps)
    await net.tickAll(2)
    const n2 = nodes.get('n2')!
    const applied = n2.host.status(1).applied
    n2.host.removeGroup(1)
    const machine = new ListMachine()
    machine.items = [...n2.machines.get(1)!.items]
    n2.host.addGroup({
      groupId: 1,
      raft: { id: 'n2', prng: new Prng(7) },
      storage: n2.storages.get(1)!,
      stateMachine: machine,
      appliedIndex: applied,
    })
    const p = n1.propose(1, enc.encode('c'))
    await net.run()
    await p
    await net.tickAll(2)
    expect(machine.items).toEqual(['a', 'b', 'c'])
  })

  it('retries writes the storage refuses with a retriable error (its back-pressure), losing nothing', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!
    await electAll(net, n1.host, [1])
    const inner = n1.storages.get(1)!
    let refusals = 3
    const original = inner.append.bind(inner)
    inner.append = (entries) => {
      if (refusals > 0) {
        refusals--
        // raft-core's own error, or the storage package's (kv-storage's is no RaftError).
        if (refusals % 2 === 0) throw new OverloadedError('group commit queue is full')
        throw Object.assign(new Error('group commit staging queue is full'), { retriable: true })
      }
      original(entries)
    }
    const ps = ['a', 'b', 'c'].map((x) => n1.host.propose(1, enc.encode(x)))
    await net.run()
    const results = await Promise.all(ps)
    expect(results.map((r) => r.result)).toEqual([1, 2, 3])
    expect(n1.host.stats.stalledWrites).toBe(3)
    await net.tickAll(2)
    for (const n of nodes.values()) expect(n.machines.get(1)!.items).toEqual(['a', 'b', 'c'])
  })

  it('elects a new leader within a few ticks once a quorum of followers learns the leader is gone', async () => {
    const { net, nodes } = cluster([1, 2])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1, 2])
    const term = n1.status(1).term
    net.cut.add('n1') // its process died: nothing more from or to it
    expect(nodes.get('n2')!.host.leaderGone('n1')).toEqual([1, 2])
    expect(nodes.get('n3')!.host.leaderGone('n1')).toEqual([1, 2])
    expect(nodes.get('n2')!.host.status(1).lead).toBe('')
    await net.tickAll(3) // far below the election timeout (10 ticks)
    for (const g of [1, 2]) {
      const s2 = nodes.get('n2')!.host.status(g)
      expect(s2.lead).toBe('n2') // the first remaining voter by id campaigned first
      expect(s2.term).toBe(term + 1)
      expect(nodes.get('n3')!.host.status(g).lead).toBe('n2')
    }
  })

  it('a lone follower that wrongly believes the leader gone disturbs nobody', async () => {
    const { net, nodes } = cluster([1])
    const n1 = nodes.get('n1')!.host
    await electAll(net, n1, [1])
    const term = n1.status(1).term
    expect(nodes.get('n2')!.host.leaderGone('n1')).toEqual([1])
    expect(nodes.get('n2')!.host.leaderGone('n3')).toEqual([]) // n3 leads nothing
    await net.tickAll(4)
    for (const id of ['n1', 'n2', 'n3']) {
      expect(nodes.get(id)!.host.status(1)).toMatchObject({ lead: 'n1', term })
    }
    const p = n1.propose(1, enc.encode('still-leading'))
    await net.run()
    expect(await p).toMatchObject({ result: 1 })
  })
})
