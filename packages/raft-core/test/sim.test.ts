import { describe, expect, it } from 'vitest'
import { EntryType } from '../src/index'
import { SafetyChecker, SafetyViolation } from '../src/sim/checker'
import { replayCommand, SimCluster, SimFailure } from '../src/sim/cluster'
import { FEW_VOTERS, REJOIN_WIPED } from '../src/sim/swarm'

/** Seeds run in CI: bounded so the whole suite stays near two minutes on a 2-core machine. */
const SEEDS = Number(process.env.RAFT_SIM_SEEDS ?? 4000)
const SLICES = 8

describe('simulator', () => {
  for (let slice = 0; slice < SLICES; slice++) {
    const per = Math.ceil(SEEDS / SLICES)
    const first = 1 + slice * per
    it(`seeds ${first}..${first + per - 1} keep every safety property and recover liveness`, () => {
      let committed = 0
      for (let s = first; s < first + per; s++) {
        const r = new SimCluster(s).run() // throws SimFailure, with the replay command
        committed += r.committed
        expect(r.livenessMs).toBeLessThan(20_000)
      }
      expect(committed).toBeGreaterThan(per * 10)
    }, 300_000) // CPU-bound: ~30 s per slice on an idle 2-core machine, far more when it is shared
  }

  // Replicas added again after their removal start with nothing under their id (as mq-server
  // re-creates a data group's replica on a node that hosted it): with RaftConfig.joinBySnapshot
  // they vote for nobody, take no entries, and take as their first state only a snapshot
  // sent for them (their join nonce), taken since they were added, listing them as learners.
  // 3,000-4,000 seeds each of eight such mixes ran clean on 2026-12-06 (`sim --seeds 4000 --rejoin`).
  it('replicas created again with nothing under their id keep every safety property', () => {
    let wipes = 0
    for (let s = 1; s <= Math.ceil(SEEDS / 8); s++) wipes += new SimCluster(s, REJOIN_WIPED).run().wipes
    expect(wipes).toBeGreaterThan(SEEDS / 16)
  }, 300_000)

  // Groups that shrink to one or two voters and grow again (FEW_VOTERS): the default mix never
  // removes a voter below three, so a lone voter committing and answering reads alone, and a
  // leader of two removing or demoting itself, happen only here. Without the fix of 2026-12-07
  // (a voter whose removal is in its log uncommitted still campaigns) seeds 106, 110 and 238
  // lose liveness; the default mix never found it.
  it('groups shrunk to one or two voters and grown again keep every safety property', () => {
    let lone = 0
    for (let s = 1; s <= Math.ceil(SEEDS / 16); s++)
      if (new SimCluster(s, FEW_VOTERS).run().fewestVoters === 1) lone++
    expect(lone).toBeGreaterThan(SEEDS / 80)
  }, 300_000)

  it('without joinBySnapshot, a replica created again under its id breaks safety (the check can fail)', () => {
    const broken: number[] = []
    for (let s = 1; s <= 300; s++) {
      try {
        new SimCluster(s, { ...REJOIN_WIPED, joinBySnapshot: false }).run()
      } catch (e) {
        if (!(e instanceof SimFailure) || !/leader completeness|committed|applies|read/.test(e.message))
          throw e
        expect(e.message).toContain('--rejoin')
        broken.push(s)
      }
    }
    expect(broken.length).toBeGreaterThan(0)
  }, 120_000)

  it('replays a seed exactly', () => {
    const a = new SimCluster(4242).run()
    const b = new SimCluster(4242).run()
    expect(b).toEqual(a)
    expect(a.events).toBeGreaterThan(1000)
  })

  it('exercises every fault across a sweep (the sim is not vacuous)', () => {
    const total = {
      crashes: 0,
      snapshotsInstalled: 0,
      confChanges: 0,
      transfers: 0,
      reads: 0,
      dropped: 0,
      elections: 0,
    }
    for (let s = 1; s <= 60; s++) {
      const r = new SimCluster(s).run()
      for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += r[k]
    }
    for (const v of Object.values(total)) expect(v).toBeGreaterThan(0)
  })

  // Clocks 0-10 s apart, leadership moving (elections, transfers, partitions), no crashes: a
  // new leader continues its predecessor's group clock (raft-core README, "Timestamps").
  // Every leader's readings are checked (leaderClockPace), not only the committed stamps.
  const skewed = {
    crashRate: 0,
    clockRateSpread: 0,
    clockOffsetMsMax: 10_000,
    transferRate: 0.02,
    leaderClockPace: true,
  }

  it('the group clock keeps pace with real time across leader changes between skewed clocks', () => {
    let elections = 0
    for (let s = 1; s <= 100; s++) elections += new SimCluster(s, skewed).run().elections
    expect(elections).toBeGreaterThan(150) // leadership did move
  }, 120_000)

  it('without a steady clock a leader change to a replica ahead jumps the group clock (the check can fail)', () => {
    const jumped: number[] = []
    for (let s = 1; s <= 30; s++) {
      try {
        new SimCluster(s, { ...skewed, steadyClock: false }).run()
      } catch (e) {
        // Either check may see it first: a leader's reading, or the stamp once committed.
        if (
          !(e instanceof SimFailure) ||
          !/the group clock jumped|the committed group clock ran ahead/.test(e.message)
        )
          throw e
        jumped.push(s)
      }
    }
    expect(jumped.length).toBeGreaterThan(5)
  }, 120_000)

  // The same with crashes: a replica restarted into a group whose running majority heard no
  // leader since (all of it restarted) continues the clock from its wall clock plus the offset
  // it recorded before (Ready.clockOffsetMs), not from its wall clock alone.
  const crashing = { ...skewed, crashRate: 0.02 }

  // Seed 28 is the leader-readings check's known false alarm (README, "Timestamps": a replica
  // elected on a voter's clock that last heard a late or duplicated heartbeat; none of that
  // leader's readings commits): its committed stamps keep pace.
  it('replicas restarted with their recorded clock offsets keep the group clock at pace', () => {
    let crashes = 0
    for (let s = 1; s <= 300; s++) if (s !== 28) crashes += new SimCluster(s, crashing).run().crashes
    expect(crashes).toBeGreaterThan(500)
    expect(() => new SimCluster(28, crashing).run()).toThrow(/the group clock jumped/)
    expect(new SimCluster(28, { ...crashing, leaderClockPace: false }).run().crashes).toBeGreaterThan(0)
  }, 120_000)

  it('without recorded offsets a restarted leader starts the clock from its own and it jumps (the check can fail)', () => {
    const jumped: number[] = []
    for (let s = 1; s <= 300; s++) {
      try {
        new SimCluster(s, { ...crashing, recordClockOffset: false }).run()
      } catch (e) {
        if (!(e instanceof SimFailure) || !e.message.includes('the group clock jumped')) throw e
        jumped.push(s)
      }
    }
    expect(jumped).toEqual([16, 28, 109, 153, 208, 237]) // pinned: trajectories change with the code
  }, 120_000)

  // What leases rest on, the committed stamps (checked on every seed whose clocks run at one
  // rate), over more crash seeds: 326 (a deposed leader's overwritten stamps kept as a floor)
  // and 1040 (a pre-vote's clock recorded as the offset) ran ahead before 2026-12-04.
  it('with crashes, committed stamps keep pace over 1,000 more seeds; without recorded offsets they jump', () => {
    const committedOnly = { ...crashing, leaderClockPace: false }
    let crashes = 0
    for (let s = 301; s <= 1300; s++) crashes += new SimCluster(s, committedOnly).run().crashes
    expect(crashes).toBeGreaterThan(3000)
    const jumped: number[] = []
    for (const s of [326, 372, 390, 410, 489]) {
      try {
        new SimCluster(s, { ...committedOnly, recordClockOffset: false }).run()
      } catch (e) {
        if (!(e instanceof SimFailure) || !e.message.includes('the committed group clock ran ahead')) throw e
        jumped.push(s)
      }
    }
    expect(jumped).toEqual([372, 390, 489])
  }, 120_000)

  // Seed 30,804 of the default swarm (clocks at different rates, crashes): a leader committing
  // its own entries of an earlier term continued the clock of a leader whose entries it never
  // held, 450 ms ahead of theirs, until 2026-12-04 (raft-core README, "Timestamps").
  it('a leader committing its older entries does not continue a clock heard from a leader it never followed', () => {
    expect(new SimCluster(30_804).run().committed).toBeGreaterThan(10)
  })

  // Seeds of a crash mix (short election timeouts, slow heartbeats, lossy links): a replica
  // heard a leader whose entries never reached it (its own log conflicted), on a clock ahead of
  // the committed one, and continued that clock once elected, across a restart: heard after it
  // (1171, 1745: the bound above, the log's last stamp counted forward since it reached us,
  // knew no such moment after a restart), or recorded as its clock offset before it (4830), or
  // both (3446). The committed stamps ran 67 to 300 ms past the pace allowed.
  it('a restarted leader does not continue a clock heard from a leader whose entries never reached it', () => {
    const mix = {
      electionTicks: 4,
      heartbeatTicks: 3,
      preVote: false,
      checkQuorum: true,
      dropRate: 0.2,
      duplicateRate: 0.1,
      readRate: 0.2,
      confChangeRate: 0.04,
      compactEntries: 6,
      snapshotChunkBytes: 8,
      inflightMsgsMax: 2,
      msgEntriesMax: 2,
      pipelineMax: 3,
      fsyncMsMax: 5,
    }
    for (const s of [1171, 1745, 3446, 4830]) expect(new SimCluster(s, mix).run().crashes).toBeGreaterThan(0)
  })

  it('a failure names the seed and the command that replays it', () => {
    const f = new SimFailure(77, 1234, 'election safety: x')
    expect(f.message).toContain('seed 77')
    expect(f.message).toContain(replayCommand(77))
    expect(replayCommand(77)).toBe('pnpm --filter @mq/raft-core sim --seed 77')
  })
})

