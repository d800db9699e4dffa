import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { Prng } from '../src/prng'
import { waitFor } from '../src/scale-run'
import { outcomeProblems, STEADY_VISIBILITY_MS, type SteadyLoad, startSteadyLoad } from '../src/steady-load'

type Status = Awaited<ReturnType<MqClient['admin']['clusterStatus']>>

/** Data-group replicas per node (the meta group, id 0, left out). */
function replicaCounts(status: Status): Map<string, number> {
  return new Map(status.nodes.map((n) => [n.nodeId, n.groupIds.filter((g) => g !== 0).length]))
}

function settled(status: Status): boolean {
  return status.groups.every((g) => g.state !== 'changing')
}

// Nodes join and leave under a steady produce/consume load: a node started with --join is
// given replicas until every node holds about as many (membership changes: learner, promote,
// remove), then `drain` moves every replica off a node, which is then stopped. Every
// acknowledged message is consumed, none twice.
describe('joining and draining nodes under load', () => {
  let cluster: LocalCluster
  let client: MqClient
  let steady: SteadyLoad | undefined

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    steady?.abort()
    await client?.close()
    await cluster?.stop()
  })

  it('spreads replicas onto a joined node, drains another, and loses or duplicates nothing', async () => {
    const dataGroups = async () =>
      (await client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0).length
    expect(await waitFor(async () => (await dataGroups()) >= 3, 30_000, 200)).toBe(true)
    await client.admin.createQueue('rebalance', {
      partitions: 4,
      visibilityTimeoutMs: STEADY_VISIBILITY_MS,
      maxDeliveries: 1_000,
    })
    steady = startSteadyLoad(client, 'rebalance', new Prng(11))

    const joinedAt = Date.now()
    await cluster.join()
    let status = await client.admin.clusterStatus()
    const balanced = await waitFor(
      async () => {
        status = await client.admin.clusterStatus()
        const counts = [...replicaCounts(status).values()]
        return (
          counts.length === 4 &&
          (replicaCounts(status).get('n4') ?? 0) > 0 &&
          Math.max(...counts) - Math.min(...counts) <= 1 &&
          settled(status)
        )
      },
      60_000,
      250,
    )
    console.log(
      `join: replicas per node ${JSON.stringify([...replicaCounts(status)])} after ${Date.now() - joinedAt} ms`,
    )
    expect(balanced).toBe(true)

    const drainedAt = Date.now()
    const remaining = await client.admin.drainNode('n3')
    expect(remaining).toBeGreaterThan(0)
    const drained = await waitFor(
      async () => {
        status = await client.admin.clusterStatus()
        return replicaCounts(status).get('n3') === 0 && settled(status)
      },
      90_000,
      250,
    )
    console.log(
      `drain: n3 emptied after ${Date.now() - drainedAt} ms; replicas per node ${JSON.stringify([...replicaCounts(status)])}`,
    )
    expect(drained).toBe(true)
    expect(status.nodes.find((n) => n.nodeId === 'n3')?.draining).toBe(true)
    expect(await client.admin.drainNode('n3')).toBe(0)
    for (const g of status.groups.filter((x) => x.groupId !== 0)) {
      expect(g.replicas.map((r) => r.nodeId)).not.toContain('n3')
      expect(new Set(g.replicas.map((r) => r.nodeId)).size).toBe(3)
    }
    // The drained node deletes its copies of the groups, then it is shut down; the load goes on.
    expect(
      await waitFor(
        () => (cluster.node('n3').output.match(/removed data group/g) ?? []).length >= remaining,
        15_000,
        200,
      ),
    ).toBe(true)
    await cluster.kill('n3', 'SIGTERM')
    await new Promise((r) => setTimeout(r, 2_000))

    const r = await steady.finish()
    steady = undefined
    expect(r.report.ackedEnqueues).toBeGreaterThan(100)
    expect(outcomeProblems(r)).toEqual([])
    expect(cluster.nodes.flatMap((n) => n.crashes)).toEqual([])
  }, 240_000)
})

// A node dead for longer than --replace-dead-after-ms has its data-group replicas replaced on
// the other nodes (membership changes), and the queue's messages survive.
describe('replacing a dead node', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 4, serverArgs: ['--replace-dead-after-ms', '10000'] })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it("moves a SIGKILLed node's replicas to live nodes once the timeout passes", async () => {
    const dataGroups = async () => (await client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0)
    expect(await waitFor(async () => (await dataGroups()).length >= 4, 30_000, 200)).toBe(true)
    await client.admin.createQueue('survivors', { partitions: 4 })
    const producer = client.producer('survivors')
    const sent = await Promise.all(Array.from({ length: 40 }, (_, i) => producer.send({ body: `m${i}` })))
    await producer.close()
    const hadN4 = (await dataGroups()).filter((g) => g.replicas.some((r) => r.nodeId === 'n4')).length
    expect(hadN4).toBeGreaterThan(0)
    const killedAt = Date.now()
    await cluster.kill('n4')
    const replaced = await waitFor(
      async () => {
        const groups = await dataGroups()
        return groups.every((g) => !g.replicas.some((r) => r.nodeId === 'n4') && g.state !== 'changing')
      },
      60_000,
      250,
    )
    console.log(`dead node: ${hadN4} replicas of n4 replaced ${Date.now() - killedAt} ms after its SIGKILL`)
    expect(replaced).toBe(true)
    for (const g of await dataGroups()) expect(new Set(g.replicas.map((r) => r.nodeId)).size).toBe(3)
    const received = new Set<string>()
    const consumer = client.consumer('survivors', { prefetch: 16 })
    const deadline = Date.now() + 20_000
    for await (const d of consumer) {
      received.add(new TextDecoder().decode(d.body))
      await d.ack()
      if (received.size === sent.length || Date.now() > deadline) break
    }
    await consumer.close()
    expect(received.size).toBe(sent.length)
  }, 120_000)
})
