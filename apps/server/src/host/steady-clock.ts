/**
 * A clock in ms since the epoch that does not step: the wall clock as it read when the clock
 * was made, plus the monotonic time since. A wall clock stepped forward or back (NTP stepping,
 * a VM resumed) does not move it; slewing (which also paces the monotonic clock on Linux) does.
 * The controller's clock until the node's Raft host exists (it then times on the meta group's
 * clock, which meta leaders continue from one another). Whole milliseconds.
 */
export function steadyClock(
  wallNowMs: () => number = Date.now,
  monotonicNowMs: () => number = () => performance.now(),
): () => number {
  const origin = wallNowMs() - monotonicNowMs()
  // Whole milliseconds, as the wall clock's: its readings go on the wire (uint64 fields of
  // ClusterStatus, a node's recorded silence) and a fraction fails the encoding.
  return () => Math.floor(origin + monotonicNowMs())
}
