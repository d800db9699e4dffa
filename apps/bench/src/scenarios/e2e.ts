import { LatencyHistogram, latencyOf, round, Timeline } from '../histogram'
import { Progress } from '../progress'
import type { ScenarioResult } from '../result'
import { closeAll, connect, queueName, type Target, withFacts, withTarget } from './common'
import { paced } from './pacer'
import { RssMeter } from './rss-meter'
import { UnderWay } from './under-way'

export interface E2eOptions {
  readonly ratePerS: number
  readonly durationMs: number
  readonly sizeBytes: number
  readonly partitions: number
}

export const E2E_DEFAULTS: E2eOptions = { ratePerS: 1000, durationMs: 10_000, sizeBytes: 100, partitions: 4 }

/** Wall-clock ms with sub-ms precision, comparable within one process. */
const nowMs = (): number => performance.timeOrigin + performance.now()

/**
 * The `e2e` scenario: one producer sends at a fixed rate for the duration while one consumer
 * (another client in this process) receives and acks. Both latencies are from each send's
 * intended time on the schedule (pacer.ts), which travels in the body's first 8 bytes: to the
 * receipt (e2e) and to the ack (ack). `sendLag` is how late the client issued the sends.
 */
export async function runE2e(target: Target, o: E2eOptions): Promise<ScenarioResult> {
  return withTarget(target, async ({ servers, facts, serverRssBytes }) => {
    const admin = await connect(servers)
    const producerClient = await connect(servers)
    const consumerClient = await connect(servers)
    const queue = queueName('e2e')
    let rss: RssMeter | undefined
    try {
      await admin.admin.createQueue(queue, { partitions: o.partitions })
      const count = Math.max(1, Math.round((o.ratePerS * o.durationMs) / 1000))
      const e2e = new LatencyHistogram()
      const ack = new LatencyHistogram()
      const sendLag = new LatencyHistogram()
      const timeline = new Timeline()
      const progress = new Progress('e2e')
      let received = 0
      const start = performance.now()
      let lastReceiptAt = start
      rss = RssMeter.start(serverRssBytes)
      const consumer = consumerClient.consumer(queue, { prefetch: 256, waitMs: 500 })
      const receiving = (async () => {
        const acks = new UnderWay()
        for await (const m of consumer) {
          const sentAt = new DataView(m.body.buffer, m.body.byteOffset, 8).getFloat64(0)
          const latency = nowMs() - sentAt
          e2e.record(latency)
          timeline.record(performance.now() - start, latency)
          received++
          lastReceiptAt = performance.now()
          progress.update(received, count, 'received')
          acks.add(m.ack())
          if (received >= count) break
        }
        await acks.settled()
      })()
      // Awaited once the sends have settled; until then a consumer that failed (a non-retriable
      // error) was a rejection nobody listened to, and Node ended the bench with a stack trace
      // in the middle of the schedule (until 2026-12-07). It is still thrown below.
      receiving.catch(() => {})
      const producer = producerClient.producer(queue)
      let failed = 0
      let firstFailure = ''
      // What was issued, once every send settled: fewer than `count` when the pacer stopped 10 s
      // past its schedule (the client could not keep up). Counted as `count` until 2026-12-07:
      // `sent` and "received x of y" blamed the cluster for sends never made, and the wait below
      // ran its 30 s for them.
      const issued = await paced(o.ratePerS, count, async (_, intendedAtMs) => {
        sendLag.record(performance.now() - intendedAtMs)
        const body = new Uint8Array(o.sizeBytes)
        new DataView(body.buffer).setFloat64(0, performance.timeOrigin + intendedAtMs)
        try {
          await producer.send({ body })
        } catch (error) {
          // Counted here: a rejection left for allSettled at the schedule's end ended the process.
          if (failed++ === 0) firstFailure = (error as Error).message
          return
        }
        ack.record(performance.now() - intendedAtMs)
      })
      // Bounded wait for the last receipts: the consumer is closed after 30 s at most, or once
      // every acknowledged send arrived and nothing more for a second (a failed send may never
      // arrive, or arrive late: its outcome is unknown; waiting for it held the run 30 s).
      const settledAt = performance.now()
      const timer = setInterval(() => {
        const now = performance.now()
        const quiet = received >= issued - failed && now - Math.max(lastReceiptAt, settledAt) > 1000
        if (quiet || now - settledAt > 30_000) void consumer.close()
      }, 100)
      await receiving.finally(() => clearInterval(timer))
      progress.end()
      await consumer.close()
      const memory = rss?.stop() ?? {}
      const elapsedS = (performance.now() - start) / 1000
      return withFacts(
        {
          scenario: 'e2e',
          params: { ...o },
          metrics: {
            sent: issued,
            failedSends: failed,
            received,
            // Over the span of the receipts, not the wait for receipts that never came.
            receivedPerS: round(received / Math.max((lastReceiptAt - start) / 1000, 0.001), 0),
            elapsedS: round(elapsedS, 2),
            ...memory,
          },
          latency: latencyOf({ e2e, ack, sendLag }),
          timeline: timeline.points(performance.now() - start),
          notes: [
            ...(issued < count
              ? [`${issued} of ${count} sends issued: the client fell 10 s behind its schedule`]
              : []),
            ...(received < issued ? [`received ${received} of ${issued}`] : []),
            ...(failed > 0 ? [`${failed} sends failed (the first: ${firstFailure})`] : []),
          ],
        },
        facts,
      )
    } finally {
      rss?.stop() // a run that failed stops sampling too
      await admin.admin.deleteQueue(queue).catch(() => {})
      await closeAll([admin, producerClient, consumerClient])
    }
  })
}
