import { describe, expect, it } from 'vitest'
import { runScale } from '../src/scale-run'
import { outcomeProblems } from '../src/steady-load'

// Claim 2 of the seed, live: under a steady produce/consume load, the data groups grow from
// 3 to 6 and shrink to 2 while partitions move with a fenced hand-off, and the meta leader is
// SIGKILLed in the middle of the moves. Every acknowledged message is consumed, none twice.
describe('scaling the data groups under load', () => {
  it('grows 3 → 6 and shrinks to 2, killing the meta leader mid-move, losing and duplicating nothing', async () => {
    const r = await runScale({ seed: 10, nodes: 3, steps: [6, 2], partitions: 6, killMetaLeader: true })
    console.log(r.serverLog.join('\n'))
    expect(r.groupsAfterStep.map((g) => g.length)).toEqual([6, 2])
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
