import type { Delivery } from '@mq/router-client'
import { describe, expect, it } from 'vitest'
import { clockAheadEnv } from '../src/faketime'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

/** n3's wall clock is this far ahead of n1's and n2's (libfaketime; its steady clock is not). */
const AHEAD_MS = 60_000
const VISIBILITY_MS = 20_000
/** How long a second consumer polls for the held message after the leader change. */
const WATCH_MS = 5_000

// A partition's leadership moves to a node whose clock is a minute ahead while a consumer holds
// a lease of 20 s. n3 runs on time until the queue's group has a clock (a group takes its first
// leader's wall clock: had n3 led it first, the group's clock would be n3's and nothing would
// jump), then is restarted a minute ahead. Until 2026-12-03 the new leader stamped entries with its own clock: the lease
// was a minute old at once, the message went to a second consumer within a second while the
// first still held it, and the first one's ack answered `expired`. Now the new leader continues
// the group's clock (raft-core README, "Timestamps"; apps/server README, "Clocks").
describe('a node whose wall clock is a minute ahead', () => {
  let skewed = false
  const suite = suiteCluster({
    nodes: 3,
    nodeEnv: (nodeId) => (skewed && nodeId === 'n3' ? clockAheadEnv(AHEAD_MS) : undefined),
  })

  it('takes over a partition without ending its leases early, and stamps the group clock, not its own', async () => {
    const { client, cluster } = suite
    const route = await client.admin.createQueue('skew', {
      partitions: 1,
      visibilityTimeoutMs: VISIBILITY_MS,
    })
    const groupId = route.partitions[0]?.groupId as number
    const leaderIs = async (nodeId: string) =>
      (await client.admin.describeQueue('skew')).partitions[0]?.leaderId === nodeId
    const moveTo = async (nodeId: string) => {
      if (await leaderIs(nodeId)) return
      await client.admin.transferLeader(groupId, nodeId)
      expect(await waitFor(() => leaderIs(nodeId), 15_000, 100)).toBe(true)
    }

    await moveTo('n1')
    await client.producer('skew').send({ body: 'held' })
    skewed = true
    await cluster.kill('n3')
    await cluster.restart('n3')
    const first = client.consumer('skew', { prefetch: 1, waitMs: 1_000, autoExtend: false })
    const held = (await first[Symbol.asyncIterator]().next()).value as Delivery
    const leasedAt = performance.now()
    expect(held.text()).toBe('held')

    await moveTo('n3')
    const second = client.consumer('skew', { prefetch: 10, waitMs: 1_000 })
    const stolen: string[] = []
    const timer = setTimeout(() => void second.close(), WATCH_MS)
    for await (const m of second) stolen.push(m.text())
    clearTimeout(timer)
    expect(stolen).toEqual([]) // not handed to another consumer while the lease runs
    expect(performance.now() - leasedAt).toBeLessThan(VISIBILITY_MS - 2_000) // it still runs
    await held.ack() // ok, not `expired` (LeaseLostError)
    await first.close()

    // What n3 stamps now is the group's clock, on time, not n3's own a minute ahead.
    await client.producer('skew').send({ body: 'stamped' })
    const later = client.consumer('skew', { prefetch: 1, waitMs: 1_000 })
    const fresh = (await later[Symbol.asyncIterator]().next()).value as Delivery
    expect(fresh.text()).toBe('stamped')
    expect(Math.abs(fresh.enqueuedAtMs - Date.now())).toBeLessThan(5_000)
    await fresh.ack()
    await later.close()
  }, 90_000)
})
