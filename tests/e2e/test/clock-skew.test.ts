import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Delivery, MqClient } from '@mq/router-client'
import { afterAll, describe, expect, it } from 'vitest'
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
    expect(await takenWithin(client, 'skew', WATCH_MS)).toEqual([]) // not handed to another consumer while the lease runs
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

/** What a second consumer of `queue` gets within `ms` (its bodies as text; nothing is acked). */
async function takenWithin(client: MqClient, queue: string, ms: number): Promise<string[]> {
  const second = client.consumer(queue, { prefetch: 10, waitMs: 1_000 })
  const taken: string[] = []
  const timer = setTimeout(() => void second.close(), ms)
  for await (const m of second) taken.push(m.text())
  clearTimeout(timer)
  return taken
}

/** Leases `count` messages with `consumer`: each one's delivery, in the order they came. */
async function leaseEach(iterator: AsyncIterator<Delivery>, count: number): Promise<Delivery[]> {
  const out: Delivery[] = []
  while (out.length < count) out.push((await iterator.next()).value as Delivery)
  return out
}

// A partition moves into a data group whose clock is a minute ahead of the one it leaves while a
// consumer holds its message. Each data group has its own clock, started by its first leader's
// wall clock: with single-replica groups, the group the scale-out creates is started by the node
// it is placed on, which runs a minute ahead by then. Until 2026-12-03 a moved partition took the
// target group's clock: its lease was a minute old at once and the message went to a second
// consumer. Now the partition's clock goes on from the source's (format level 21; apps/server
// README, "Clocks").
describe('a partition moved into a data group whose clock is a minute ahead', () => {
  const skewed = new Set<string>()
  const configDir = mkdtempSync(join(tmpdir(), 'mq-skew-move-'))
  afterAll(() => rmSync(configDir, { recursive: true, force: true }))
  const configFile = join(configDir, 'server.json')
  writeFileSync(configFile, JSON.stringify({ replicationFactor: 1, dataGroups: 1 }))
  const suite = suiteCluster({
    nodes: 3,
    nodeArgs: () => ['--config', configFile],
    nodeEnv: (nodeId) => (skewed.has(nodeId) ? clockAheadEnv(AHEAD_MS) : undefined),
  })

  it("keeps the partition's clock: its leases run their length, new messages are stamped on time", async () => {
    const { client, cluster } = suite
    const route = await client.admin.createQueue('moved', { partitions: 2, visibilityTimeoutMs: 30_000 })
    const source = route.partitions[0]?.groupId as number
    expect(route.partitions.map((p) => p.groupId)).toEqual([source, source])
    const producer = client.producer('moved', { keyless: 'round-robin' })
    for (const body of ['a', 'b', 'c', 'd']) await producer.send({ body })
    const first = client.consumer('moved', { prefetch: 4, waitMs: 1_000, autoExtend: false })
    const held = await leaseEach(first[Symbol.asyncIterator](), 4)
    const leasedAt = performance.now()

    // The two nodes without the group run a minute ahead from now on; the scale-out puts the new
    // group on one of them, which leads it first, and moves one partition there.
    // The group's leader as the meta state knows it: empty until the group reported one, and
    // then every node was skewed, the group's own too, which restarted a minute ahead (a clock
    // stepped while its node was down: the known gap, apps/server README) and ended the leases.
    let host = ''
    const hostKnown = async () => {
      host = (await client.admin.describeQueue('moved')).partitions[0]?.leaderId ?? ''
      return host !== ''
    }
    expect(await waitFor(hostKnown, 10_000, 200)).toBe(true)
    for (const node of cluster.nodes.map((n) => n.nodeId).filter((id) => id !== host)) {
      skewed.add(node)
      await cluster.kill(node)
      await cluster.restart(node)
    }
    // Placed on the least loaded live node: the restarted ones must count as live by then (else
    // the new group went on the host, whose clock is not ahead).
    const allAlive = async () => {
      const s = await client.admin.clusterStatus()
      return s.nodes.length === 3 && s.nodes.every((n) => n.alive)
    }
    expect(await waitFor(allAlive, 15_000, 200)).toBe(true)
    await client.admin.scaleDataGroups(2)
    const moved = async () => {
      const partitions = (await client.admin.describeQueue('moved')).partitions
      return new Set(partitions.map((p) => p.groupId)).size === 2
    }
    expect(await waitFor(moved, 20_000, 200)).toBe(true)
    // The new group's leader as the meta state knows it (reported once the group elected one).
    const targetLeader = async () =>
      (await client.admin.describeQueue('moved')).partitions.find((p) => p.groupId !== source)?.leaderId ?? ''
    expect(await waitFor(async () => (await targetLeader()) !== '', 10_000, 200)).toBe(true)
    expect([...skewed]).toContain(await targetLeader())

    expect(await takenWithin(client, 'moved', WATCH_MS)).toEqual([]) // not handed to another consumer while the leases run
    expect(performance.now() - leasedAt).toBeLessThan(30_000 - 2_000) // they still run
    for (const m of held) await m.ack() // ok, not `expired` (LeaseLostError)
    await first.close()

    // New messages in both partitions are stamped on time: the moved one's clock went on from the
    // source group's, not from the target's a minute ahead.
    for (let i = 0; i < 8; i++) await producer.send({ body: `n${i}` })
    const later = client.consumer('moved', { prefetch: 8, waitMs: 1_000 })
    const fresh = await leaseEach(later[Symbol.asyncIterator](), 8)
    expect(new Set(fresh.map((m) => m.partition)).size).toBe(2)
    for (const m of fresh) expect(Math.abs(m.enqueuedAtMs - Date.now())).toBeLessThan(5_000)
    for (const m of fresh) await m.ack()
    await later.close()
    await producer.close()
  }, 120_000)
})

