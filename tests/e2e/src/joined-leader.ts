import { MqClient } from '@mq/router-client'
import { LocalCluster } from './cluster'
import { waitFor } from './scale-run'

/**
 * A cluster of 3 nodes and a joined n4 (no meta replica), and `count` clients of it. On failure
 * it ends what it started and throws.
 */
export async function clusterWithJoinedNode(
  count: number,
): Promise<{ cluster: LocalCluster; clients: MqClient[] }> {
  const cluster = await LocalCluster.start({ nodes: 3 })
  const clients: MqClient[] = []
  try {
    await cluster.join()
    for (let i = 0; i < count; i++)
      clients.push(await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000 }))
  } catch (error) {
    // The caller gets nothing to stop: what was started must not outlive the failure.
    await stopAll(cluster, clients)
    throw error
  }
  return { cluster, clients }
}

/** Closes `clients`, then stops `cluster` (either may be missing: a start that failed). */
export async function stopAll(
  cluster: LocalCluster | undefined,
  clients: readonly MqClient[],
): Promise<void> {
  for (const c of clients) await c.close()
  await cluster?.stop()
}

/**
 * Creates one-partition queues named `prefix0`, `prefix1`, … until one lands on a data group
 * that `nodeId` (a node without a meta replica, joined) replicates, then makes `nodeId` that
 * group's leader. Such a leader caches routes instead of reading a meta replica of its own,
 * and hears of route changes only in the meta leader's heartbeat answers. Returns the queue.
 */
export async function queueLedByJoinedNode(admin: MqClient, nodeId: string, prefix: string): Promise<string> {
  // The controller moves data-group replicas onto the joined node (balance) once it is up.
  const groups = new Set<number>()
  const replicates = async () => {
    const s = await admin.admin.clusterStatus()
    const data = s.groups.filter((g) => g.groupId !== 0)
    for (const g of data) if (g.replicas.some((r) => r.nodeId === nodeId)) groups.add(g.groupId)
    return groups.size > 0 && data.every((g) => g.leaderId !== '' && g.state === 'active')
  }
  if (!(await waitFor(replicates, 90_000, 250))) throw new Error(`${nodeId} was given no data-group replica`)
  // Placement is even: a few queues of one partition reach one of its groups.
  for (let i = 0; i < 8; i++) {
    const route = await admin.admin.createQueue(`${prefix}${i}`, { partitions: 1 })
    const groupId = route.partitions[0]?.groupId ?? 0
    if (!groups.has(groupId)) continue
    await admin.admin.transferLeader(groupId, nodeId)
    const led = async () => (await admin.admin.describeQueue(route.queue)).partitions[0]?.leaderId === nodeId
    if (!(await waitFor(led, 20_000, 100)))
      throw new Error(`${nodeId} did not become leader of group ${groupId}`)
    return route.queue
  }
  throw new Error(`no queue of 8 landed on a group ${nodeId} replicates`)
}
