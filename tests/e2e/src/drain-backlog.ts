import type { MqClient } from '@mq/router-client'

/**
 * Waits until `left()` is 0: true then; false once it has not gone down for `stallMs`, or
 * `maxMs` passed. Polls every 200 ms; an undefined count (a failed read) is no progress.
 */
export async function drainBacklog(
  left: () => number | undefined | Promise<number | undefined>,
  stallMs: number,
  maxMs: number,
): Promise<boolean> {
  const start = Date.now()
  let least = (await left()) ?? Number.POSITIVE_INFINITY
  let leastAt = start
  while (least > 0) {
    const now = Date.now()
    if (now - leastAt >= stallMs || now - start >= maxMs) return false
    await new Promise((r) => setTimeout(r, 200))
    const n = (await left()) ?? Number.POSITIVE_INFINITY
    if (n < least) {
      least = n
      leastAt = Date.now()
    }
  }
  return true
}

/**
 * The messages still stored in `queue` and not dead-lettered (ready, delayed, leased, waiting
 * behind their key), by its partitions' leaders; undefined when a leader does not answer.
 */
export async function messagesLeft(client: MqClient, queue: string): Promise<number | undefined> {
  try {
    const stats = await client.admin.queueStats(queue)
    return stats.reduce((n, p) => n + p.messages - p.weights.reduce((d, w) => d + w.dead, 0), 0)
  } catch {
    return undefined
  }
}

/**
 * Waits until `queue` holds nothing but dead letters (messagesLeft), as drainBacklog: false
 * once the count has not gone down for `stallMs`, or at `deadlineMs` (a Date.now() reading).
 */
export function drainQueue(
  client: MqClient,
  queue: string,
  stallMs: number,
  deadlineMs: number,
): Promise<boolean> {
  return drainBacklog(() => messagesLeft(client, queue), stallMs, Math.max(0, deadlineMs - Date.now()))
}
