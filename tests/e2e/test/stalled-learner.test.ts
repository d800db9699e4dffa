import type { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { NetNamespaces } from '../src/netns'
import { type OneGroupCluster, startOneGroupCluster } from '../src/one-group-cluster'
import { waitFor } from '../src/scale-run'

// A replica change whose new node is alive but whose learner never catches up does not wait for
// it: the node chosen (n4) still heartbeats to the meta leader, but its links with the data
// group's leader are cut, so the learner gets nothing. Once the learner's progress has not moved
// for --replica-stall-ms, the meta leader gives the change to n5. Before, the change waited for
// ever. Needs network namespaces (root); elsewhere the test is not collected.
describe.runIf(NetNamespaces.usable())('a replica change whose live learner stalls', () => {
  let cluster: LocalCluster
  let client: MqClient
  let run: OneGroupCluster | undefined

  beforeAll(async () => {
    // One data group (n1-n3), so that the change goes to n4.
    run = await startOneGroupCluster(['--replica-stall-ms', '10000'], { netns: true })
    ;({ cluster, client } = run)
  })

  afterAll(async () => {
    await run?.close()
  })

  it('gives the change to n5 once n4, alive and chosen first, makes no progress', async () => {
    const status = () => client.admin.clusterStatus()
    const dataGroup = async () => (await status()).groups.find((g) => g.groupId !== 0)
    expect(await waitFor(async () => (await dataGroup()) !== undefined, 30_000, 200)).toBe(true)
    await client.admin.createQueue('kept', { partitions: 2 })
    const producer = client.producer('kept')
    const bodies = Array.from({ length: 40 }, (_, i) => `m${i}`)
    await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()

    // The meta leader (m), the data group's leader (t: another founder, by an operator's
    // transfer, which the balancing keeps) and the founder to drain (d).
    const metaLeader = (await status()).metaLeaderId
    const groupId = (await dataGroup())?.groupId as number
    const [t, d] = ['n1', 'n2', 'n3'].filter((id) => id !== metaLeader) as [string, string]
    await client.admin.transferLeader(groupId, t)
    expect(await waitFor(async () => (await dataGroup())?.leaderId === t, 30_000, 200)).toBe(true)
    // n4 keeps its links with the meta leader and d, but not with the group's leader.
    cluster.cut('n4', t)
    cluster.cut(t, 'n4')

    const drainedAt = Date.now()
    await client.admin.drainNode(d)
    const chosen = await waitFor(async () => (await dataGroup())?.change?.add === 'n4', 30_000, 100)
    expect(chosen).toBe(true)
    const replaced = await waitFor(
      async () => {
        const group = await dataGroup()
        return (
          group?.state !== 'changing' &&
          group?.replicas
            .map((r) => r.nodeId)
            .sort()
            .join() === [metaLeader, t, 'n5'].sort().join()
        )
      },
      90_000,
      250,
    )
    console.log(`stalled learner: ${d} drained, n4 passed over for n5, ${Date.now() - drainedAt} ms`)
    expect(replaced, cluster.node(metaLeader).output.slice(-3_000)).toBe(true)
    const stalledLine = `group ${groupId}: the replica being added on n4 made no progress for 10000 ms`
    expect(cluster.node(metaLeader).output).toContain(stalledLine)
    expect(cluster.node(metaLeader).output).toContain(`replaced replica ${d} by n5 (drain)`)

    cluster.healNetwork()
    const received = await consumeAll(client, 'kept', bodies.length, 20_000)
    expect(received).toEqual(new Set(bodies))
  }, 180_000)
})