// A whole cluster restarts while a consumer holds a lease, and the node whose wall clock is a
// minute ahead leads the data group first (n1 and n2 restart with a 3-s election timeout, n3
// with the default 0.5 s), having heard no leader since it restarted, nor its voters. Until
// 2026-12-03 it started the group clock from its own wall clock: the lease was a minute old at
// once and the message went to a second consumer. Now each replica records the group clock
// minus its wall clock as it goes (raft-core Ready.clockOffsetMs, kv-storage key (1, g, 6)) and
// one restarted continues from its wall clock plus that (raft-core README, "Timestamps").
describe('a whole cluster restarted, led first by the node a minute ahead', () => {
  const skewed = new Set<string>()
  const slow = new Set<string>()
  const configDir = mkdtempSync(join(tmpdir(), 'mq-skew-restart-'))
  afterAll(() => rmSync(configDir, { recursive: true, force: true }))
  const slowConfig = join(configDir, 'slow.json')
  writeFileSync(slowConfig, JSON.stringify({ electionTicks: 60 }))
  const suite = suiteCluster({
    nodes: 3,
    nodeArgs: (nodeId) => (slow.has(nodeId) ? ['--config', slowConfig] : []),
    nodeEnv: (nodeId) => (skewed.has(nodeId) ? clockAheadEnv(AHEAD_MS) : undefined),
  })

  it('continues the group clock from the recorded offsets: the lease runs its length', async () => {
    const { client, cluster } = suite
    const route = await client.admin.createQueue('whole', { partitions: 1, visibilityTimeoutMs: 45_000 })
    const groupId = route.partitions[0]?.groupId as number
    const leaderIs = async (nodeId: string) =>
      (await client.admin.describeQueue('whole')).partitions[0]?.leaderId === nodeId
    // n3 runs a minute ahead from now on, in a group whose clock n1, n2 and n3 started on time.
    skewed.add('n3')
    await cluster.kill('n3')
    await cluster.restart('n3')
    if (!(await leaderIs('n1'))) {
      await client.admin.transferLeader(groupId, 'n1')
      expect(await waitFor(() => leaderIs('n1'), 15_000, 100)).toBe(true)
    }
    await client.producer('whole').send({ body: 'held' })
    const first = client.consumer('whole', { prefetch: 1, waitMs: 1_000, autoExtend: false })
    const held = (await first[Symbol.asyncIterator]().next()).value as Delivery
    const leasedAt = performance.now()
    expect(held.text()).toBe('held')
    await new Promise((r) => setTimeout(r, 2_000)) // n3 holds every entry (heartbeats)

    for (const n of ['n1', 'n2', 'n3']) await cluster.kill(n)
    slow.add('n1')
    slow.add('n2')
    await Promise.all(['n1', 'n2', 'n3'].map((n) => cluster.restart(n)))
    expect(await waitFor(() => leaderIs('n3'), 20_000, 200)).toBe(true)

    expect(await takenWithin(client, 'whole', WATCH_MS)).toEqual([]) // not handed to another consumer while the lease runs
    expect(performance.now() - leasedAt).toBeLessThan(45_000 - 2_000) // it still runs
    await held.ack() // ok, not `expired` (LeaseLostError)
    await first.close()
  }, 120_000)
})

