import type { ReplicaId } from './types'

/** The roles of a replica (Raft §5.1, plus the pre-vote round of dissertation §9.6). */
export const Role = {
  Follower: 'follower',
  PreCandidate: 'preCandidate',
  Candidate: 'candidate',
  Leader: 'leader',
} as const
export type Role = (typeof Role)[keyof typeof Role]

/** Volatile state worth telling the caller about; not persisted. */
export interface SoftState {
  readonly lead: ReplicaId
  readonly role: Role
}

/**
 * A linearizable read is safe once the state machine has applied `index` (Raft §8,
 * ReadIndex): the leader confirmed with a quorum that it still leads at that commit index.
 */
export interface ReadState {
  readonly index: number
  readonly requestCtx: string
}

/** Counters of what the core dropped instead of acting on. */
export interface RaftStats {
  /** Messages that failed validation (bad fields, wrong recipient…). */
  droppedMalformed: number
  /** Messages from an older term, or that no longer apply to the current state. */
  droppedStale: number
  /** Vote requests ignored because a leader was heard within the election timeout (§6). */
  ignoredInLease: number
  /** Outgoing messages dropped because the outbox was at outboxMessagesMax. */
  droppedOutbound: number
  /** Vote requests, entries and snapshots refused while holding nothing (RaftConfig.joinBySnapshot). */
  refusedHoldingNothing: number
}
