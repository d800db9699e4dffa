import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { type LoadedCluster, startLoadedCluster } from '../src/loaded-cluster'
import { waitFor } from '../src/scale-run'
import { outcomeProblems } from '../src/steady-load'

/** Flips one bit at 5 spots of each of the node's LevelDB write-ahead logs (`db/*.log`). */
function flipLogBits(dataDir: string): string[] {
  const db = join(dataDir, 'db')
  const logs = readdirSync(db).filter((f) => f.endsWith('.log'))
  for (const f of logs) {
    const bytes = readFileSync(join(db, f))
    for (let k = 1; k <= 5; k++) {
      const at = Math.floor((bytes.length * k) / 7)
      bytes[at] = (bytes[at] ?? 0) ^ 0x10
    }
    writeFileSync(join(db, f), bytes)
  }
  return logs
}

// A minority node whose data files get flipped bits while it is down (Jepsen lost up to half
// of NATS's acknowledged writes this way). LevelDB alone would skip the damaged log records
// and open without them; the node must detect it, refuse to start (so it neither votes nor
// serves from the damaged data), keep refusing on later starts, and the documented recovery
// (a fresh node under a new id joins; the dead id's replicas are replaced on it) must rebuild
// the replicas from the peers, with nothing acknowledged lost and no split brain.
describe('a node with corrupted data files', () => {
  let run: LoadedCluster | undefined

  afterAll(async () => {
    await run?.close()
  })

  it('refuses to start from damaged data, and is replaced from its peers with nothing lost', async () => {
    run = await startLoadedCluster(
      { nodes: 3, serverArgs: ['--replace-dead-after-ms', '10000'] },
      'corrupt',
      31,
    )
    const { cluster, steady, acked, dataGroups } = run
    await cluster.kill('n3')
    const n3 = cluster.node('n3')
    expect(flipLogBits(n3.dataDir).length).toBeGreaterThan(0)
    n3.output = ''
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    expect(n3.output).toMatch(/dropped damaged records/)
    expect(n3.output).not.toMatch(/listening on/)
    // The evidence LevelDB left is gone after that open; the quarantine marker remembers.
    n3.output = ''
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    expect(n3.output).toMatch(/quarantined/)

    const before = acked()
    expect(await waitFor(async () => acked() > before + 100, 30_000, 100)).toBe(true)

    // Recovery: a fresh node under a new id; n3's replicas are replaced on it.
    const replacedFrom = Date.now()
    await cluster.join()
    const replaced = await waitFor(
      async () => {
        const groups = await dataGroups()
        return groups.every((g) => g.state !== 'changing' && !g.replicas.includes('n3'))
      },
      90_000,
      250,
    )
    const groups = await dataGroups()
    console.log(
      `corruption: n3's replicas replaced after ${Date.now() - replacedFrom} ms: ${JSON.stringify(groups.map((g) => [g.groupId, g.replicas]))}`,
    )
    expect(replaced).toBe(true)
    expect(groups.some((g) => g.replicas.includes('n4'))).toBe(true)

    const outcome = await steady.finish()
    console.log(`corruption: ${acked()} enqueues acknowledged, ${outcomeProblems(outcome).length} problems`)
    expect(outcomeProblems(outcome)).toEqual([])
    expect(cluster.nodes.flatMap((n) => n.crashes)).toEqual([])
  }, 240_000)
})
