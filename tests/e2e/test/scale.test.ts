import { describe, expect, it } from 'vitest'
import { runScale } from '../src/scale-run'
import { outcomeProblems } from '../src/steady-load'

// Claim 2 of the seed, live: under a steady produce/consume load, the data groups grow from
// 3 to 6 and shrink to 2 while partitions move with a fenced hand-off, and the meta leader is
// SIGKILLed in the middle of the moves; then a 4th node joins and is given replicas, and n3 is
// drained, stopped and removed. Every acknowledged message is consumed, none twice.
describe('scaling the data groups under load', () => {
  it('grows 3 → 6, shrinks to 2 (meta leader killed mid-move), joins n4, drains and removes n3, losing and duplicating nothing', async () => {
    const r = await runScale({
      seed: 10,
      nodes: 3,
      steps: [6, 2],
      partitions: 6,
      killMetaLeader: true,
      joinAndDrain: true,
    })
    console.log(r.serverLog.join('\n'))
    expect(r.groupsAfterStep.map((g) => g.length)).toEqual([6, 2])
    // 2 groups × 3 replicas over 4 nodes, then over the 3 left once n3 is drained.
    expect(r.afterJoin?.n4).toBeGreaterThan(0)
    expect(r.afterDrain).toMatchObject({ n3: 0 })
    expect(Object.values(r.afterDrain ?? {}).reduce((a, b) => a + b, 0)).toBe(6)
    // Then, stopped, it is removed from the node list (not while it still ran).
    expect(r.removal?.refusedWhileAlive).toMatch(/node n3 is alive \(heard from .* s ago\): stop its process/)
    expect(r.removal?.removedAfterStopMs).toBeDefined()
    expect([...(r.removal?.nodesAfter ?? [])].sort()).toEqual(['n1', 'n2', 'n4'])
    // Started again under its id, it is refused and exits 1.
    expect(r.removal?.restartExit).toBe(1)
    expect(r.removal?.restartSaid).toMatch(/cannot come back under that id/)
    expect(r.metaLeaderKilled).not.toBe('')
    expect(r.notDeleted).toEqual([])
    // Growing to 6 moves at least 3 of 6 partitions; shrinking to 2 empties 4 groups.
    expect(r.moves.length).toBeGreaterThanOrEqual(6)
    expect(r.report.ackedEnqueues).toBeGreaterThan(100)
    expect(outcomeProblems(r)).toEqual([])
    expect(r.crashes).toEqual([])
    console.log(
      `scale run: meta leader killed ${r.killedDuringCopy ? 'during a copy' : 'after the step'}; ${r.moves.length} moves, longest client-visible pause ${Math.max(...r.moves.map((m) => m.pauseMs))} ms, ${r.report.ackedEnqueues} acknowledged enqueues, ${r.elapsedMs} ms`,
    )
  }, 150_000)
})
