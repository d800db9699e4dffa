import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A scale plan's moves into a new group whose majority is gone can never end: its copy finds no
// leader to import into. Before format level 37 they stayed "copy" for good, holding the plan's
// move slots and the partitions' moves (their source keeps the partition fenced once a copy got
// that far). Now each is aborted once the group's nodes count as lost (10 s after their last
// heartbeat, --replace-dead-after-ms's least): the partitions stay where they are, and serve.
//
// The group is made on two nodes SIGKILLed a moment before the scale: the meta leader still
// counts them alive for 5 s, so it places the new group there (its least loaded nodes), and the
// group never elects a leader: no partition can reach it.
describe('a move into a group that lost its majority', () => {
  let cluster: LocalCluster
  let client: MqClient
  let configDir: string

  beforeAll(async () => {
    configDir = mkdtempSync(join(tmpdir(), 'mq-aborted-move-'))
    const config = join(configDir, 'node.json')
    // One data group to begin with (on n1-n3): n4 and n5 then hold nothing, and nothing is
    // balanced onto them (a group's 3 replicas over 5 nodes are even).
    writeFileSync(config, JSON.stringify({ dataGroups: 1 }))
    cluster = await LocalCluster.start({
      nodes: 3,
      serverArgs: ['--replace-dead-after-ms', '10000', '--config', config],
    })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
    if (configDir) rmSync(configDir, { recursive: true, force: true })
  })

  it('is aborted once its target counts as lost; the partitions stay in their group and serve', async () => {
    const status = () => client.admin.clusterStatus()
    const dataGroups = async () => (await status()).groups.filter((g) => g.groupId !== 0)
    expect(await waitFor(async () => (await dataGroups()).length === 1, 30_000, 200)).toBe(true)
    await client.admin.createQueue('kept', { partitions: 4 })
    const producer = client.producer('kept')
    const bodies = Array.from({ length: 40 }, (_, i) => `k${i}`)
    await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()
    const n4 = await cluster.join()
    const n5 = await cluster.join()
    const alive = async () => (await status()).nodes.filter((n) => n.alive).length === 5
    expect(await waitFor(alive, 30_000, 200)).toBe(true)
    await cluster.kill(n4.nodeId)
    await cluster.kill(n5.nodeId)
    const killedAt = Date.now()
    await client.admin.scaleDataGroups(2)
    // The new group is on the two dead nodes (and one of n1-n3); moves into it begin.
    expect(
      await waitFor(
        async () => {
          const s = await status()
          const fresh = s.groups.find((g) => g.groupId > 1)
          const on = fresh?.replicas.map((r) => r.nodeId) ?? []
          return on.includes(n4.nodeId) && on.includes(n5.nodeId) && s.moves.length > 0
        },
        10_000,
        50,
      ),
    ).toBe(true)
    const aborted = await waitFor(async () => (await status()).moves.length === 0, 60_000, 250)
    expect(aborted, `moves still under way: ${JSON.stringify((await status()).moves)}`).toBe(true)
    console.log(`aborted move: every move ended ${Date.now() - killedAt} ms after the SIGKILLs`)
    const said = cluster.nodes.map((n) => n.output).join('\n')
    expect(said).toMatch(/aborted: its target group lost its majority/)
    // Every partition is still in group 1, and none is moved into the group without a majority.
    const routes = (await client.admin.describeQueue('kept')).partitions.map((p) => p.groupId)
    expect(routes).toEqual([1, 1, 1, 1])
    const received = await consumeAll(client, 'kept', bodies.length, 20_000)
    expect(received).toEqual(new Set(bodies))
    expect((await status()).moves).toEqual([])
  })
})
