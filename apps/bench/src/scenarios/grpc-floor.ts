import { credentials, Metadata } from '@grpc/grpc-js'
import { HealthCheckRequest, HealthClient } from '@mq/protocol'
import { LatencyHistogram } from '../histogram'

/** Calls before the measured ones (connection, JIT). */
const WARM_UP_CALLS = 200
/**
 * Each call's deadline: a server that takes the connection and never answers fails the
 * floor instead of holding the run for good (no deadline until 2026-12-07, an audit).
 */
export const FLOOR_CALL_MS = 5_000

/**
 * The round trip of one gRPC call that does no work (Health/Check) to `address`, `count`
 * times one at a time: the floor under a one-at-a-time latency measured against that server in
 * the same minutes (the same client library and server process, without Raft, disks or
 * queues). It runs on a channel of its own, a separate HTTP/2 connection from the producer's,
 * and the producer's sends may have gone to another partition's leader. A one-at-a-time
 * produce takes two such trips (client to leader, leader to a follower over the peer stream),
 * an fsync and the apply.
 */
export async function grpcFloor(
  address: string,
  count: number,
  callMs = FLOOR_CALL_MS,
): Promise<LatencyHistogram> {
  const client = new HealthClient(address, credentials.createInsecure())
  const call = () =>
    new Promise<void>((resolve, reject) =>
      client.check(
        HealthCheckRequest.fromPartial({}),
        new Metadata(),
        { deadline: Date.now() + callMs },
        (error) => (error ? reject(error) : resolve()),
      ),
    )
  try {
    for (let i = 0; i < WARM_UP_CALLS; i++) await call()
    const rtt = new LatencyHistogram()
    for (let i = 0; i < count; i++) {
      const start = performance.now()
      await call()
      rtt.record(performance.now() - start)
    }
    return rtt
  } finally {
    client.close()
  }
}
