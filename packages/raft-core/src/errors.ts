/**
 * The errors of the Raft core, in two typed sets (as tikv/raft-rs does): storage errors,
 * thrown by a LogStorage, and consensus errors, returned to callers of the core and the
 * runtime. Each has a stable `code` and says whether a retry can help.
 */

export const RaftErrorCode = {
  Compacted: 'COMPACTED',
  Unavailable: 'UNAVAILABLE',
  NotLeader: 'NOT_LEADER',
  ProposalDropped: 'PROPOSAL_DROPPED',
  InvalidConfig: 'INVALID_CONFIG',
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
