import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { LevelEngine, stateMachineRange } from '@mq/kv-storage'
import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort, LocalCluster } from '../src/cluster'
import { consumeAll } from '../src/consume-all'
import { waitFor } from '../src/scale-run'

// A queue deleted while one of its partitions is being copied into another data group: the
// move is abandoned, and the partial copy on the target group (its keys and import session)
// is deleted by the orphan sweeper, on every replica. Before, it stayed on disk until the
// whole group was removed.
describe('a partition move abandoned because its queue was deleted', () => {
  let cluster: LocalCluster
  let client: MqClient
  let dir: string
  const httpPorts = new Map<string, number>()

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mq-abandoned-'))
    const config = join(dir, 'config.json')
    // One data group at first, so that scaling to two moves a partition into the new group.
    writeFileSync(config, JSON.stringify({ dataGroups: 1 }))
    for (const id of ['n1', 'n2', 'n3']) httpPorts.set(id, await freePort())
    cluster = await LocalCluster.start({
      nodes: 3,
      serverArgs: ['--config', config],
      nodeArgs: (id) => ['--http-listen', `127.0.0.1:${httpPorts.get(id)}`],
    })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000, attemptMs: 1_500 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  /** Gauge `name` of every running node for `group`, summed. */
  const gauge = async (name: string, group: number): Promise<number> => {
    let sum = 0
    for (const [id, port] of httpPorts) {
      if (!cluster.isRunning(id)) continue
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
      const line = text.match(new RegExp(`^${name}\\{group="${group}",node="n\\d+"\\} (\\d+)$`, 'm'))
      sum += Number(line?.[1] ?? 0)
    }
    return sum
  }
  const imports = (group: number) => gauge('mq_data_imports', group)

  it('deletes the partial copy on the target group, keeps the other queue whole', async () => {
    const status = () => client.admin.clusterStatus()
    const dataGroups = async () => (await status()).groups.filter((g) => g.groupId !== 0)
    expect(await waitFor(async () => (await dataGroups()).length === 1, 30_000, 200)).toBe(true)
    // Two partitions of 48 MiB each: a copy of ~48 chunks of a MiB, long enough to delete the
    // queue in the middle of it. A second queue stays, and must lose nothing.
    await client.admin.createQueue('doomed', { partitions: 2 })
    await client.admin.createQueue('kept', { partitions: 1 })
    const doomed = client.producer('doomed', { keyless: 'round-robin' })
    const body = new Uint8Array(64 * 1024).fill(7)
    for (let i = 0; i < 1_536; i += 64)
      await Promise.all(Array.from({ length: 64 }, () => doomed.send({ body })))
    await doomed.close()
    const kept = client.producer('kept')
    const keptBodies = Array.from({ length: 50 }, (_, i) => `k${i}`)
    const sent = await Promise.all(keptBodies.map((body) => kept.send({ body })))
    await kept.close()

    const [source] = await dataGroups()
    const newGroup = (source?.groupId ?? 0) + 1
    // The source group's leader drives the copy (known before it starts, so that no lookup
    // stands between the delete and the kill below).
    const leader = source?.leaderId ?? ''
    const copyStarted = Date.now()
    await client.admin.scaleDataGroups(2)
    const copying = await waitFor(async () => (await imports(newGroup)) > 0, 60_000, 20)
    expect(copying).toBe(true)
    // The queue goes (its move with it), and the copying leader is SIGKILLed: nothing finishes
    // the copy, which stops midway (a copy of 48 MiB takes seconds; this takes milliseconds).
    await client.admin.deleteQueue('doomed')
    await cluster.kill(leader)
    const importing = await imports(newGroup)
    console.log(
      `abandoned move: doomed deleted and ${leader} (copying) killed ${Date.now() - copyStarted} ms into the move, ${importing} live replicas of group ${newGroup} importing`,
    )
    expect(importing).toBeGreaterThan(0)
    await cluster.restart(leader)

    // The orphan sweeper (every 10 s on each group leader) drops the import on every replica.
    const started = Date.now()
    expect(await waitFor(async () => (await imports(newGroup)) === 0, 60_000, 250)).toBe(true)
    console.log(`abandoned move: the partial copies dropped ${Date.now() - started} ms after the delete`)
    const dropped = cluster.nodes.some((n) => n.output.includes(`dropped the unfinished import of doomed`))
    expect(dropped).toBe(true)
    const keptStarted = Date.now()
    const received = await consumeAll(client, 'kept', sent.length, 20_000)
    console.log(`abandoned move: kept's ${received.size} messages consumed in ${Date.now() - keptStarted} ms`)
    // Should it fail: who led what, and each node's last words.
    const nodesSaid = () =>
      cluster.nodes.map((n) => `${n.nodeId}:\n${n.output.split('\n').slice(-12).join('\n')}`).join('\n')
    // The very messages sent: a message of doomed (its copy leaking into kept) is not one of them.
    const whole = received.size === sent.length && keptBodies.every((b) => received.has(b))
    expect(received, whole ? '' : nodesSaid()).toEqual(new Set(keptBodies))

    // On disk, the new group's state holds none of the copy: every replica's keys of it are a
    // few (the group's own records), where a chunk alone held ~30 message keys.
    await client.close()
    const kept2 = join(dir, 'kept-data')
    mkdirSync(kept2)
    // Once every replica has deleted the copy's keys (no sweep left), stop and read each database.
    expect(await waitFor(async () => (await gauge('mq_data_sweeps', newGroup)) === 0, 30_000, 100)).toBe(true)
    await cluster.stop(kept2)
    for (const id of ['n1', 'n2', 'n3']) {
      const engine = await LevelEngine.open(join(kept2, id, 'db'))
      try {
        const keys = await engine.range({ ...stateMachineRange(newGroup), limit: 1_000 })
        expect(keys.length, `${id}: keys of group ${newGroup}`).toBeLessThan(10)
      } finally {
        await engine.close()
      }
    }
  }, 240_000)
})
