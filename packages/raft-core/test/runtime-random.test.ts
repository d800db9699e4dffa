/**
 * Randomized runs of three RaftHosts (two groups each) over a lossy in-memory network with
 * crashes: whatever a proposal's outcome, every resolved proposal is applied at its index on
 * every replica, and all replicas of a group end with the same state. Seeded; no sleeps. The
 * second mode runs the groups with snapshots on demand (a state machine that keeps its own
 * state, written lazily with some of the log's flushes, as mq's data groups do) under tiny
 * per-group and host-wide log bounds, so that compactions by bytes and by the host's bound
 * happen all the time, between crashes and lost messages.
 */
import { describe, expect, it } from 'vitest'
import {
  type GroupId,
  MemoryDurability,
  MemoryLogStorage,
  type Message,
  Prng,
  RaftError,
  RaftHost,
} from '../src/index'
import { conf, expectReplicasAgree, ListMachine, shuffle } from './harness'

const enc = new TextEncoder()

/**
 * A Log that keeps its state "durably", lazily (as mq's data groups do): some of its host's
 * flushes write its state too, and `persisted()` flushes with it; a crash leaves the state
 * of the last such flush, which may be older than the log's.
 */
class DurableLog extends ListMachine {
  #durable: { items: string[]; applied: number }
  constructor(
    readonly flush: (withMachines: boolean) => Promise<void>,
    from = { items: [] as string[], applied: 0 },
  ) {
    super()
    this.items = [...from.items]
    this.applied = from.applied
    this.#durable = { items: [...from.items], applied: from.applied }
  }
  persisted(): Promise<void> {
    return this.flush(true)
  }
  sync(): void {
    this.#durable = { items: [...this.items], applied: this.applied }
  }
  /** The state a crash leaves. */
  durable(): { items: string[]; applied: number } {
    return this.#durable
  }
}

