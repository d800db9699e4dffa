import { rmSync } from 'node:fs'
import { afterAll, describe, expect, it } from 'vitest'
import { type LoadedCluster, startLoadedCluster } from '../src/loaded-cluster'
import { waitFor } from '../src/scale-run'
import { outcomeProblems } from '../src/steady-load'

// A node that forgot its Raft logs and votes must not take part under its old id: it could
// vote twice in a term, or for a candidate missing entries it had acknowledged. Two ways to
// get one: a node's data dir wiped (or a new disk) and the node started again with the same
// flags, and a second process started under a running node's id. Both are refused by the meta
// leader (the node's store id differs from the recorded one) before they host any replica —
// a founder with an empty data dir does not even host its meta replica while the other
// founders say the meta group already ran — and both exit 1 saying what to do.
describe('a node that lost its data dir, and a second process under a node id', () => {
  let run: LoadedCluster | undefined

  afterAll(async () => {
    await run?.close()
  })

  it('are refused and exit 1 without hosting a replica; nothing acknowledged is lost', async () => {
    run = await startLoadedCluster({ nodes: 3 }, 'lost', 41)
    const { cluster, steady, acked } = run
    expect(await waitFor(() => acked() > 200, 30_000)).toBe(true)
    const hosted = /hosts a replica of|empty data dir, hosts its meta replica/

    // A second process under n2's id (its own port and data dir, joining) while n2 runs.
    const twin = await cluster.startTwin('n2')
    console.log(`lost-data: a second n2 exited ${twin.exit}`)
    expect(twin.exit, twin.output.slice(-3000)).toBe(1)
    expect(twin.output).toMatch(/node n2 is registered with another data dir than this process's/)
    expect(twin.output.split('\n').filter((l) => hosted.test(l))).toEqual([])

    // n3's data dir is wiped while it is down, and n3 is started again with the same flags.
    const n3 = cluster.node('n3')
    await cluster.kill('n3')
    rmSync(n3.dataDir, { recursive: true, force: true })
    n3.output = ''
    const startedMs = Date.now()
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    console.log(`lost-data: n3 with a wiped data dir exited 1 after ${Date.now() - startedMs} ms`)
    expect(n3.output).toMatch(/node n3 is registered with another data dir than this process's/)
    expect(n3.output).toMatch(/start it with a new --node-id and an empty --data-dir/)
    expect(n3.output).toMatch(/founding member that started with an empty data dir: .* waiting/) // its gate
    expect(n3.output.split('\n').filter((l) => hosted.test(l))).toEqual([])
    // Started again as a supervisor would (its data dir now has a database): still fresh, still
    // refused at its gate.
    n3.output = ''
    expect(await cluster.startExpectingExit('n3')).toBe(1)
    expect(n3.output).toMatch(/node n3 is registered with another data dir than this process's/)
    expect(n3.output.split('\n').filter((l) => hosted.test(l))).toEqual([])

    const before = acked()
    expect(await waitFor(() => acked() > before + 100, 30_000)).toBe(true)
    const outcome = await steady.finish()
    console.log(`lost-data: ${acked()} enqueues acknowledged, ${outcomeProblems(outcome).length} problems`)
    expect(outcomeProblems(outcome)).toEqual([])
    expect(cluster.nodes.flatMap((n) => n.crashes)).toEqual([])
  }, 180_000)
})
