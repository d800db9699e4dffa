/**
 * A clock in ms since the epoch that does not step: the wall clock as it read when the clock
 * was made, plus the monotonic time since. A wall clock stepped forward or back (NTP stepping,
 * a VM resumed) does not move it; slewing (which also paces the monotonic clock on Linux) does.
 * For durations a node measures itself but that are compared with wall-clock times other nodes
 * recorded (the controller's liveness against a node's recorded silence). Whole milliseconds.
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
