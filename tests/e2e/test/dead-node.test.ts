import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A node dead for longer than --replace-dead-after-ms has its data-group replicas replaced on
// the other nodes (membership changes), and the queue's messages survive, even while the meta
// leadership keeps moving.
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
    const bodies = Array.from({ length: 40 }, (_, i) => `m${i}`)
    const sent = await Promise.all(bodies.map((body) => producer.send({ body })))
    await producer.close()
    const hadN4 = (await dataGroups()).filter((g) => g.replicas.some((r) => r.nodeId === 'n4')).length
    expect(hadN4).toBeGreaterThan(0)
    const killedAt = Date.now()
    await cluster.kill('n4')
    // The meta leadership moves every 8 s meanwhile: each new meta leader goes on counting n4's
    // silence from what the meta state recorded (markSilent, once it counted as dead: 5 s), so
    // the 10 s still run out (when every new leader started the timeout again, n4 was never
    // replaced: no leader lasts 10 s). A new leader also waits 5 s to hear from every node
    // before it replaces one, so each leader has 3 s to start the changes; with a move every
    // 6 s that was 1 s, and on a loaded CI machine every one of ten such windows went by.
    let transfers = 0
    // What the groups went through, for the failure message: each change of leader or replicas.
    const timeline: string[] = []
    const note = (line: string) => {
      if (timeline.at(-1)?.endsWith(line)) return
      timeline.push(`${Date.now() - killedAt} ms: ${line}`)
    }
    const replaced = await waitFor(
      async () => {
        const s = await client.admin.clusterStatus()
        const groups = s.groups.filter((g) => g.groupId !== 0)
        note(
          `meta leader ${s.metaLeaderId}; ${groups.map((g) => `g${g.groupId} ${g.state} ${g.replicas.map((r) => r.nodeId).join(',')}`).join('; ')}`,
        )
        if (Date.now() - killedAt > 8_000 * (transfers + 1)) {
          transfers++
          const to = s.metaVoters.find((v) => v !== s.metaLeaderId && v !== 'n4')
          if (to)
            await client.admin
              .transferLeader(0, to)
              .then(() => note(`meta leadership moved to ${to}`))
              .catch((e: Error) => note(`meta leadership not moved to ${to}: ${e.message}`))
        }
        return groups.every((g) => !g.replicas.some((r) => r.nodeId === 'n4') && g.state !== 'changing')
      },
      60_000,
      250,
    )
    console.log(`dead node: ${transfers} meta leadership transfers meanwhile`)
    console.log(`dead node: ${hadN4} replicas of n4 replaced ${Date.now() - killedAt} ms after its SIGKILL`)
    expect(replaced, `n4 not replaced; what the groups went through:\n${timeline.join('\n')}`).toBe(true)
    for (const g of await dataGroups()) expect(new Set(g.replicas.map((r) => r.nodeId)).size).toBe(3)
    const received = await consumeAll(client, 'survivors', sent.length, 20_000)
    // The very messages sent (a count would pass a foreign one standing in for a lost one).
    expect(received).toEqual(new Set(bodies))
  }, 120_000)
})
