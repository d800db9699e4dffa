import { afterAll, describe, expect, it } from 'vitest'
import { type LoadedCluster, startLoadedCluster } from '../src/loaded-cluster'
import { waitFor } from '../src/scale-run'
import { fillDisk, freeDisk } from '../src/small-disk'
import { outcomeProblems } from '../src/steady-load'

const asRoot = process.getuid?.() === 0

// A node whose data dir sits on a small tmpfs that fills up under load: its storage writes
// fail (ENOSPC), the node stops serving (the Raft host treats a failed durable write as
// fatal: nothing it could not persist is acknowledged), the other two carry on. Once space
// returns, the node is restarted from its data dir, catches up, and carries the quorum with
// one other node down; the checker finds nothing lost or doubled. Needs root (mount); as
// another user the platform cannot give a node a small disk, and the test is not collected.
describe.runIf(asRoot)('a node whose disk fills up', () => {
  let run: LoadedCluster | undefined

  afterAll(async () => {
    await run?.close()
  })

  it('fails its writes cleanly, and rejoins and catches up once space returns', async () => {
    run = await startLoadedCluster({ nodes: 3, smallDisks: { n3: 64 << 20 } }, 'disk', 21)
    const { cluster, steady, acked } = run

    const n3 = cluster.node('n3')
    const filled = fillDisk(n3.dataDir)
    console.log(`disk full: ${filled} filler bytes on n3's tmpfs`)
    // n3 holds a replica of every group: its next log append fails.
    const failed = await waitFor(
      async () => /stopped serving after a fatal error/.test(n3.output),
      30_000,
      100,
    )
    expect(failed, n3.output.slice(-3_000)).toBe(true)
    expect(n3.output).toMatch(/ENOSPC|no space left/i)
    expect(n3.crashes).toEqual([])
    // The other two go on acknowledging enqueues.
    const before = acked()
    expect(await waitFor(async () => acked() > before + 100, 30_000, 100)).toBe(true)

    freeDisk(n3.dataDir)
    await cluster.kill('n3')
    await cluster.restart('n3')
    // With n1 down every majority needs n3: nothing commits unless it caught up.
    await cluster.kill('n1')
    const withoutN1 = acked()
    expect(await waitFor(async () => acked() > withoutN1 + 100, 30_000, 100)).toBe(true)
    await cluster.restart('n1')

    const outcome = await steady.finish()
    console.log(`disk full: ${acked()} enqueues acknowledged, ${outcomeProblems(outcome).length} problems`)
    expect(outcomeProblems(outcome)).toEqual([])
    expect(cluster.nodes.flatMap((n) => n.crashes)).toEqual([])
  }, 240_000)
})
