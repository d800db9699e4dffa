/**
 * The reconnect backoff of every mq channel (node to node, and the SDK's). grpc-js's default
 * backs off exponentially while a server is unreachable, from 1 s up to 120 s (×1.6 a try),
 * and calls fail at once until the next try: a node that was down for a minute was not
 * reached by its peers for ~31 s after it came back (its groups heard from no leader; 1.1 s
 * with these options), and after a longer outage for up to two minutes. mq's callers retry
 * on their own terms (Raft resends, the SDK's backoff and leader hints), so the channel
 * itself tries again soon: from 100 ms, at most a second apart — a connection attempt to a
 * dead node on a LAN is one refused SYN.
 */
export const RECONNECT_CHANNEL_OPTIONS = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1_000,
} as const