describe('SafetyChecker catches broken runs', () => {
  const entry = (index: number, term: number, text: string) => ({
    index,
    term,
    type: EntryType.Normal,
    timestampMs: 0,
    data: new TextEncoder().encode(text),
  })

  it('two leaders in one term', () => {
    const c = new SafetyChecker()
    c.leaderElected('a', 3, () => 0, 1)
    expect(() => c.leaderElected('b', 3, () => 0, 1)).toThrow(SafetyViolation)
  })

  it('two different entries at the same index and term (log matching)', () => {
    const c = new SafetyChecker()
    c.persisted('a', [entry(5, 2, 'x')], 1)
    expect(() => c.persisted('b', [entry(5, 2, 'y')], 1)).toThrow(/log matching/)
    expect(() => c.persisted('b', [entry(5, 2, 'x')], 2)).toThrow(/log matching/)
  })

  it('a leader missing an entry committed in an earlier term (leader completeness)', () => {
    const c = new SafetyChecker()
    c.committed('a', 1, 1, 1)
    c.committed('a', 2, 1, 1)
    expect(() => c.leaderElected('b', 2, (i) => (i === 2 ? 2 : 1), 1)).toThrow(/leader completeness/)
  })

  it('a committed entry that changes, a diverging state machine, a stale read', () => {
    const c = new SafetyChecker()
    c.committed('a', 4, 2, 2)
    expect(() => c.committed('b', 4, 3, 3)).toThrow(/committed entry changed/)
    c.applied('a', 4, 111)
    expect(() => c.applied('b', 4, 222)).toThrow(/state machine safety/)
    expect(() => c.readAnswered('a', 3, 4)).toThrow(/linearizable read/)
  })
})
