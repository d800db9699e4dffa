import { describe, expect, it } from 'vitest'
import { microKvStorage, microWeightedQueue } from './micro'
import { microRaftCore } from './micro-raft'

describe('micro benchmarks (tiny sizes)', () => {
  it('weighted-queue cycles every message through enqueue, lease and ack', async () => {
    const r = await microWeightedQueue(200)
    expect(r.latency.cycle?.count).toBe(200)
    expect(r.metrics.cyclesPerS).toBeGreaterThan(0)
    expect(r.metrics.batchedMsgsPerS).toBeGreaterThan(0)
  })

  it('kv-storage writes the same entries through LevelEngine and LogStore', async () => {
    const r = await microKvStorage(3, 50)
    expect(r.latency.rawSyncedBatch?.count).toBe(3)
    expect(r.latency.logStoreSyncedBatch?.count).toBe(3)
    expect(r.metrics.logStoreVsRaw).toBeGreaterThan(0)
  })

  it('raft-core commits every proposed entry on three in-memory replicas', () => {
    const r = microRaftCore(20, 10)
    expect(r.params.batches).toBe(20)
    expect(r.latency.batchCommit?.count).toBe(20)
    expect(r.metrics.committedEntriesPerS).toBeGreaterThan(0)
  })
})