/** How long a dead node's replicas wait to be replaced in the cluster below. */
const REPLACE_AFTER_MS = 20_000

// A meta leader recorded a dead node's silence (markSilent) by its clock, then the meta
// leadership moves to a node whose clock is ten minutes ahead. Until 2026-12-03 each meta leader
// timed silences on its own steady clock (its wall clock at start, plus monotonic time): the new
// leader counted the silence ten minutes longer and replaced the node's replicas at once. Now the
// controller times on the meta group's clock, continued from leader to leader (apps/server
// README, "Clocks").
describe('a meta leader whose wall clock is ten minutes ahead', () => {
  const skewed = new Set<string>()
  const suite = suiteCluster({
    nodes: 4,
    serverArgs: ['--replace-dead-after-ms', String(REPLACE_AFTER_MS)],
    nodeEnv: (nodeId) => (skewed.has(nodeId) ? clockAheadEnv(10 * 60_000) : undefined),
  })

  it("replaces a dead node's replicas after the timeout, not at once", async () => {
    const { client, cluster } = suite
    const dataGroups = async () => (await client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0)
    expect(await waitFor(async () => (await dataGroups()).length >= 4, 30_000, 200)).toBe(true)
    const metaLeaderIs = async (nodeId: string) =>
      (await client.admin.clusterStatus()).metaLeaderId === nodeId
    const metaTo = async (nodeId: string) => {
      if (await metaLeaderIs(nodeId)) return
      await client.admin.transferLeader(0, nodeId).catch(() => {})
      expect(await waitFor(() => metaLeaderIs(nodeId), 15_000, 100)).toBe(true)
    }
    skewed.add('n2')
    await cluster.kill('n2')
    await cluster.restart('n2')
    await metaTo('n1')
    const hasN4 = async () => (await dataGroups()).some((g) => g.replicas.some((r) => r.nodeId === 'n4'))
    expect(await hasN4()).toBe(true)
    const killedAt = performance.now()
    await cluster.kill('n4')
    // n1 counts n4 dead after 5 s and records since when it is silent; then n2 leads.
    await new Promise((resolve) => setTimeout(resolve, 8_000))
    await metaTo('n2')
    const replaced = await waitFor(async () => !(await hasN4()), 60_000, 250)
    const replacedAfterMs = performance.now() - killedAt
    console.log(
      `skewed meta leader: n4's replicas replaced ${Math.round(replacedAfterMs)} ms after its SIGKILL`,
    )
    expect(replaced).toBe(true)
    // Its silence ran at least the timeout (less the 1 % a group clock may run fast, and the
    // heartbeat interval before the kill), not ten minutes the moment n2 took over.
    expect(replacedAfterMs).toBeGreaterThan(REPLACE_AFTER_MS - 3_000)
  }, 150_000)
})
