import type { LeasedMessage, LeaseRequest } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Consumer } from './consumer'
import type { Router } from './router'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * A router stand-in whose partitions hold `ready[p]` messages: a lease takes `latencyMs` (200
 * ms for one that must not wait, 30 otherwise, by default), then up to its max at once, or
 * long-polls (in 5 ms steps) for its wait. Records every lease request.
 */
function fakeRouter(
  ready: number[],
  latencyMs: (waitMs: number) => number = (waitMs) => (waitMs === 0 ? 200 : 30),
) {
  const requests: { partition: number; max: number; waitMs: number }[] = []
  let id = 1
  const lease = async (partition: number, req: LeaseRequest): Promise<{ messages: LeasedMessage[] }> => {
    requests.push({ partition, max: req.max, waitMs: req.waitMs })
    await sleep(latencyMs(req.waitMs))
    const deadline = Date.now() + req.waitMs
    while ((ready[partition] ?? 0) === 0 && Date.now() < deadline) await sleep(5)
    const n = Math.min(ready[partition] ?? 0, req.max)
    ready[partition] = (ready[partition] ?? 0) - n
    return {
      messages: Array.from({ length: n }, () => {
        const m = id++
        return { id: m, leaseId: `${m}.1`, body: new Uint8Array(), headers: {}, weight: 1, deliveryCount: 1 }
      }) as unknown as LeasedMessage[],
    }
  }
  const route = {
    queue: 'q',
    queueId: 1,
    routeEpoch: 1,
    partitions: ready.map((_, partition) => ({ partition })),
    config: { visibilityTimeoutMs: 30_000 },
  }
  const router = {
    options: { attemptMs: 1_000, backoff: { baseMs: 10, maxMs: 100 } },
    route: async () => route,
    cachedRoute: () => route,
    partition: (_queue: string, partition: number, op: (c: unknown, t: unknown) => Promise<unknown>) =>
      op(
        {
          queue: {
            lease: (req: LeaseRequest, _md: unknown, _o: unknown, cb: (e: null, r: unknown) => void) => {
              void lease(partition, req).then((r) => cb(null, r))
              return { cancel: () => {} } // the call grpc-js returns; a close cancels it
            },
          },
        },
        { queue: 'q', partition, routeEpoch: 1 },
      ),
  }
  return { router: router as unknown as Router, requests }
}

describe('Consumer', () => {
  it('asks a waiting partition again when another partition’s lease returns less than it held room for', async () => {
    // Partition 0 brings 2 messages and then none; its next lease (asked without waiting,
    // holding the other 6 of room) is slow, and partition 1's long poll ends empty meanwhile
    // and finds no room. Partition 1's messages arrive later. The reader keeps everything
    // unsettled (it acks in batches of 5), so only the room freed by partition 0's lease can
    // wake the fetcher of partition 1.
    const ready = [0, 0]
    const { router } = fakeRouter(ready)
    setTimeout(() => {
      ready[0] = 2
    }, 200)
    setTimeout(() => {
      ready[1] = 5
    }, 1_000)
    const consumer = new Consumer(router, 'q', { prefetch: 8, waitMs: 300, autoExtend: false })
    const got: unknown[] = []
    const reading = (async () => {
      for await (const d of consumer) {
        got.push(d)
        if (got.length === 5) break
      }
    })()
    await Promise.race([reading, sleep(5_000)])
    expect(got.length).toBe(5)
    await consumer.close()
  })

  it('never asks for more than 1,000 messages in one lease, however large prefetch is', async () => {
    const ready = [5_000, 0]
    const { router, requests } = fakeRouter(ready, () => 1)
    const consumer = new Consumer(router, 'q', { prefetch: 4_096, waitMs: 50, autoExtend: false })
    let n = 0
    for await (const d of consumer) {
      void d.ack().catch(() => {})
      if (++n === 3_000) break
    }
    expect(requests.length).toBeGreaterThan(0)
    expect(Math.max(...requests.map((r) => r.max))).toBeLessThanOrEqual(1_000)
  })
})
