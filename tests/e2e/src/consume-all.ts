import type { MqClient } from '@mq/router-client'

/**
 * Leases and acks `queue`'s messages until `count` distinct bodies came or `timeoutMs`
 * passed (the consumer is closed then, which ends the loop even when nothing more comes);
 * returns the bodies received (UTF-8).
 */
export async function consumeAll(
  client: MqClient,
  queue: string,
  count: number,
  timeoutMs: number,
): Promise<Set<string>> {
  const received = new Set<string>()
  const consumer = client.consumer(queue, { prefetch: 16 })
  const timer = setTimeout(() => void consumer.close(), timeoutMs)
  try {
    for await (const d of consumer) {
      received.add(new TextDecoder().decode(d.body))
      await d.ack()
      if (received.size === count) break
    }
  } finally {
    clearTimeout(timer)
    await consumer.close()
  }
  return received
}
