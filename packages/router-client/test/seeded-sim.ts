import { NotLeaderError, seededRandom as prng } from '@mq/protocol'
import { expect, vi } from 'vitest'
import { fail, type Replica } from './stub-pool'

/** What the seeded simulations run under fake timers (the Router's and the stubs' clocks). */
export const FAKED = [
  'setTimeout',
  'clearTimeout',
  'setImmediate',
  'clearImmediate',
  'Date',
  'performance',
] as const

/**
 * Runs `run` for the seeds SIM_FROM (1) onwards, SIM_SEEDS of them (`defaultSeeds`), each under
 * fake timers with Math.random seeded too (the router's backoff jitter), so that a seed replays
 * alone; expects each to report no problem.
 */
export async function runSeeds(
  defaultSeeds: number,
  run: (seed: number) => Promise<readonly string[]>,
): Promise<void> {
  const from = Number(process.env.SIM_FROM ?? 1)
  const seeds = Number(process.env.SIM_SEEDS ?? defaultSeeds)
  vi.useFakeTimers({ toFake: [...FAKED] })
  try {
    for (let seed = from; seed < from + seeds; seed++) {
      vi.spyOn(Math, 'random').mockImplementation(prng(-seed))
      const problems = await run(seed)
      // Nothing of this run (a reply after close) runs into the next.
      vi.clearAllTimers()
      expect(problems, `seed ${seed}`).toEqual([])
    }
  } finally {
    vi.restoreAllMocks()
    vi.useRealTimers()
  }
}

/**
 * With `failover`, a leader moving among replicas A, B and C every 0.3–3 s, a deposed one
 * falling silent for a while first at times (its calls wait, then it answers NOT_LEADER);
 * without, A leads throughout. Draws from `rand`, the run's seeded random.
 */
export function movingLeader(rand: () => number, failover: boolean) {
  const pick = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1))
  let leader = 'A'
  let ended = false
  const silentUntil = new Map<string, number>()
  const moveLeader = () => {
    const next = ['A', 'B', 'C'][pick(0, 2)] as string
    if (next !== leader && rand() < 0.5) silentUntil.set(leader, Date.now() + pick(100, 1_500))
    leader = next
    if (!ended) setTimeout(moveLeader, pick(300, 3_000))
  }
  if (failover) setTimeout(moveLeader, pick(300, 3_000))
  return {
    /**
     * Whether a call to `address` is not for it to answer now: silent, it is made `again` once
     * its silence ends; not the leader, it is answered NOT_LEADER naming the leader.
     */
    refuses(address: string, reply: Parameters<Replica>[2], again: () => void): boolean {
      const silentMs = (silentUntil.get(address) ?? 0) - Date.now()
      if (silentMs > 0) {
        setTimeout(again, silentMs)
        return true
      }
      if (address === leader) return false
      const hint = leader
      setTimeout(
        () => fail(reply, new NotLeaderError('not the leader', { leaderId: hint, leaderAddress: hint })),
        pick(0, 20),
      )
      return true
    },
    /** No more moves. */
    end(): void {
      ended = true
    },
  }
}
