import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster, type NodeProcess } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A node that joins is given replicas (a balance); killed while one is still a learner there,
// with no other node to take its place, the change is given up: the group keeps its replicas
// and is no longer shown changing. Before, it stayed "changing" for good (the dead-node test
// failed so when its fourth node was killed during the start-up balance). A node counts as lost
// 10 s after its last heartbeat (--replace-dead-after-ms, its least).
describe('a replica change whose new node dies as a learner, with no other node to take it', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3, serverArgs: ['--replace-dead-after-ms', '10000'] })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('is given up once the node counts as lost; the group keeps its replicas and its messages', async () => {
    const dataGroups = () => dataGroupsOf(client)
    expect(await waitFor(async () => (await dataGroups()).length >= 3, 30_000, 200)).toBe(true)
    await client.admin.createQueue('kept', { partitions: 3 })
    const producer = client.producer('kept')
    const bodies = Array.from({ length: 30 }, (_, i) => `k${i}`)
    await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()
    const before = new Map((await dataGroups()).map((g) => [g.groupId, g.replicas.map((r) => r.nodeId)]))
    const { changing, n4 } = await joinAndKillAsLearner(cluster, new Set(before.keys()))
    const killedAt = Date.now()
    const groups = await settledWithout(client, n4.nodeId)
    console.log(
      `lost learner: group ${changing}'s change given up ${Date.now() - killedAt} ms after n4's SIGKILL`,
    )
    // The group that was adding n4 keeps the replicas it had (the one it was to give up too).
    const after = new Map(groups.map((g) => [g.groupId, g.replicas.map((r) => r.nodeId)]))
    expect(after.get(changing as number)).toEqual(before.get(changing as number))
    const said = cluster.nodes.map((n) => n.output).join('\n')
    expect(said).toContain(`group ${changing}: gave up adding a replica on ${n4.nodeId}`)
    const received = await consumeAll(client, 'kept', bodies.length, 20_000)
    expect(received).toEqual(new Set(bodies))
  })
})

// The same learner's node drained once it is dead: the operator asks for it to hold nothing now.
// Until 2026-12-07 the change waited for the node to count as lost (--replace-dead-after-ms,
// 5 min by default): the node could be neither emptied nor removed (`mq node remove` said it
// still held a replica of the group) for as long.
describe('a replica change whose new node dies as a learner and is drained', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('is given up at once, and the node can be removed', async () => {
    const dataGroups = () => dataGroupsOf(client)
    expect(await waitFor(async () => (await dataGroups()).length >= 3, 30_000, 200)).toBe(true)
    const before = new Map((await dataGroups()).map((g) => [g.groupId, g.replicas.map((r) => r.nodeId)]))
    const { changing, n4 } = await joinAndKillAsLearner(cluster, new Set(before.keys()))
    const killedAt = Date.now()
    await client.admin.drainNode(n4.nodeId)
    const groups = await settledWithout(client, n4.nodeId)
    console.log(
      `drained dead learner: group ${changing}'s change given up ${Date.now() - killedAt} ms after the SIGKILL`,
    )
    // The groups that were there keep their replicas (a group made since may be there too).
    const after = new Map(groups.map((g) => [g.groupId, g.replicas.map((r) => r.nodeId)]))
    for (const [groupId, replicas] of before) expect(after.get(groupId)).toEqual(replicas)
    await client.admin.removeNode(n4.nodeId)
    expect((await client.admin.clusterStatus()).nodes.map((n) => n.nodeId)).not.toContain(n4.nodeId)
  })
})

/**
 * Starts a node that joins `cluster` and SIGKILLs it as soon as it says it hosts a replica of one
 * of `existing` (a balance onto it): that replica has not caught up, so it is a learner still.
 * Returns that group and the node.
 */
async function joinAndKillAsLearner(
  cluster: LocalCluster,
  existing: ReadonlySet<number>,
): Promise<{ changing: number; n4: NodeProcess }> {
  // Watched from its start, not once it serves: a joined node serves (join resolves) seconds
  // after it is given its first replica, which may be a voter by then (a small group catches
  // up at once), the kill then landing on another group's learner, or on none.
  const joined = cluster.nodes.length
  const joining = cluster.join()
  joining.catch(() => {}) // killed before it served: join reports that exit
  // Killed as soon as it says it hosts a replica of a group that was there before it joined
  // (a new group may be created with it): that replica has not caught up yet, so it is a
  // learner still (or not even added), never a voter.
  let changing: number | undefined
  const hosting = /hosts a replica of data group (\d+)"/g
  expect(
    await waitFor(
      () => {
        const output = cluster.nodes[joined]?.output ?? ''
        for (const m of output.matchAll(hosting)) if (existing.has(Number(m[1]))) changing ??= Number(m[1])
        return changing !== undefined
      },
      30_000,
      5,
    ),
  ).toBe(true)
  const n4 = cluster.nodes[joined] as NodeProcess
  await cluster.kill(n4.nodeId)
  return { changing: changing as number, n4 }
}

async function dataGroupsOf(client: MqClient) {
  return (await client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0)
}

/** The data groups once none is changing and none holds `nodeId` (60 s at most, else it fails). */
async function settledWithout(client: MqClient, nodeId: string) {
  const settled = await waitFor(
    async () =>
      (await dataGroupsOf(client)).every(
        (g) => g.state !== 'changing' && !g.replicas.some((r) => r.nodeId === nodeId),
      ),
    60_000,
    250,
  )
  const groups = await dataGroupsOf(client)
  expect(
    settled,
    `still changing: ${JSON.stringify(groups.map((g) => [g.groupId, g.state, g.change]))}`,
  ).toBe(true)
  return groups
}
