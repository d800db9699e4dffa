import { cpSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { cutLog, flipLogBits, writeAheadLogs } from '../src/damage'
import { type LoadedCluster, startLoadedCluster } from '../src/loaded-cluster'
import { waitFor } from '../src/scale-run'
import { outcomeProblems } from '../src/steady-load'

// A minority node whose data files get flipped bits, or whose write-ahead log is cut short,
// while it is down (Jepsen lost up to half of NATS's acknowledged writes this way). LevelDB
// alone would skip the damaged log records, or the cut-off ones, and open without them; the node must detect it, refuse to start (so it neither votes nor
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
    const n3 = cluster.node('n3')
    // Killed once its current write-ahead log holds enough batches to lose some by cutting it
    // (a cut within the last batch or two before the kill is the undetected window).
    const newest = () => writeAheadLogs(n3.dataDir)[0]
    expect(await waitFor(async () => statSync(newest() ?? n3.dataDir).size > 64 * 1024, 30_000, 100)).toBe(
      true,
    )
    await cluster.kill('n3')
    // Two copies of its data, to cut their logs short (a cut LevelDB cannot see, nor report).
    const copies = {
      boundary: join(n3.dataDir, '..', 'n3-cut-boundary'),
      inside: join(n3.dataDir, '..', 'n3-cut-inside'),
    }
    for (const copy of Object.values(copies)) cpSync(n3.dataDir, copy, { recursive: true })
    expect(flipLogBits(n3.dataDir).length).toBeGreaterThan(0)
    n3.output = ''
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    expect(n3.output).toMatch(/dropped damaged records/)
    expect(n3.output).not.toMatch(/listening on/)
    // The evidence LevelDB left is gone after that open; the quarantine marker remembers.
    n3.output = ''
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    expect(n3.output).toMatch(/quarantined/)
    // A write-ahead log cut short, at a record boundary and inside a record: the durability
    // mark (MQ-DURABLE) remembers that the lost batches had been synced.
    for (const [where, copy] of Object.entries(copies) as ['boundary' | 'inside', string][]) {
      rmSync(n3.dataDir, { recursive: true, force: true })
      cpSync(copy, n3.dataDir, { recursive: true })
      rmSync(copy, { recursive: true, force: true })
      const lost = cutLog(n3.dataDir, where)
      expect(lost, where).toBeGreaterThan(2)
      n3.output = ''
      expect(await cluster.startExpectingExit('n3'), where).toBe(1)
      expect(n3.output, where).toMatch(
        /write-ahead log lost synced writes: LevelDB recovered up to batch \d+, but batch \d+ had been made durable/,
      )
      expect(n3.output, where).not.toMatch(/listening on/)
      console.log(`corruption: n3's log cut (${where}, ${lost} records dropped) refused: exit 1`)
    }
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
