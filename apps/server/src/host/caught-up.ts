/** How close to the commit index a replica's log must match to count as caught up. */
export const CAUGHT_UP_ENTRIES = 100

/**
 * Whether a replica whose log matches up to `match` (the leader's progress of it) has caught
 * up with commit index `commit`: a learner to be promoted, a target of a leadership transfer.
 */
export function caughtUp(match: number | undefined, commit: number): boolean {
  return match !== undefined && match > 0 && match + CAUGHT_UP_ENTRIES >= commit
}
