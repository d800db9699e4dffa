import { FORMAT_LEVEL_RETRY_BACKOFF } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

const MIN_MS = 300
const MAX_MS = 1_200
/** Slack over a backoff for the nack's round trip, the lease's and the timers on a busy machine. */
const LATE_MS = 700

// A queue with a retry backoff: a message whose handler keeps failing comes back after 0.3 s,
// 0.6 s, 1.2 s, 1.2 s, then goes to the dead letters; the backoff is replicated state, so a
// new leader after a SIGKILL keeps it; turned off, a failed message comes back at once.
describe('a queue with a retry backoff', () => {
  const suite = suiteCluster()

  it('delays each failed delivery by the doubling backoff, across a leader death, until turned off', async () => {
    const { cluster, client } = suite
    const level = async () => (await client.admin.clusterStatus()).formatLevel >= FORMAT_LEVEL_RETRY_BACKOFF
    expect(await waitFor(level, 30_000, 200)).toBe(true)
    const route = await client.admin.createQueue('flaky', {
      partitions: 1,
      maxDeliveries: 5,
      retryBackoffMinMs: MIN_MS,
      retryBackoffMaxMs: MAX_MS,
    })
    expect(route.config).toMatchObject({ retryBackoffMinMs: MIN_MS, retryBackoffMaxMs: MAX_MS })
    await expect(client.admin.updateQueue('flaky', { retryBackoffMaxMs: 100 })).rejects.toThrow(
      /retryBackoffMaxMs \(100\) is below retryBackoffMinMs \(300\)/,
    )

    const producer = client.producer('flaky')
    await producer.send({ body: 'poison' })
    /** When each delivery reached the handler, and when its nack was sent. */
    const deliveredAt: number[] = []
    const nackedAt: number[] = []
    let nacksAnswered = 0
    const consumer = client.consumer('flaky', { prefetch: 1, waitMs: 1_000 })
    const loop = (async () => {
      for await (const d of consumer) {
        deliveredAt.push(Date.now())
        nackedAt.push(Date.now())
        await d.nack() // the handler failed: no delay of its own, so the queue's backoff
        nacksAnswered++
      }
    })()
    expect(
      await waitFor(async () => (await client.admin.deadLetters('flaky')).length === 1, 20_000, 50),
    ).toBe(true)
    expect(deliveredAt).toHaveLength(5)
    const waited = nackedAt.slice(0, 4).map((t, i) => (deliveredAt[i + 1] as number) - t)
    console.log(
      `retry backoff: waits after each failure ${waited.join(', ')} ms (backoff 300, 600, 1200, 1200)`,
    )
    ;[MIN_MS, 2 * MIN_MS, MAX_MS, MAX_MS].forEach((backoff, i) => {
      // Measured from the nack's sending: its entry's time, the backoff's start, is later.
      expect(waited[i]).toBeGreaterThanOrEqual(backoff)
      expect(waited[i]).toBeLessThan(backoff + LATE_MS)
    })

    // Kept across a failover: redriven, failed again, its leader SIGKILLed; the new leader
    // hands it out when the (replicated) backoff is over, not at once.
    await client.admin.updateQueue('flaky', { retryBackoffMinMs: 3_000, retryBackoffMaxMs: 3_000 })
    const before = deliveredAt.length
    expect(await client.admin.redriveDeadLetters('flaky')).toBe(1)
    expect(await waitFor(() => nacksAnswered === before + 1, 10_000, 10)).toBe(true)
    const leader = (await client.admin.describeQueue('flaky')).partitions[0]?.leaderId ?? ''
    await cluster.kill(leader)
    expect(await waitFor(() => deliveredAt.length === before + 2, 20_000, 10)).toBe(true)
    const afterKill = (deliveredAt[before + 1] as number) - (nackedAt[before] as number)
    console.log(`retry backoff: 3 s backoff with ${leader} SIGKILLed: delivered again after ${afterKill} ms`)
    expect(afterKill).toBeGreaterThanOrEqual(3_000)

    // Turned off: a failed delivery is ready again at once. The message's last attempts play
    // out (the nack of the one just delivered may still take the 3 s backoff, the later ones
    // come after the change reached the leader) and it is dead again.
    await client.admin.updateQueue('flaky', { retryBackoffMinMs: 0 })
    expect((await client.admin.describeQueue('flaky')).config?.retryBackoffMinMs).toBe(0)
    expect(
      await waitFor(async () => (await client.admin.deadLetters('flaky')).length === 1, 20_000, 50),
    ).toBe(true)
    expect(deliveredAt).toHaveLength(before + 5)
    const immediate = (deliveredAt[before + 4] as number) - (nackedAt[before + 3] as number)
    console.log(`retry backoff: turned off, delivered again ${immediate} ms after the nack`)
    expect(immediate).toBeLessThan(MIN_MS)
    expect(await client.admin.purgeDeadLetters('flaky')).toBe(1)
    expect((await client.admin.queueStats('flaky'))[0]?.messages).toBe(0)
    await consumer.close()
    await loop
  }, 120_000)
})