async function runSeed(
  seed: number,
  onDemand = false,
): Promise<{ resolved: number; boundCompactions: number; images: number }> {
  const p = new Prng(seed)
  const ids = ['n1', 'n2', 'n3']
  const groups: GroupId[] = [1, 2]
  const queue: { groupId: GroupId; m: Message }[] = []
  const hosts = new Map<string, RaftHost>()
  const machines = new Map<string, ListMachine>()
  const storages = new Map<string, MemoryLogStorage>()
  const durabilities = new Map<string, MemoryDurability>()
  const dropRate = p.float() * 0.2
  const startGroup = (id: string, g: GroupId): void => {
    const key = `${id}/${g}`
    const storage = storages.get(key) ?? new MemoryLogStorage(conf(ids))
    storages.set(key, storage)
    durabilities.get(id)!.register(storage)
    const before = machines.get(key)
    const machine = onDemand
      ? new DurableLog(
          (all) => flushOf(id, all)(),
          before instanceof DurableLog ? before.durable() : undefined,
        )
      : new ListMachine()
    machines.set(key, machine)
    hosts.get(id)!.addGroup({
      groupId: g,
      raft: { id, prng: new Prng(p.nextU32()), electionTicks: 8 },
      storage,
      stateMachine: machine,
      limits: {
        compactEntries: 30,
        compactKeepEntries: p.below(5),
        proposalTimeoutTicks: 30,
        // Entries are ~10 bytes: compacting by bytes every ~30 entries, and (below) by the
        // host's bound whenever a group holds more than a fifth of that.
        compactBytes: 300,
      },
      ...(machine instanceof DurableLog ? { snapshotsOnDemand: true, appliedIndex: machine.applied } : {}),
    })
  }
  /** One flush of node `id`: its logs, and its state machines' state in some (or `withMachines`). */
  const flushOf =
    (id: string, withMachines = false) =>
    async (): Promise<void> => {
      await durabilities.get(id)!.flush()
      if (!withMachines && !p.chance(0.3)) return
      for (const g of groups) {
        const m = machines.get(`${id}/${g}`)
        if (m instanceof DurableLog) m.sync()
      }
    }
  for (const id of ids) {
    const durability = new MemoryDurability()
    durabilities.set(id, durability)
    hosts.set(
      id,
      new RaftHost({
        transport: {
          send: (groupId, messages) => {
            for (const m of messages)
              if (!p.chance(dropRate) && queue.length < 50_000) queue.push({ groupId, m })
          },
        },
        durability: { flush: flushOf(id) },
        clock: { nowMs: () => 0 },
        ...(onDemand ? { logBytesMax: 100 } : {}),
      }),
    )
    for (const g of groups) startGroup(id, g)
  }
  const resolved: { g: GroupId; index: number; result: unknown; data: string }[] = []
  const pending: Promise<void>[] = []
  let n = 0
  /**
   * What each replica counts towards the host's bound is what its log holds of applied
   * entries, whatever compactions, restarts and received snapshots came before (checked idle).
   */
  const checkAppliedBytes = async (): Promise<void> => {
    for (const h of hosts.values()) await h.idle()
    for (const id of ids) {
      for (const g of groups) {
        const storage = storages.get(`${id}/${g}`)!
        const applied = (machines.get(`${id}/${g}`) as DurableLog).applied
        const held = storage
          .entries(storage.firstIndex(), applied + 1, Number.MAX_SAFE_INTEGER)
          .reduce((n, e) => n + e.data.length, 0)
        expect(hosts.get(id)!.appliedLogBytes(g), `${id}/${g}`).toBe(held)
      }
    }
  }
  const step = async (faults: boolean, proposals = 3): Promise<void> => {
    for (const h of hosts.values()) h.tick()
    if (faults && p.chance(0.02)) {
      // Crash one group replica: unsynced writes are lost, it restarts from storage.
      const id = ids[p.below(3)]!
      const g = groups[p.below(2)]!
      hosts.get(id)!.removeGroup(g)
      storages.get(`${id}/${g}`)!.crash()
      startGroup(id, g)
    }
    for (let k = 0; k < proposals; k++) {
      const id = ids[p.below(3)]!
      const g = groups[p.below(2)]!
      const data = `s${seed}-${n++}`
      pending.push(
        hosts
          .get(id)!
          .propose(g, enc.encode(data))
          .then(
            (a) => {
              resolved.push({ g, index: a.index, result: a.result, data })
            },
            (e: unknown) => {
              if (!(e instanceof RaftError)) throw e
            },
          ),
      )
    }
    for (let round = 0; round < 20; round++) {
      for (const h of hosts.values()) await h.idle()
      if (queue.length === 0) break
      const batch = queue.splice(0)
      // Reorder a little: deliver in a shuffled order.
      shuffle(p, batch)
      for (const { groupId, m } of batch) hosts.get(m.to)!.receive(groupId, m)
    }
    if (onDemand) await checkAppliedBytes()
  }
  for (let t = 0; t < 150; t++) await step(true)
  for (let t = 0; t < 60; t++) await step(false)
  for (let t = 0; t < 20; t++) await step(false, 0)
  await Promise.all(pending)
  for (const g of groups) expect(machines.get(`${ids[0]}/${g}`)!.items.length).toBeGreaterThan(0)
  expectReplicasAgree(machines, ids, groups, resolved)
  const sum = (k: 'logBoundCompactions' | 'imagesOnDemand'): number =>
    [...hosts.values()].reduce((a, h) => a + h.stats[k], 0)
  return {
    resolved: resolved.length,
    boundCompactions: sum('logBoundCompactions'),
    images: sum('imagesOnDemand'),
  }
}

describe('RaftHost under a lossy network and crashes', () => {
  it('keeps every resolved proposal at its place on every replica (40 seeds)', async () => {
    let total = 0
    for (let seed = 1; seed <= 40; seed++) total += (await runSeed(seed)).resolved
    expect(total).toBeGreaterThan(1000)
  })

  it('does so with snapshots on demand, compacting by bytes and by the host-wide bound (40 seeds)', async () => {
    const total = { resolved: 0, boundCompactions: 0, images: 0 }
    for (let seed = 1; seed <= 40; seed++) {
      const r = await runSeed(seed, true)
      total.resolved += r.resolved
      total.boundCompactions += r.boundCompactions
      total.images += r.images
    }
    expect(total.resolved).toBeGreaterThan(1000)
    // The modes this run is for did happen, many times.
    expect(total.boundCompactions).toBeGreaterThan(100)
    expect(total.images).toBeGreaterThan(10)
  })
})
