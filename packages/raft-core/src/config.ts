import { InvalidConfigError } from './errors'
import type { Prng } from './prng'
import type { ReplicaId } from './types'

/** The options of one Raft replica. Times are in ticks; sizes in bytes or entries. */
export interface RaftConfig {
  readonly id: ReplicaId
  /** Followers wait a random [electionTicks, 2 * electionTicks) without a leader, then campaign. */
  readonly electionTicks: number
  /** A leader sends heartbeats every heartbeatTicks; requires heartbeatTicks < electionTicks. */
  readonly heartbeatTicks: number
  /** The only source of randomness (election timeouts). */
  readonly prng: Prng
  /** Campaign with a pre-vote round first, so a rejoining replica does not disrupt (§9.6). */
  readonly preVote: boolean
  /** A leader steps down when it has not heard from a quorum for electionTicks (§6.2). */
  readonly checkQuorum: boolean
  /** Bound on App messages in flight to one follower in the replicate state. */
  readonly inflightMsgsMax: number
  /** Bound on entry bytes in flight to one follower. */
  readonly inflightBytesMax: number
  /** Bound on entries in one App message. */
  readonly msgEntriesMax: number
  /** Bound on entry bytes in one App message (at least one entry is always sent). */
  readonly msgBytesMax: number
  /** Size of one InstallSnapshot chunk. */
  readonly snapshotChunkBytes: number
  /** Largest snapshot a follower buffers while receiving it. */
  readonly snapshotBytesMax: number
  /** Bound on entry bytes handed to the state machine in one Ready. */
  readonly applyBytesMax: number
  /** A leader refuses proposals while more than this many entries are uncommitted. */
  readonly uncommittedEntriesMax: number
  /** Bound on pending ReadIndex requests at a leader. */
  readonly readIndexQueueMax: number
  /**
   * Bound on messages waiting for the next Ready. Past it, new outgoing messages are dropped
   * and counted (Raft tolerates loss: heartbeats and probes resend what matters).
   */
  readonly outboxMessagesMax: number
  /** The index the state machine has already applied when the core starts (0 = snapshot's). */
  readonly appliedIndex: number
  /**
   * A leader tells followers a new commit index at once, in an empty App when it has no
   * entries for them. False leaves it to the next App or heartbeat: followers apply up to
   * heartbeatTicks later, and each commit costs one App and its reply fewer per follower
   * (for groups whose followers serve nothing, as data groups' hot standbys). Commitment and
   * safety do not depend on it.
   */
  readonly commitBroadcast: boolean
  /**
   * The stored snapshot may carry no data (a compaction that recorded only its metadata,
   * because the state machine keeps its state durably itself): a leader that must send a
   * follower a snapshot then asks for an image (RawNode.takeSnapshotWanted) and sends it once
   * the storage holds one. False: every stored snapshot is an image.
   */
  readonly snapshotsOnDemand: boolean
  /**
   * How much faster than its steady clock a leader's group clock may run to catch up with
   * its wall clock (a fraction: 0.01 lets 101 ms of group time pass per 100 ms). A new leader
   * continues the group clock its predecessor told it (Message.leaderTimeMs) at the pace of
   * its own steady clock, capped by its wall clock, so a leader change to a node whose clock
   * is ahead, or a wall clock stepped forward, no longer moves the group's time at once; a
   * group clock left behind its leader's wall clock catches up at 1 + this. Deadlines stamped
   * in group time (leases) can therefore end this much sooner in real time, never more: a
   * client counting one on its own steady clock divides it by 1 + this. 0 never catches up.
   */
  readonly stampCatchUp: number
  /**
   * A replica that starts with nothing — no log entry, no snapshot, no membership: one being
   * added — votes for nobody, takes no entries, and takes as its first state only a snapshot
   * whose membership lists it as a learner (every add goes through a learner). It may be a
   * replica created again under an id the group used before: a voter cut off since before
   * that id's removal still counts it a voter, and granted the fresh replica's vote it could
   * lead and overwrite committed entries. Leaders answer such a follower with a snapshot taken
   * after it was added (README, "Joining"). False: it joins as any follower (votes while its
   * log is empty, replays the leader's log from the first entry); for a group with peers of
   * an earlier version, whose leaders would probe it again and again.
   */
  readonly joinBySnapshot: boolean
}

export const DEFAULT_RAFT_CONFIG: Omit<RaftConfig, 'id' | 'prng'> = {
  electionTicks: 10,
  heartbeatTicks: 1,
  preVote: true,
  checkQuorum: true,
  inflightMsgsMax: 256,
  inflightBytesMax: 16 * 1024 * 1024,
  msgEntriesMax: 4096,
  msgBytesMax: 1024 * 1024,
  snapshotChunkBytes: 256 * 1024,
  snapshotBytesMax: 1024 * 1024 * 1024,
  applyBytesMax: 4 * 1024 * 1024,
  uncommittedEntriesMax: 65_536,
  readIndexQueueMax: 4096,
  outboxMessagesMax: 65_536,
  appliedIndex: 0,
  commitBroadcast: true,
  snapshotsOnDemand: false,
  stampCatchUp: 0.01,
  joinBySnapshot: true,
}

/** Fills defaults and throws InvalidConfigError for out-of-range options. */
export function resolveRaftConfig(
  options: Partial<RaftConfig> & Pick<RaftConfig, 'id' | 'prng'>,
): RaftConfig {
  const c: RaftConfig = { ...DEFAULT_RAFT_CONFIG, ...options }
  if (typeof c.id !== 'string' || c.id === '') throw new InvalidConfigError('id must be a non-empty string')
  const positive: (keyof RaftConfig)[] = [
    'electionTicks',
    'heartbeatTicks',
    'inflightMsgsMax',
    'inflightBytesMax',
    'msgEntriesMax',
    'msgBytesMax',
    'snapshotChunkBytes',
    'snapshotBytesMax',
    'applyBytesMax',
    'uncommittedEntriesMax',
    'readIndexQueueMax',
    'outboxMessagesMax',
  ]
  for (const k of positive) {
    const v = c[k]
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
      throw new InvalidConfigError(`${k} must be a positive integer, got ${String(v)}`)
    }
  }
  if (c.heartbeatTicks >= c.electionTicks) {
    throw new InvalidConfigError(
      `heartbeatTicks (${c.heartbeatTicks}) must be below electionTicks (${c.electionTicks})`,
    )
  }
  for (const k of ['commitBroadcast', 'joinBySnapshot'] as const) {
    if (typeof c[k] !== 'boolean')
      throw new InvalidConfigError(`${k} must be true or false, got ${String(c[k])}`)
  }
  if (typeof c.stampCatchUp !== 'number' || !(c.stampCatchUp >= 0 && c.stampCatchUp <= 1)) {
    throw new InvalidConfigError(`stampCatchUp must be a number from 0 to 1, got ${String(c.stampCatchUp)}`)
  }
  if (!Number.isSafeInteger(c.appliedIndex) || c.appliedIndex < 0) {
    throw new InvalidConfigError('appliedIndex must be a non-negative integer')
  }
  return c
}
