import { randomBytes } from 'node:crypto'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { LevelEngine } from '@mq/kv-storage'
import { MqClient } from '@mq/router-client'
import { afterAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { waitFor } from '../src/scale-run'

/**
 * Flips one bit in the stored copy of `body` that comes last in the node's newest table file
 * holding it: tables are sorted by key, and a message's body key (the group's state-machine
 * keys) sorts after the Raft log entry that carried it. Returns the table's name.
 */
function flipStoredBody(dataDir: string, body: string): string {
  const db = join(dataDir, 'db')
  const tables = readdirSync(db)
    .filter((f) => f.endsWith('.ldb'))
    .sort((a, b) => Number.parseInt(b, 10) - Number.parseInt(a, 10))
  for (const t of tables) {
    const bytes = readFileSync(join(db, t))
    const at = bytes.lastIndexOf(Buffer.from(body))
    if (at < 0) continue
    bytes[at + 1000] = (bytes[at + 1000] as number) ^ 0x01
    writeFileSync(join(db, t), bytes)
    return t
  }
  throw new Error(`no table of ${db} holds the body`)
}

// A message body whose stored bytes get a flipped bit on one node. LevelDB does not check the
// checksums of uncompressed table blocks on reads (classic-level cannot ask it to), so before
// value checksums the node would have delivered the damaged body. Now the read fails its
// checksum when that node, leading the partition, reads the body for a lease: the node
// quarantines its database and exits 1 naming the damage; the consumer gets every body intact
// from the next leader.
describe('a damaged message body on one node', () => {
  let cluster: LocalCluster | undefined
  let client: MqClient | undefined

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('is never delivered: the node reading it exits 1 naming it, and the others serve the body intact', async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 30_000 })
    await client.admin.createQueue('damaged', { partitions: 1 })
    // Random hex: Snappy gains nothing on it, so LevelDB stores its blocks uncompressed.
    const bodies = Array.from({ length: 20 }, () => randomBytes(1500).toString('hex'))
    const producer = client.producer('damaged')
    for (const body of bodies) await producer.send({ body })
    // The meta group learns the partition's leader from heartbeats: ask until it knows.
    let route = await client.admin.describeQueue('damaged')
    for (let i = 0; i < 100 && !route.partitions[0]?.leaderId; i++) {
      await new Promise((r) => setTimeout(r, 100))
      route = await client.admin.describeQueue('damaged')
    }
    const partition = route.partitions[0]
    const victim = partition?.leaderId
    if (!partition || !victim) throw new Error('the partition has no leader')

    // Down, its write-ahead log moves into a table (what a restart does); one body is damaged.
    await cluster.kill(victim)
    const node = cluster.node(victim)
    await (await LevelEngine.open(join(node.dataDir, 'db'))).close()
    flipStoredBody(node.dataDir, bodies[7] as string)
    node.output = ''
    await cluster.restart(victim)
    const exited = new Promise<number | null>((resolve) => node.child?.once('exit', (code) => resolve(code)))
    let exitCode: number | null | undefined
    void exited.then((code) => {
      exitCode = code
    })
    // Leadership back to the damaged node, so that its reads serve the next lease.
    const led = await waitFor(
      async () => {
        if (exitCode !== undefined) return true
        await client?.admin.transferLeader(partition.groupId, victim).catch(() => {})
        const now = await client?.admin.describeQueue('damaged')
        return now?.partitions[0]?.leaderId === victim
      },
      30_000,
      250,
    )
    expect(led).toBe(true)

    const got = new Map<number, string>()
    for await (const m of client.consumer('damaged', { prefetch: 20, waitMs: 1_000, visibilityMs: 3_000 })) {
      got.set(m.id, m.text())
      await m.ack()
      if (got.size === bodies.length) break
    }
    expect([...got.values()].sort()).toEqual([...bodies].sort())

    expect(
      await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 30_000))]),
    ).toBe(1)
    expect(node.output).toMatch(
      /found damaged data \(database at .*: the value of key [0-9a-f]+ fails its checksum/,
    )
    expect(node.crashes.length).toBe(1) // its own exit, as the harness records it
    await cluster.kill(victim) // (already gone: only clears the harness's handle)
    // Quarantined: a later start refuses the database.
    node.output = ''
    expect(await cluster.startExpectingExit(victim)).toBe(1)
    expect(node.output).toMatch(/quarantined/)
  }, 120_000)
})
