/**
 * How much faster than real time a group's clock may run while its leader catches it up with
 * its own wall clock (raft-core's `stampCatchUp`, which mq-server sets to this): a new leader
 * continues its predecessor's clock at the pace of its steady clock, so a leader change to a
 * node whose clock is ahead no longer ends leases early by the skew; what is left behind its
 * wall clock is made up at 1 + this. So a lease of visibility V granted at some moment ends,
 * in real time, no sooner than V / (1 + this) after it.
 */
export const GROUP_CLOCK_CATCH_UP = 0.01

/**
 * How long a client may count on a lease of `visibilityMs`, on its own steady clock from
 * before it asked (the SDK's local deadline): the visibility as the group's clock may shorten
 * it in real time (GROUP_CLOCK_CATCH_UP).
 */
export function leaseHoldMs(visibilityMs: number): number {
  return Math.floor(visibilityMs / (1 + GROUP_CLOCK_CATCH_UP))
}
