/**
 * The errors of the Raft core, in two typed sets (as tikv/raft-rs does): storage errors,
 * thrown by a LogStorage, and consensus errors, returned to callers of the core and the
 * runtime. Each has a stable `code` and says whether a retry can help.
 */

import type { ReplicaId } from './types'

export const RaftErrorCode = {
  Compacted: 'COMPACTED',
  Unavailable: 'UNAVAILABLE',
  NotLeader: 'NOT_LEADER',
  ProposalDropped: 'PROPOSAL_DROPPED',
  InvalidConfig: 'INVALID_CONFIG',
  InvalidArgument: 'INVALID_ARGUMENT',
  Overloaded: 'OVERLOADED',
  Stopped: 'STOPPED',
  SnapshotTooLarge: 'SNAPSHOT_TOO_LARGE',
} as const
export type RaftErrorCode = (typeof RaftErrorCode)[keyof typeof RaftErrorCode]

export abstract class RaftError extends Error {
  abstract readonly code: RaftErrorCode
  abstract readonly retriable: boolean
}

/** Storage: the requested index lies before the first entry kept (it was compacted). */
export class CompactedError extends RaftError {
  override readonly name = 'CompactedError'
  readonly code = RaftErrorCode.Compacted
  readonly retriable = false
}

/** Storage: the requested index lies after the last entry. */
export class UnavailableError extends RaftError {
  override readonly name = 'UnavailableError'
  readonly code = RaftErrorCode.Unavailable
  readonly retriable = false
}

/**
 * Storage: a snapshot's data is above what the storage keeps (its limit). The log is not
 * compacted behind it; RaftHost tries again after another `compactEntries` entries.
 */
export class SnapshotTooLargeError extends RaftError {
  override readonly name = 'SnapshotTooLargeError'
  readonly code = RaftErrorCode.SnapshotTooLarge
  readonly retriable = false
}

/**
 * Consensus: this replica is not the leader of its group. Retry against `leaderHint`
 * (the replica this one believes leads, or '' when it knows none: retry after a moment).
 */
export class NotLeaderError extends RaftError {
  override readonly name = 'NotLeaderError'
  readonly code = RaftErrorCode.NotLeader
  readonly retriable = true
  readonly leaderHint: ReplicaId
  constructor(leaderHint: ReplicaId, options?: { cause?: unknown }) {
    super(
      leaderHint === ''
        ? 'not the leader and no leader is known; retry shortly'
        : `not the leader; retry against leader ${leaderHint}`,
      options,
    )
    this.leaderHint = leaderHint
  }
}

/**
 * Consensus: the proposal was not appended, or its outcome is unknown (a leadership
 * transfer is under way, a configuration change is pending, the uncommitted log is full,
 * or the entry was overwritten by a new leader). Retrying may help; the message says why.
 */
export class ProposalDroppedError extends RaftError {
  override readonly name = 'ProposalDroppedError'
  readonly code = RaftErrorCode.ProposalDropped
  readonly retriable = true
}

/** Consensus: a group's configuration is invalid (duplicate ids, no voters, self missing…). */
export class InvalidConfigError extends RaftError {
  override readonly name = 'InvalidConfigError'
  readonly code = RaftErrorCode.InvalidConfig
  readonly retriable = false
}

/** Consensus: an argument is out of its documented range (an empty proposal, a bad id…). */
export class InvalidArgumentError extends RaftError {
  override readonly name = 'InvalidArgumentError'
  readonly code = RaftErrorCode.InvalidArgument
  readonly retriable = false
}

/**
 * Runtime: back-pressure. The group's proposal queue or in-flight bytes are at their
 * configured limit; retry after some proposals have been applied.
 */
export class OverloadedError extends RaftError {
  override readonly name = 'OverloadedError'
  readonly code = RaftErrorCode.Overloaded
  readonly retriable = true
}

/**
 * Runtime: the host stopped after a storage or state machine failure (see `cause`); it
 * accepts no more work. Restart the process (or the host) from its durable state.
 */
export class HostStoppedError extends RaftError {
  override readonly name = 'HostStoppedError'
  readonly code = RaftErrorCode.Stopped
  readonly retriable = false
}
