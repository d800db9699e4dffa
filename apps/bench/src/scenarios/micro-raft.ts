import { EntryType, MemoryLogStorage, type Message, Prng, RawNode, Role } from '@mq/raft-core'
import { LatencyHistogram, round } from '../histogram'
import type { ScenarioResult } from '../result'

/**
 * raft-core without I/O: three RawNodes over MemoryLogStorage in one process, messages
 * handed over in memory in the Ready order (persist → send → apply → advance). Proposes
 * `batches` batches of `batchEntries` entries of 100 bytes on the leader and counts entries
 * committed and applied on the leader per second. Bounded by a step count and `timeLimitMs`.
 */
export function microRaftCore(batches: number, batchEntries: number, timeLimitMs = 30_000): ScenarioResult {
  const ids = ['a', 'b', 'c']
  const conf = { voters: ids, learners: [], votersOutgoing: [], learnersNext: [] }
  const storages = new Map(ids.map((id) => [id, new MemoryLogStorage(conf)]))
  const nodes = new Map(
    ids.map((id, i) => [
      id,
      new RawNode({ id, prng: new Prng(7 + i) }, storages.get(id) as MemoryLogStorage),
    ]),
  )
  let inbox: Message[] = []
  let applied = 0
  /** Runs every node's Ready and delivers messages until all is quiet; bounded. */
  const pump = (): void => {
    for (let rounds = 0; rounds < 10_000; rounds++) {
      let busy = false
      for (const [id, node] of nodes) {
        while (node.hasReady()) {
          busy = true
          const rd = node.ready()
          const st = storages.get(id) as MemoryLogStorage
          if (rd.snapshot) st.applySnapshot(rd.snapshot)
          if (rd.entries.length > 0) st.append(rd.entries)
          if (rd.hardState) st.setHardState(rd.hardState)
          st.sync()
          inbox.push(...rd.messages)
          if (id === 'a')
            applied += rd.committedEntries.filter(
              (e) => e.type === EntryType.Normal && e.data.length > 0,
            ).length
          node.advance(rd)
        }
      }
      const batch = inbox
      inbox = []
      for (const m of batch) {
        busy = true
        nodes.get(m.to)?.step(m)
      }
      if (!busy) return
    }
    throw new Error('raft-core micro: the cluster did not settle within 10,000 rounds')
  }
  const leader = nodes.get('a') as RawNode
  leader.campaign()
  pump()
  if (leader.status().role !== Role.Leader) throw new Error('raft-core micro: node a did not become leader')
  const data = new Uint8Array(100)
  const datas = Array.from({ length: batchEntries }, () => data)
  const commit = new LatencyHistogram()
  const base = applied
  const start = performance.now()
  let done = 0
  for (; done < batches && performance.now() - start < timeLimitMs; done++) {
    const t0 = performance.now()
    leader.proposeBatch(datas)
    pump()
    commit.record(performance.now() - t0)
  }
  const seconds = (performance.now() - start) / 1000
  if (applied - base !== done * batchEntries) {
    throw new Error(`raft-core micro: applied ${applied - base} entries, expected ${done * batchEntries}`)
  }
  return {
    scenario: 'micro-raft-core',
    params: { replicas: 3, batches: done, batchEntries, entryBytes: data.length, storage: 'memory' },
    metrics: {
      committedEntriesPerS: round((applied - base) / seconds, 0),
      batchesPerS: round(done / seconds, 0),
    },
    latency: { batchCommit: commit.summary() },
    notes: ['three RawNodes in one process, no network and no disk: the consensus core alone'],
  }
}
