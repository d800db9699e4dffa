import type { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { type OneGroupCluster, startOneGroupCluster } from '../src/one-group-cluster'
import { waitFor } from '../src/scale-run'

// A replacement whose new node dies before it became a voter does not wait for that node: the
// meta leader gives the change to another node, for a data group and for the meta group alike,
// and the group's leader removes the dead node's learner first. Without it the change (one at
// a time) waited for the dead node, and no other replica could be replaced meanwhile.
describe('retargeting a replica change whose new node is lost', () => {
  let cluster: LocalCluster
  let client: MqClient
  let run: OneGroupCluster | undefined

  beforeAll(async () => {
    // One data group (n1-n3), so that both changes below go to n4.
    run = await startOneGroupCluster(['--replace-dead-after-ms', '10000'])
    ;({ cluster, client } = run)
  })

  afterAll(async () => {
    await run?.close()
  })

  it('replaces a dead founder by n5 once n4, chosen first, stops before it became a voter', async () => {
    const status = () => client.admin.clusterStatus()
    const dataGroups = async () => (await status()).groups.filter((g) => g.groupId !== 0)
    expect(await waitFor(async () => (await dataGroups()).length === 1, 30_000, 200)).toBe(true)
    await client.admin.createQueue('kept', { partitions: 2 })
    const producer = client.producer('kept')
    const bodies = Array.from({ length: 40 }, (_, i) => `m${i}`)
    const sent = await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()

    const killedAt = Date.now()
    await cluster.kill('n3')
    // The first change to name n4 (the data group's or the meta group's): n4 stops at once, so
    // it never catches up and is never promoted.
    const chosen = await waitFor(
      async () => {
        const s = await status()
        return s.metaChange?.add === 'n4' || s.groups.some((g) => g.replicas.some((r) => r.nodeId === 'n4'))
      },
      30_000,
      100,
    )
    expect(chosen).toBe(true)
    cluster.pause('n4')
    console.log(`retarget: n4 chosen and stopped ${Date.now() - killedAt} ms after n3's SIGKILL`)
    const replaced = await waitFor(
      async () => {
        const s = await status()
        const group = s.groups.find((g) => g.groupId !== 0)
        return (
          s.metaVoters.join() === 'n1,n2,n5' &&
          s.metaLearners.length === 0 &&
          s.metaChange === undefined &&
          group?.state !== 'changing' &&
          group?.replicas
            .map((r) => r.nodeId)
            .sort()
            .join() === 'n1,n2,n5'
        )
      },
      90_000,
      250,
    )
    console.log(`retarget: n3 replaced by n5 ${Date.now() - killedAt} ms after its SIGKILL`)
    expect(replaced).toBe(true)
    const retargeted = (id: string) =>
      cluster.node(id).output.includes(`replaced replica n3 by n5 (dead)`) &&
      !cluster.node(id).output.includes(`replaced replica n3 by n4`)
    expect(['n1', 'n2'].some(retargeted)).toBe(true)
    // n4 was added as a learner while stopped (a leader needs nothing of it for that): the
    // retargeted change removed that learner first, in the data group and the meta group.
    for (const group of [1, 0]) {
      const step = `group ${group}: remove-stale-member (n3 → n5)`
      expect(['n1', 'n2'].some((id) => cluster.node(id).output.includes(step))).toBe(true)
    }

    // n4 runs again: it was never a member, and drops whatever it was given before it stopped
    // (it may have stopped before it heard of either replica).
    cluster.resume('n4')
    const output = () => cluster.node('n4').output
    const dropped = await waitFor(
      async () =>
        (!output().includes('hosts a replica of data group 1') ||
          output().includes('removed data group 1 and its storage')) &&
        (!output().includes('hosts a replica of the meta group') ||
          output().includes('left the meta group and deleted its replica')),
      30_000,
      200,
    )
    console.log(
      `retarget: n4 had hosted data group 1: ${output().includes('hosts a replica of data group 1')}, the meta group: ${output().includes('hosts a replica of the meta group')}`,
    )
    expect(dropped).toBe(true)
    expect((await dataGroups())[0]?.replicas.map((r) => r.nodeId).sort()).toEqual(['n1', 'n2', 'n5'])
    const received = await consumeAll(client, 'kept', sent.length, 20_000)
    // The very messages sent (a count would pass a foreign one standing in for a lost one).
    expect(received).toEqual(new Set(bodies))
  }, 180_000)
})
