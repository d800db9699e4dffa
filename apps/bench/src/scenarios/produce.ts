import type { KeylessPartitioning, MqClient } from '@mq/router-client'
import { LatencyHistogram, latencyOf, round, Timeline } from '../histogram'
import { Progress } from '../progress'
import type { ScenarioResult } from '../result'
import { closeAll, connect, queueName, since, type Target, withFacts, withTarget } from './common'
import { CpuMeter } from './cpu-meter'
import { grpcFloor } from './grpc-floor'

export interface ProduceOptions {
  /** Messages in all. */
  readonly count: number
  readonly sizeBytes: number
  /** Sends awaiting their ack at once, per producer. */
  readonly inFlight: number
  readonly producers: number
  readonly partitions: number
  /** The run stops issuing sends after this long. */
  readonly timeLimitMs: number
  /** Idempotent producers (the SDK's default): retries recognised, order kept. */
  readonly idempotent: boolean
  /** The producer's batches in flight per partition, at most (its `inFlightMax`: 1 to 5). */
  readonly batchesInFlight: number
  /** How the (keyless) messages pick partitions: a batch at a time, or one each in turn. */
  readonly keyless: KeylessPartitioning
  /** Send under this many keys in turn (`k0`, `k1`, …) instead of keyless. */
  readonly keys?: number
}

export const PRODUCE_DEFAULTS: ProduceOptions = {
  count: 20_000,
  sizeBytes: 100,
  inFlight: 256,
  producers: 1,
  partitions: 4,
  timeLimitMs: 120_000,
  idempotent: true,
  batchesInFlight: 4,
  keyless: 'sticky',
}

/** What one produce run measured. */
export interface ProduceRun {
  readonly acked: number
  readonly elapsedMs: number
  readonly ack: LatencyHistogram
  readonly timeline: Timeline
}

/**
 * Sends `count` messages of `sizeBytes` into `queue` from `producers` producers (one
 * client each), `inFlight` sends outstanding per producer. Stops issuing at `timeLimitMs`.
 * `connected` is awaited once the clients are connected, right before the measured phase.
 */
export async function produceInto(
  servers: readonly string[],
  queue: string,
  o: ProduceOptions,
  progress?: Progress,
  connected?: () => Promise<void>,
): Promise<ProduceRun> {
  const clients: MqClient[] = []
  try {
    for (let p = 0; p < o.producers; p++) clients.push(await connect(servers))
    await connected?.()
    const body = new Uint8Array(o.sizeBytes).fill(120)
    const ack = new LatencyHistogram()
    const timeline = new Timeline()
    let issued = 0
    let acked = 0
    const start = performance.now()
    const deadline = start + o.timeLimitMs
    const slot = async (client: MqClient, producer: ReturnType<MqClient['producer']>): Promise<void> => {
      void client
      while (issued < o.count && performance.now() < deadline) {
        const key = o.keys ? { key: `k${issued % o.keys}` } : {}
        issued++
        const t0 = performance.now()
        await producer.send({ body, ...key })
        const t1 = performance.now()
        ack.record(t1 - t0)
        timeline.record(t1 - start, t1 - t0)
        acked++
        progress?.update(acked, o.count, 'acked')
      }
    }
    await Promise.all(
      clients.map(async (client) => {
        const producer = client.producer(queue, {
          bufferMax: Math.max(10_000, o.inFlight),
          idempotent: o.idempotent,
          inFlightMax: o.batchesInFlight,
          keyless: o.keyless,
        })
        await Promise.all(Array.from({ length: o.inFlight }, () => slot(client, producer)))
        await producer.close()
      }),
    )
    return { acked, elapsedMs: since(start), ack, timeline }
  } finally {
    progress?.end()
    await closeAll(clients)
  }
}

/** The `produce` scenario: msgs/s, MB/s and ack latency of a fresh queue. */
export async function runProduce(target: Target, o: ProduceOptions): Promise<ScenarioResult> {
  return withTarget(target, async ({ servers, facts, serverCpuMs }) => {
    const admin = await connect(servers)
    const queue = queueName('produce')
    try {
      await admin.admin.createQueue(queue, { partitions: o.partitions })
      // Settled first, as consume's: the phase before (a produce of the suite, its queue's
      // deletion) left the servers busy, and that was counted against this one's messages.
      // Started once the producers are connected, as msgs/s is: their connections were charged
      // to the messages (until an audit).
      let cpu: CpuMeter | undefined
      const run = await produceInto(servers, queue, o, new Progress('produce'), async () => {
        cpu = await CpuMeter.startSettled(serverCpuMs)
      })
      const cpuPerMessage = cpu?.perMessage(run.acked) ?? {}
      const seconds = run.elapsedMs / 1000
      // One at a time: the same number of bare gRPC round trips to partition 0's leader, the
      // floor under the ack latency in these minutes (grpc-floor.ts).
      const floor =
        o.inFlight === 1 && o.producers === 1
          ? await grpcFloor(
              (await admin.admin.describeQueue(queue)).partitions[0]?.leaderAddress || (servers[0] as string),
              run.acked,
            )
          : undefined
      return withFacts(
        {
          scenario: 'produce',
          params: { ...o },
          metrics: {
            acked: run.acked,
            msgsPerS: round(run.acked / seconds, 0),
            mbPerS: round((run.acked * o.sizeBytes) / 1e6 / seconds, 2),
            elapsedS: round(seconds, 2),
            ...cpuPerMessage,
          },
          latency: latencyOf(floor ? { ack: run.ack, grpcRoundTrip: floor } : { ack: run.ack }),
          timeline: run.timeline.points(run.elapsedMs),
          notes: run.acked < o.count ? [`time limit reached: ${run.acked} of ${o.count} acked`] : [],
        },
        facts,
      )
    } finally {
      await admin.admin.deleteQueue(queue).catch(() => {})
      await admin.close()
    }
  })
}
