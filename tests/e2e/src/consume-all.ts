import type { MqClient } from '@mq/router-client'

/**
 * Leases and acks `queue`'s messages until `count` distinct bodies came or `timeoutMs`
 * passed (checked at each delivery); returns the bodies received (UTF-8).
 */
export async function consumeAll(
  client: MqClient,
  queue: string,
  count: number,
  timeoutMs: number,
): Promise<Set<string>> {
  const received = new Set<string>()
  const consumer = client.consumer(queue, { prefetch: 16 })
  const deadline = Date.now() + timeoutMs
  try {
    for await (const d of consumer) {
      received.add(new TextDecoder().decode(d.body))
      await d.ack()
      if (received.size === count || Date.now() > deadline) break
    }
  } finally {
    await consumer.close()
  }
  return received
}
