import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A node restarted with only --node-id, --listen and --data-dir resumes the cluster its data dir
// belongs to, as etcd does: founders as founders, a joined node through what it joined with
// and the meta voters it learnt (without the change the restart was refused: neither
// --initial-meta nor --join).
describe('restarting from the data dir alone', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    // Each node's whole output: its 'resumes' line is checked after the later restarts logged on.
    cluster = await LocalCluster.start({ nodes: 3, outputCharsMax: 2_000_000 })
    await cluster.join() // n4
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('restarts every node, one at a time and then all at once, without --initial-meta or --join', async () => {
    const status = () => client.admin.clusterStatus()
    expect(await waitFor(async () => (await status()).groups.length >= 4, 30_000, 200)).toBe(true)
    await client.admin.createQueue('resumed', { partitions: 4 })
    const producer = client.producer('resumed')
    const bodies: string[] = []
    const send = async (prefix: string) => {
      const batch = Array.from({ length: 20 }, (_, i) => `${prefix}${i}`)
      await Promise.all(batch.map((body) => producer.send({ body })))
      bodies.push(...batch) // acknowledged, every one
    }
    await send('a')
    // One at a time, crashed or stopped: the cluster serves throughout.
    for (const [nodeId, signal] of [
      ['n1', 'SIGKILL'],
      ['n4', 'SIGTERM'],
      ['n2', 'SIGTERM'],
      ['n3', 'SIGKILL'],
    ] as const) {
      await cluster.kill(nodeId, signal)
      await send(`${nodeId}-down-`)
      await cluster.restart(nodeId, { dataDirOnly: true })
      await send(`${nodeId}-back-`)
    }
    for (const n of ['n1', 'n2', 'n3'])
      expect(cluster.node(n).output).toMatch(new RegExp(`node ${n} resumes the cluster founded by n1=`))
    expect(cluster.node('n4').output).toMatch(/node n4 resumes the cluster it joined through 127\.0\.0\.1:/)

    // All at once: the founders bring the meta group back from their disks alone.
    await Promise.all(cluster.nodes.map((n) => cluster.kill(n.nodeId)))
    await Promise.all(cluster.nodes.map((n) => cluster.restart(n.nodeId, { dataDirOnly: true })))
    expect(await waitFor(async () => (await status()).metaVoters.join() === 'n1,n2,n3', 30_000, 200)).toBe(
      true,
    )
    expect((await status()).nodes.map((n) => n.nodeId).sort()).toEqual(['n1', 'n2', 'n3', 'n4'])
    await send('after-all-')
    await client.admin.createQueue('after', { partitions: 1 })
    expect((await client.admin.listQueues()).map((q) => q.queue).sort()).toEqual(['after', 'resumed'])
    await producer.close()

    const received = await consumeAll(client, 'resumed', bodies.length, 30_000)
    // The very messages acknowledged (a count would pass a foreign one standing in for a lost one).
    expect(received).toEqual(new Set(bodies))
    expect(cluster.nodes.flatMap((n) => n.crashes)).toEqual([])
  }, 240_000)
})
