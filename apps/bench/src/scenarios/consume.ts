import type { MqClient } from '@mq/router-client'
import { round, Timeline } from '../histogram'
import { Progress } from '../progress'
import type { ScenarioResult } from '../result'
import { closeAll, connect, queueName, since, type Target, withFacts, withTarget } from './common'
import { CpuMeter } from './cpu-meter'
import { PRODUCE_DEFAULTS, produceInto } from './produce'
import { UnderWay } from './under-way'

export interface ConsumeOptions {
  /** Backlog to drain. */
  readonly count: number
  readonly sizeBytes: number
  readonly consumers: number
  readonly prefetch: number
  readonly partitions: number
  readonly timeLimitMs: number
  /** > 0: a queue with ordered keys, the backlog sent under this many keys in turn. */
  readonly orderedKeys: number
}

export const CONSUME_DEFAULTS: ConsumeOptions = {
  count: 20_000,
  sizeBytes: 100,
  consumers: 2,
  prefetch: 256,
  partitions: 4,
  timeLimitMs: 120_000,
  orderedKeys: 0,
}

/**
 * Receives and acks up to `count` messages of `queue` with `consumers` consumers (one
 * client each). Counts a message when its ack is confirmed. Bounded by `timeLimitMs`.
 * `connected` is awaited once the clients are connected, right before the measured phase.
 */
export async function drain(
  servers: readonly string[],
  queue: string,
  o: Pick<ConsumeOptions, 'count' | 'consumers' | 'prefetch' | 'timeLimitMs'>,
  onMessage: (body: Uint8Array, atMs: number) => void = () => {},
  progress?: Progress,
  connected?: () => Promise<void>,
): Promise<{
  acked: number
  /** Acks that failed (a lease lost, a partition unavailable), and the first one's error. */
  failedAcks: number
  firstAckFailure: string
  elapsedMs: number
  timeline: Timeline
}> {
  const clients: MqClient[] = []
  try {
    for (let c = 0; c < o.consumers; c++) clients.push(await connect(servers))
    await connected?.()
    const timeline = new Timeline()
    let received = 0
    let acked = 0
    let failedAcks = 0
    let firstAckFailure = ''
    let lastAckMs = 0
    const start = performance.now()
    const deadline = start + o.timeLimitMs
    const consumers = clients.map((client) => client.consumer(queue, { prefetch: o.prefetch, waitMs: 500 }))
    // Whoever receives the last message stops every consumer (the others may be long-polling).
    const stopAll = () => {
      for (const c of consumers) void c.close()
    }
    const timer = setTimeout(stopAll, o.timeLimitMs)
    try {
      await Promise.all(
        consumers.map(async (consumer) => {
          const acks = new UnderWay()
          try {
            for await (const m of consumer) {
              received++
              onMessage(m.body, since(start))
              acks.add(
                m.ack().then(
                  () => {
                    acked++
                    lastAckMs = since(start)
                    timeline.record(lastAckMs)
                    progress?.update(acked, o.count, 'acked')
                  },
                  // A failed ack is not counted (and, handled here, does not end the process).
                  (error: unknown) => {
                    if (failedAcks++ === 0) firstAckFailure = (error as Error).message
                  },
                ),
              )
              if (received >= o.count || performance.now() > deadline) break
            }
          } finally {
            await acks.settled()
            stopAll()
          }
        }),
      )
    } finally {
      clearTimeout(timer)
    }
    return {
      acked,
      failedAcks,
      firstAckFailure,
      elapsedMs: lastAckMs > 0 ? lastAckMs : since(start),
      timeline,
    }
  } finally {
    progress?.end()
    await closeAll(clients)
  }
}

/** The `consume` scenario: a backlog of `count` messages, then drained and acked. */
export async function runConsume(target: Target, o: ConsumeOptions): Promise<ScenarioResult> {
  return withTarget(target, async ({ servers, facts, serverCpuMs }) => {
    const admin = await connect(servers)
    const queue = queueName('consume')
    try {
      await admin.admin.createQueue(queue, {
        partitions: o.partitions,
        ...(o.orderedKeys > 0 ? { orderedKeys: true } : {}),
      })
      const fill = await produceInto(servers, queue, {
        ...PRODUCE_DEFAULTS,
        count: o.count,
        sizeBytes: o.sizeBytes,
        partitions: o.partitions,
        timeLimitMs: o.timeLimitMs,
        ...(o.orderedKeys > 0 ? { keys: o.orderedKeys } : {}),
      })
      // Started once the consumers are connected, as msgs/s is: their connections were charged
      // to the messages (until an audit).
      let cpu: CpuMeter | undefined
      // The backlog is what the fill got acknowledged: one cut short by its time limit left
      // fewer than `count`, and a drain waiting for `count` idled out its whole time limit,
      // the servers' idle CPU over it charged to the messages (until 2026-12-07).
      const run = await drain(
        servers,
        queue,
        { ...o, count: fill.acked },
        undefined,
        new Progress('consume'),
        async () => {
          cpu = await CpuMeter.startSettled(serverCpuMs)
        },
      )
      const cpuPerMessage = cpu?.perMessage(run.acked) ?? {}
      const seconds = run.elapsedMs / 1000
      return withFacts(
        {
          scenario: 'consume',
          params: { ...o },
          metrics: {
            backlog: fill.acked,
            acked: run.acked,
            ...(run.failedAcks > 0 ? { failedAcks: run.failedAcks } : {}),
            msgsPerS: round(run.acked / seconds, 0),
            elapsedS: round(seconds, 2),
            ...cpuPerMessage,
          },
          latency: {},
          timeline: run.timeline.points(run.elapsedMs),
          // A failed ack is said as such: it left the drain short of the backlog, which read as
          // the time limit's doing (until an audit).
          notes: [
            ...(run.failedAcks > 0
              ? [`${run.failedAcks} acks failed (the first: ${run.firstAckFailure})`]
              : []),
            ...(run.acked + run.failedAcks < fill.acked
              ? [`drained ${run.acked} of ${fill.acked} within the time limit`]
              : []),
          ],
        },
        facts,
      )
    } finally {
      await admin.admin.deleteQueue(queue).catch(() => {})
      await admin.close()
    }
  })
}
