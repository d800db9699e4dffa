import { Inflights } from './inflights'
import type { Snapshot } from './types'

/**
 * How a leader currently replicates to one follower (etcd's tracker/progress.go):
 * - Probe: one App at a time until the follower's match is found (§5.3 backtracking);
 * - Replicate: optimistic pipelining, `next` runs ahead of `match`, bounded by inflights;
 * - Snapshot: the follower needs a snapshot; Apps pause until it is installed (§7).
 */
export const ProgressState = { Probe: 0, Replicate: 1, Snapshot: 2 } as const
export type ProgressState = (typeof ProgressState)[keyof typeof ProgressState]

/** A leader's view of one follower. Invariant: 0 <= match < next. */
export class Progress {
  match = 0
  next: number
  state: ProgressState = ProgressState.Probe
  /** In Probe: an App was sent and not yet answered; pause until a reply or a heartbeat reply. */
  probeSent = false
  /** Heard from since the last check-quorum round. */
  recentActive = false
  /**
   * The follower said it holds nothing and takes its first state only from a snapshot whose
   * chunks carry this, its join nonce (RaftConfig.joinBySnapshot); 0: it did not, or it holds
   * something since.
   */
  joinNonce = 0

  get holdingNothing(): boolean {
    return this.joinNonce > 0
  }
  /** In Snapshot: the snapshot being sent, and the bytes the follower acknowledged. */
  snapshot: Snapshot | null = null
  snapshotOffset = 0
  readonly inflights: Inflights

  constructor(next: number, inflightMsgsMax: number, inflightBytesMax: number) {
    this.next = next
    this.inflights = new Inflights(inflightMsgsMax, inflightBytesMax)
  }

  becomeProbe(): void {
    // After a snapshot, probe from the snapshot's index; otherwise from just past match.
    if (this.state === ProgressState.Snapshot && this.snapshot !== null) {
      this.next = Math.max(this.match + 1, this.snapshot.meta.index + 1)
    } else {
      this.next = this.match + 1
    }
    this.#reset(ProgressState.Probe)
  }

  /**
   * Gives up a snapshot transfer the follower could not use (it refused it, or its image is
   * gone): probe from just past match, so that the next try finds the entries compacted and
   * sends the storage's snapshot as it is then.
   */
  abortSnapshot(): void {
    this.next = this.match + 1
    this.#reset(ProgressState.Probe)
  }

  /** The follower holds nothing (whatever it matched was its id's earlier replica's): it waits for a snapshot. */
  holdsNothing(joinNonce: number): void {
    this.match = 0
    this.next = 1
    this.#reset(ProgressState.Probe)
    this.joinNonce = joinNonce
  }

  becomeReplicate(): void {
    this.next = this.match + 1
    this.#reset(ProgressState.Replicate)
  }

  becomeSnapshot(snapshot: Snapshot): void {
    this.#reset(ProgressState.Snapshot)
    this.snapshot = snapshot
    this.snapshotOffset = 0
  }

  #reset(state: ProgressState): void {
    this.state = state
    this.probeSent = false
    this.snapshot = null
    this.snapshotOffset = 0
    this.inflights.reset()
  }

  /** Records an acknowledged index; returns false when it is stale (not above match). */
  maybeUpdate(index: number): boolean {
    let updated = false
    if (this.match < index) {
      this.match = index
      updated = true
      this.probeSent = false
    }
    this.next = Math.max(this.next, index + 1)
    return updated
  }

  /**
   * Handles a rejected App for prev index `rejected`, with the leader's next guess
   * `matchHint` (fast backtracking). Returns false when the rejection is stale.
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === ProgressState.Replicate) {
      if (rejected <= this.match) return false
      this.next = this.match + 1
      return true
    }
    if (this.next - 1 !== rejected) return false
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1)
    this.probeSent = false
    return true
  }

  /** Records that an App with `count` entries ending at `lastIndex` went out. */
  sentEntries(count: number, lastIndex: number, bytes: number): void {
    if (this.state === ProgressState.Replicate) {
      if (count > 0) {
        this.next = lastIndex + 1
        this.inflights.add(lastIndex, bytes)
      }
    } else if (this.state === ProgressState.Probe) {
      this.probeSent = true
    }
  }

  /** True when no App may be sent now. */
  isPaused(): boolean {
    if (this.state === ProgressState.Probe) return this.probeSent
    if (this.state === ProgressState.Replicate) return this.inflights.full()
    return true
  }
}
