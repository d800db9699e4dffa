import { MemoryLogStorage } from '../memory-storage'
import type { Message } from '../message'
import { Prng } from '../prng'
import { RawNode } from '../raw-node'
import type { ConfState } from '../types'

const EMPTY = new Uint8Array(0)

export interface ThroughputOptions {
  /** Entries to commit in total. */
  readonly entries: number
  /** Bytes of each proposal. */
  readonly payloadBytes: number
  /** Proposals handed to the leader per round (one proposeBatch call). */
  readonly batch: number
  readonly nodeCount: number
  /** Each node compacts its log once it holds this many applied entries. */
  readonly compactEntries: number
  /** Wall-clock reader (performance.now), injected so this module stays free of globals. */
  readonly nowMs: () => number
}

export interface ThroughputResult {
  readonly committed: number
  readonly elapsedMs: number
  readonly entriesPerSec: number
  readonly rounds: number
  readonly messages: number
}

/**
 * Measures committed entries per second for a cluster of cores in one process: the
 * simulator's setup (RawNodes, MemoryLogStorage with a sync per Ready, messages passed in
 * memory) with no faults. An entry counts when the leader has applied it (a quorum stored it).
 */
export function measureThroughput(o: ThroughputOptions): ThroughputResult {
  const ids = Array.from({ length: o.nodeCount }, (_, i) => `n${i + 1}`)
  const conf: ConfState = { voters: ids, learners: [], votersOutgoing: [], learnersNext: [] }
  const nodes = ids.map((id, i) => {
    const storage = new MemoryLogStorage(conf)
    const raw = new RawNode(
      {
        id,
        prng: new Prng(i + 1),
        msgEntriesMax: 8192,
        msgBytesMax: 4 * 1024 * 1024,
        inflightMsgsMax: 64,
        inflightBytesMax: 64 * 1024 * 1024,
        applyBytesMax: 64 * 1024 * 1024,
        uncommittedEntriesMax: 1 << 20,
      },
      storage,
    )
    return { id, storage, raw, applied: 0 }
  })
  const byId = new Map(nodes.map((n) => [n.id, n]))
  let inbox: Message[] = []
  let messages = 0
  const pump = (): void => {
    for (const n of nodes) {
      while (n.raw.hasReady()) {
        const rd = n.raw.ready()
        if (rd.snapshot !== null) n.storage.applySnapshot(rd.snapshot)
        if (rd.entries.length > 0) n.storage.append(rd.entries)
        if (rd.hardState !== null) n.storage.setHardState(rd.hardState)
        n.storage.sync()
        for (const m of rd.messages) inbox.push(m)
        n.applied += rd.committedEntries.length
        n.raw.advance(rd)
        // Compact behind an (empty) state machine snapshot, as a host does, to bound memory.
        const applied = rd.committedEntries.at(-1)?.index ?? 0
        if (applied - n.storage.firstIndex() > o.compactEntries && n.raw.termAt(applied) >= 0) {
          n.storage.compact({ meta: n.raw.snapshotMeta(applied), data: EMPTY }, applied)
        }
      }
    }
  }
  const settle = (): void => {
    for (;;) {
      pump()
      if (inbox.length === 0) return
      const batch = inbox
      inbox = []
      messages += batch.length
      for (const m of batch) byId.get(m.to)!.raw.step(m)
    }
  }
  const leader = nodes[0]!
  leader.raw.campaign()
  settle()
  if (leader.raw.status().role !== 'leader') throw new Error('throughput: n1 did not become leader')
  const pool = new Uint8Array(o.payloadBytes * o.batch)
  for (let i = 0; i < pool.length; i++) pool[i] = i & 0xff
  const start = o.nowMs()
  const base = leader.applied
  let rounds = 0
  let proposed = 0
  const datas: Uint8Array[] = new Array(o.batch)
  while (proposed < o.entries) {
    const count = Math.min(o.batch, o.entries - proposed)
    if (datas.length !== count) datas.length = count
    for (let i = 0; i < count; i++) datas[i] = pool.subarray(i * o.payloadBytes, (i + 1) * o.payloadBytes)
    leader.raw.proposeBatch(datas)
    proposed += count
    rounds++
    settle()
  }
  const elapsedMs = o.nowMs() - start
  const committed = leader.applied - base
  if (committed < o.entries) throw new Error(`throughput: only ${committed} of ${o.entries} entries applied`)
  return { committed, elapsedMs, entriesPerSec: Math.round((committed / elapsedMs) * 1000), rounds, messages }
}
