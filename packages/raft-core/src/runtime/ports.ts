import type { Message } from '../message'
import type { Entry, Snapshot } from '../types'

/** A Raft group's number within a multi-Raft host (the meta group is 0). */
export type GroupId = number

/**
 * Carries Raft messages to the peers named in `to`. Fire-and-forget: Raft tolerates loss,
 * duplication and reordering, so an implementation may drop a message when a peer is slow
 * or unreachable instead of queueing without bound. Must not throw.
 */
export interface Transport {
  send(groupId: GroupId, messages: readonly Message[]): void
}

/**
 * A group's replicated state machine. Deterministic: the same entries in the same order give
 * the same state on every replica; its only clock is each entry's `timestampMs`.
 */
export interface StateMachine {
  /**
   * Applies committed entries in log order and returns one result per entry (the result of
   * the entry's proposal; ignored for the leader's empty no-op and ConfChange entries, which
   * are passed too so the state machine can track its applied index). Throwing is fatal.
   */
  apply(entries: readonly Entry[]): readonly unknown[]
  /**
   * An image of the state as of the last entry handed to `apply` before the call. A state
   * machine that applies asynchronously (results are promises) may return a promise; the host
   * does not wait for it meanwhile, so the image must not include entries handed to `apply`
   * after the call.
   */
  snapshot(): Uint8Array | Promise<Uint8Array>
  /**
   * For snapshots on demand (GroupOptions.snapshotsOnDemand): resolves once the state of
   * every entry handed to `apply` so far is durable. A compaction then records only the
   * snapshot's metadata, and `snapshot()` is called only when a follower needs an image.
   * Such an image must not be empty: an empty one is taken as "metadata only", so the follower
   * would never get it and an image would be made again at every heartbeat (mq's images are
   * handles, never empty; a flag for "metadata only" would lift this, not done).
   */
  persisted?(): Promise<void>
  /**
   * Replaces the whole state with a snapshot's image. May return a promise, which the host
   * waits for before applying later entries. When the host adds a group, the restore of the
   * stored snapshot must be synchronous — a state machine that keeps its state durably passes
   * its own `appliedIndex` (GroupOptions) instead, and no restore happens.
   */
  restore(snapshot: Snapshot): void | Promise<void>
  /**
   * For a state machine that applies asynchronously: the entries handed to `apply` whose work
   * (and writes) has not finished. At HostOptions.applyBacklogMax the host hands it no more
   * committed entries until it is below again: call RaftHost.backlogDown as it goes down (else
   * the host looks again at its next tick). Absent: never paused.
   */
  applyBacklog?(): number
}

/**
 * The host's clocks, read only to stamp entries (Raft core §timestamps): the wall clock, and
 * a steady one (monotonic, e.g. `performance.now()`) with which a new leader continues the
 * group clock of its predecessor instead of jumping to its own wall clock. Without `monoMs`,
 * stamps follow the wall clock (never going back along the log).
 */
export interface Clock {
  nowMs(): number
  monoMs?(): number
}
