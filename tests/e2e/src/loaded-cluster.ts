import { MqClient } from '@mq/router-client'
import { type ClusterOptions, LocalCluster } from './cluster'
import { Prng } from './prng'
import { waitFor } from './scale-run'
import { STEADY_VISIBILITY_MS, type SteadyLoad, startSteadyLoad } from './steady-load'

/** A cluster under a steady produce/consume load on one queue: the single-fault tests' setup. */
export interface LoadedCluster {
  readonly cluster: LocalCluster
  readonly client: MqClient
  readonly steady: SteadyLoad
  /** Enqueues acknowledged so far. */
  acked(): number
  /** Data-group ids and their replicas' node ids, from the meta group. */
  dataGroups(): Promise<{ groupId: number; state: string; replicas: string[] }[]>
  /** Stops the load, the client and the cluster. */
  close(): Promise<void>
}

/**
 * Starts a cluster, waits for one data group per node, creates `queue` (3 partitions, the
 * steady load's visibility, 1000 deliveries before dead-lettering), starts a steady load
 * seeded by `seed`, and returns once 100 enqueues are acknowledged. On failure it ends what
 * it started and throws.
 */
export async function startLoadedCluster(
  options: ClusterOptions,
  queue: string,
  seed: number,
): Promise<LoadedCluster> {
  const cluster = await LocalCluster.start(options)
  let client: MqClient | undefined
  let steady: SteadyLoad | undefined
  const close = async () => {
    steady?.abort()
    await client?.close()
    await cluster.stop()
  }
  try {
    const c = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
    client = c
    const dataGroups = async () =>
      (await c.admin.clusterStatus()).groups
        .filter((g) => g.groupId !== 0)
        .map((g) => ({ groupId: g.groupId, state: g.state, replicas: g.replicas.map((r) => r.nodeId) }))
    const nodes = options.nodes ?? 3
    if (!(await waitFor(async () => (await dataGroups()).length >= nodes, 30_000, 200)))
      throw new Error(`fewer than ${nodes} data groups after 30 s`)
    await c.admin.createQueue(queue, {
      partitions: 3,
      visibilityTimeoutMs: STEADY_VISIBILITY_MS,
      maxDeliveries: 1_000,
    })
    const s = startSteadyLoad(c, queue, new Prng(seed))
    steady = s
    const acked = () => s.load.enqueued.size
    if (!(await waitFor(async () => acked() > 100, 30_000, 100)))
      throw new Error('fewer than 100 enqueues acknowledged after 30 s')
    return { cluster, client: c, steady: s, acked, dataGroups, close }
  } catch (error) {
    await close()
    throw error
  }
}
