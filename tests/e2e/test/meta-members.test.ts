import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// The meta group's membership is not fixed to the founders: a founder dead for longer than
// --replace-dead-after-ms is replaced by a node that joined later, so the cluster survives
// losing a second founder (without the change, two of three founders gone = no meta group:
// no routes, no admin, no controller). The removed founder, back, drops its meta replica.
describe('replacing meta voters', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3, serverArgs: ['--replace-dead-after-ms', '10000'] })
    await cluster.join() // n4: no meta replica of its own
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('moves a dead founder’s meta vote to a joined node, then loses a second founder and keeps working', async () => {
    const status = () => client.admin.clusterStatus()
    expect(await waitFor(async () => (await status()).groups.length >= 4, 30_000, 200)).toBe(true)
    expect((await status()).metaVoters).toEqual(['n1', 'n2', 'n3'])
    await client.admin.createQueue('kept', { partitions: 4 })
    const producer = client.producer('kept')
    const bodies = Array.from({ length: 40 }, (_, i) => `m${i}`)
    const sent = await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()

    const killedAt = Date.now()
    await cluster.kill('n1')
    // Both the meta vote and the data-group replicas of n1 move (to n4, the only other node).
    const replaced = await waitFor(
      async () => {
        const s = await status()
        return (
          s.metaVoters.join() === 'n2,n3,n4' &&
          s.metaLearners.length === 0 &&
          s.metaChange === undefined &&
          s.groups.every((g) => !g.replicas.some((r) => r.nodeId === 'n1') && g.state !== 'changing')
        )
      },
      60_000,
      250,
    )
    console.log(`meta members: n1 replaced by n4 ${Date.now() - killedAt} ms after its SIGKILL`)
    expect(replaced).toBe(true)

    // A second founder goes: n3 and n4 are a majority of the meta group n2, n3, n4.
    await cluster.kill('n2')
    expect(await waitFor(async () => ['n3', 'n4'].includes((await status()).metaLeaderId), 20_000, 200)).toBe(
      true,
    )
    await client.admin.createQueue('after', { partitions: 2 })
    expect((await client.admin.listQueues()).map((q) => q.queue).sort()).toEqual(['after', 'kept'])

    // n4's meta replica lives on its disk: killed and restarted, it votes again (n2 is still
    // down, so without it the meta group would have no majority).
    await cluster.kill('n4')
    await cluster.restart('n4')
    await client.admin.createQueue('restarted', { partitions: 1 })

    // n1 back: it was removed from the meta group while down, so it drops its meta replica
    // (and, a founder, never bootstraps the meta group again).
    await cluster.restart('n1')
    expect(
      await waitFor(
        async () => cluster.node('n1').output.includes('left the meta group and deleted its replica'),
        20_000,
        200,
      ),
    ).toBe(true)
    expect((await status()).metaVoters).toEqual(['n2', 'n3', 'n4'])

    const received = await consumeAll(client, 'kept', sent.length, 20_000)
    // The very messages sent (a count would pass a foreign one standing in for a lost one).
    expect(received).toEqual(new Set(bodies))
  }, 180_000)
})
