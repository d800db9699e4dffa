import type { Prng } from '../prng'

/** The fault mix and sizes of one simulation; swarmOptions() draws them from a seed. */
export interface SwarmOptions {
  readonly nodeCount: number
  readonly electionTicks: number
  readonly heartbeatTicks: number
  readonly preVote: boolean
  readonly checkQuorum: boolean
  readonly inflightMsgsMax: number
  readonly msgEntriesMax: number
  readonly msgBytesMax: number
  readonly snapshotChunkBytes: number
  /** Extra bytes in each snapshot image, so installs take several chunks. */
  readonly snapshotPadBytes: number
  /** A replica compacts its log once this many applied entries are in it. */
  readonly compactEntries: number
  readonly dropRate: number
  readonly duplicateRate: number
  readonly corruptRate: number
  readonly latencyMsMax: number
  readonly fsyncMsMax: number
  /** Chance per fault event (about every 10ms) of a new partition or clogged link. */
  readonly partitionRate: number
  readonly partitionMsMax: number
  readonly crashRate: number
  /** Chance that a crash picks the leader rather than a random replica. */
  readonly leaderCrashBias: number
  readonly downMsMax: number
  /** Each replica's clock runs at 1 ± up to this (a fraction). */
  readonly clockRateSpread: number
  /** Each replica's wall clock is ahead by a fixed [0, this) ms. */
  readonly clockOffsetMsMax: number
  /**
   * Replicas read a steady clock as well (RawNode.tick's monoMs, observeClock before each
   * step), so a new leader continues its predecessor's group clock. False: wall clocks alone.
   */
  readonly steadyClock: boolean
  /**
   * Replicas record their group clock offset (Ready.clockOffsetMs) and get it back after a
   * crash, so one restarted into a group whose running replicas heard no leader continues the
   * clock rather than starting it from its own wall clock. False: never recorded.
   */
  readonly recordClockOffset: boolean
  /**
   * Check every leader's readings of the group clock for pace too, not only the committed
   * stamps (SimCluster's #checkCommittedPace, always on where clocks run at one rate). Off by
   * default: stricter than leases need, it flags readings of a leader none of whose entries
   * commit (seed 8243: a leader cut off on its own clock, then another on its own; seed 2840
   * with crashes: a replica elected on the clock a voter told it, a voter that last heard a
   * late or duplicated heartbeat) and rounding of readings at ticks (seed 15365: 0.4 ms).
   * The scenario tests in test/sim.test.ts turn it on.
   */
  readonly leaderClockPace: boolean
  readonly clientIntervalMsMax: number
  readonly confChangeRate: number
  readonly transferRate: number
  readonly readRate: number
  readonly safetyMs: number
  readonly livenessMs: number
  /** Readies a replica may have taken and not yet advanced (pipelined persistence, as the host does). */
  readonly pipelineMax: number
  /** Whether leaders send a new commit index at once (RaftConfig.commitBroadcast). */
  readonly commitBroadcast: boolean
  /**
   * A replica added again after its removal committed starts with its storage wiped, under
   * the same id (as mq-server re-creates a data group's replica on a node that hosted it).
   */
  readonly rejoinWiped: boolean
  /** RaftConfig.joinBySnapshot of every replica. */
  readonly joinBySnapshot: boolean
  /**
   * Membership changes remove or demote a voter only while more than this many remain: 3 keeps
   * every group at three voters or more, 1 lets it shrink to a lone voter and grow again.
   */
  readonly votersMin: number
}

/**
 * Swarm testing (Groce et al., as TigerBeetle's VOPR does): each seed picks its own fault
 * rates, some near zero and some high, so that rare interleavings of one fault get explored
 * without the others drowning them.
 */
export function swarmOptions(p: Prng): SwarmOptions {
  const maybe = (chance: number, hi: number): number => (p.chance(chance) ? p.float() * hi : 0)
  const electionTicks = 6 + p.below(10)
  return {
    nodeCount: p.chance(0.6) ? 3 : p.chance(0.5) ? 5 : 4,
    electionTicks,
    heartbeatTicks: 1 + p.below(Math.min(3, electionTicks - 1)),
    preVote: p.chance(0.8),
    checkQuorum: p.chance(0.8),
    inflightMsgsMax: 1 + p.below(16),
    msgEntriesMax: 1 + p.below(64),
    msgBytesMax: 16 + p.below(4096),
    snapshotChunkBytes: 8 + p.below(64),
    snapshotPadBytes: p.below(200),
    compactEntries: 5 + p.below(200),
    dropRate: maybe(0.7, 0.2),
    duplicateRate: maybe(0.5, 0.1),
    corruptRate: maybe(0.3, 0.02),
    latencyMsMax: 1 + p.below(p.chance(0.7) ? 20 : 60),
    fsyncMsMax: p.below(6),
    partitionRate: maybe(0.6, 0.05),
    partitionMsMax: 50 + p.below(800),
    crashRate: maybe(0.6, 0.03),
    leaderCrashBias: p.float(),
    downMsMax: 20 + p.below(600),
    clockRateSpread: maybe(0.7, 0.5),
    clockOffsetMsMax: 1000, // fixed, not drawn: every seed keeps the draws it had before
    steadyClock: true,
    recordClockOffset: true,
    leaderClockPace: false,
    clientIntervalMsMax: 1 + p.below(20),
    confChangeRate: maybe(0.5, 0.05),
    transferRate: maybe(0.5, 0.03),
    readRate: maybe(0.6, 0.1),
    safetyMs: 1000 + p.below(2000),
    livenessMs: 20_000,
    pipelineMax: 1 + p.below(4),
    commitBroadcast: p.chance(0.5),
    rejoinWiped: false, // fixed, not drawn, as clockOffsetMsMax
    joinBySnapshot: true,
    votersMin: 3, // fixed, not drawn, as clockOffsetMsMax
  }
}

/**
 * Replicas added again after their removal start empty under their id, with longer and more
 * frequent partitions and membership changes, so that a voter is often cut off across a
 * removal and the re-adding (`sim --rejoin`; sim.test). Without RaftConfig.joinBySnapshot,
 * seeds of it break safety (a cut-off voter leads with the fresh replica's vote).
 */
export const REJOIN_WIPED: Partial<SwarmOptions> = {
  rejoinWiped: true,
  confChangeRate: 0.1,
  partitionRate: 0.05,
  partitionMsMax: 3000,
}

/**
 * Groups that shrink to one or two voters and grow again (`sim --few`; sim.test): a lone
 * voter commits and answers reads alone, and of two voters either may remove itself (the
 * default mix keeps three or more voters, where neither happens). With check-quorum: with
 * neither it nor pre-vote, 4 of seeds 1–9,300 lose liveness (654, 4220, 6894, 8465), as
 * README's "Joining" tells of `--rejoin`: a removed voter that never learned of its removal
 * campaigns at ever higher terms to members that then ignore their leader's older term
 * without telling it (mq-server runs both).
 */
export const FEW_VOTERS: Partial<SwarmOptions> = {
  votersMin: 1,
  confChangeRate: 0.05,
  checkQuorum: true,
}
