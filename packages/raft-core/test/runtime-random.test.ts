/**
 * Randomized runs of three RaftHosts (two groups each) over a lossy in-memory network with
 * crashes: whatever a proposal's outcome, every resolved proposal is applied at its index on
 * every replica, and all replicas of a group end with the same state. Seeded; no sleeps.
 */
import { describe, expect, it } from 'vitest'
import {
  type Entry,
  EntryType,
  type GroupId,
  MemoryDurability,
  MemoryLogStorage,
  type Message,
  Prng,
  RaftError,
  RaftHost,
  type Snapshot,
  type StateMachine,
} from '../src/index'
import { conf } from './harness'

const enc = new TextEncoder()
const dec = new TextDecoder()

class Log implements StateMachine {
  items: string[] = []
  apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      if (e.type !== EntryType.Normal || e.data.length === 0) return undefined
      this.items.push(dec.decode(e.data))
      return this.items.length - 1
    })
  }
  snapshot(): Uint8Array {
    return enc.encode(JSON.stringify(this.items))
  }
  restore(s: Snapshot): void {
    this.items = JSON.parse(dec.decode(s.data)) as string[]
  }
}

async function runSeed(seed: number): Promise<number> {
  const p = new Prng(seed)
  const ids = ['n1', 'n2', 'n3']
  const groups: GroupId[] = [1, 2]
  const queue: { groupId: GroupId; m: Message }[] = []
  const hosts = new Map<string, RaftHost>()
  const machines = new Map<string, Log>()
  const storages = new Map<string, MemoryLogStorage>()
  const durabilities = new Map<string, MemoryDurability>()
  const dropRate = p.float() * 0.2
  const startGroup = (id: string, g: GroupId): void => {
    const key = `${id}/${g}`
    const storage = storages.get(key) ?? new MemoryLogStorage(conf(ids))
    storages.set(key, storage)
    durabilities.get(id)!.register(storage)
    const machine = new Log()
    machines.set(key, machine)
    hosts.get(id)!.addGroup({
      groupId: g,
      raft: { id, prng: new Prng(p.nextU32()), electionTicks: 8 },
      storage,
      stateMachine: machine,
      limits: { compactEntries: 30, compactKeepEntries: p.below(5), proposalTimeoutTicks: 30 },
    })
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
        durability,
        clock: { nowMs: () => 0 },
      }),
    )
    for (const g of groups) startGroup(id, g)
  }
  const resolved: { g: GroupId; index: number; result: unknown; data: string }[] = []
  const pending: Promise<void>[] = []
  let n = 0
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
      for (let i = batch.length - 1; i > 0; i--) {
        const j = p.below(i + 1)
        const t = batch[i]!
        batch[i] = batch[j]!
        batch[j] = t
      }
      for (const { groupId, m } of batch) hosts.get(m.to)!.receive(groupId, m)
    }
  }
  for (let t = 0; t < 150; t++) await step(true)
  for (let t = 0; t < 60; t++) await step(false)
  for (let t = 0; t < 20; t++) await step(false, 0)
  await Promise.all(pending)
  for (const g of groups) {
    const states = ids.map((id) => machines.get(`${id}/${g}`)!.items)
    expect(states[0]!.length).toBeGreaterThan(0)
    for (const s of states) expect(s).toEqual(states[0])
  }
  for (const r of resolved) {
    for (const id of ids) {
      expect(machines.get(`${id}/${r.g}`)!.items[r.result as number]).toBe(r.data)
    }
  }
  return resolved.length
}

describe('RaftHost under a lossy network and crashes', () => {
  it('keeps every resolved proposal at its place on every replica (40 seeds)', async () => {
    let total = 0
    for (let seed = 1; seed <= 40; seed++) total += await runSeed(seed)
    expect(total).toBeGreaterThan(1000)
  })
})
