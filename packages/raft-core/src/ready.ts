import type { Message } from './message'
import type { ReadState, SoftState } from './read-state'
import type { Entry, HardState, Snapshot } from './types'

/**
 * The work a RawNode hands its caller, and the order the caller must do it in:
 *
 *   1. persist: install `snapshot` in the log storage if present, append `entries`, record
 *      `hardState` if present, and make all of it durable (Raft Fig. 2: term, vote and log
 *      must be on stable storage before answering RPCs);
 *   2. send `messages` (only now: a vote or an acknowledgement promises durable state);
 *   3. apply: restore the state machine from `snapshot` if present, then apply
 *      `committedEntries` in order; answer `readStates` once their index is applied;
 *   4. call advance(ready).
 *
 * Readies may be pipelined: ready() may be called again before advance(), and the next
 * Ready carries only new work (entries not yet handed out, commits after those handed out).
 * The caller then persists them in order (a later Ready's writes never become durable before
 * an earlier one's), sends a Ready's messages only once its own writes are durable, applies
 * in order, and advances in the order taken. Everything in a Ready may be
 * empty except that hasReady() was true.
 */
export interface Ready {
  /** The new leader/role, or null when unchanged. */
  readonly softState: SoftState | null
  /** The new term/vote/commit to persist, or null when unchanged. */
  readonly hardState: HardState | null
  /** Entries to append to the log storage (may overwrite a conflicting suffix, §5.3). */
  readonly entries: readonly Entry[]
  /** A snapshot received from the leader, to install in storage and the state machine. */
  readonly snapshot: Snapshot | null
  /** Entries known committed, to apply in order after persisting (they may be in `entries`). */
  readonly committedEntries: readonly Entry[]
  /** Messages to send after persisting. */
  readonly messages: readonly Message[]
  /** Answers to readIndex() requests (§8). */
  readonly readStates: readonly ReadState[]
  /**
   * The group clock minus this node's wall clock, to record (WritableLogStorage.setClockOffset)
   * with this Ready's writes, or null when the recorded one is still close enough. A replica
   * restarted into a group that no running replica heard a leader of continues the group
   * clock from its wall clock plus this offset (raft-core README, "Timestamps").
   */
  readonly clockOffsetMs: number | null
}
