import { FORMAT_LEVEL_ORDERED_KEYS } from '@mq/protocol'
import type { Delivery } from '@mq/router-client'
import { describe, expect, it } from 'vitest'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

const KEYS = 24
const PER_KEY = 40
const CONSUMERS = 3

// A queue with ordered keys hands a key's messages out one at a time, in the order they were
// sent, to consumers working in parallel, while the leader of one of its partitions is
// SIGKILLed: the turns are replicated state, so the new leader hands out the same turns.
describe('a queue with ordered keys', () => {
  const suite = suiteCluster()

  it("delivers a key's messages one at a time, in order, across a data-group leader's death", async () => {
    const { cluster, client } = suite
    const level = async () => (await client.admin.clusterStatus()).formatLevel >= FORMAT_LEVEL_ORDERED_KEYS
    expect(await waitFor(level, 30_000, 200)).toBe(true)
    await client.admin.createQueue('orders', { partitions: 2, orderedKeys: true, visibilityTimeoutMs: 2_000 })
    expect((await client.admin.describeQueue('orders')).config?.orderedKeys).toBe(true)
    // Keys change partitions when the count grows: refused, the count stays.
    await expect(client.admin.updateQueue('orders', { partitions: 4 })).rejects.toThrow(
      /the queue orders its keys, so its partition count stays 2/,
    )

    // Every key's messages are sent in order (one round of all keys at a time).
    const producer = client.producer('orders')
    for (let seq = 0; seq < PER_KEY; seq++) {
      await Promise.all(
        Array.from({ length: KEYS }, (_, k) => producer.send({ body: `k${k}:${seq}`, key: `k${k}` })),
      )
    }
    await producer.close()
    const stats = await client.admin.queueStats('orders')
    const waiting = stats.reduce((n, p) => n + p.waiting, 0)
    // All but each key's first message wait for their turn.
    expect(waiting).toBe(KEYS * (PER_KEY - 1))

    /** Per key, the sequence numbers in the order they were delivered (redeliveries too). */
    const delivered = new Map<string, number[]>()
    const acked = new Map<string, Set<number>>()
    /** Keys whose message a consumer holds (from its delivery until it sends the ack or nack). */
    const holding = new Map<string, string>()
    const overlaps: string[] = []
    let nacks = 0
    let settleErrors = 0
    let peakHeld = 0
    const handle = async (name: string, d: Delivery) => {
      const [key, seqText] = new TextDecoder().decode(d.body).split(':') as [string, string]
      const seq = Number(seqText)
      const other = holding.get(key)
      if (other !== undefined) overlaps.push(`${key}:${seq} to ${name} while ${other} held ${key}`)
      holding.set(key, name)
      peakHeld = Math.max(peakHeld, holding.size)
      const log = delivered.get(key) ?? []
      log.push(seq)
      delivered.set(key, log)
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 4)))
      // Every 7th message fails its first delivery: it must come back before the key's next.
      const fail = d.deliveryCount === 1 && (seq * 31 + Number(key.slice(1))) % 7 === 0
      holding.delete(key)
      try {
        if (fail) {
          nacks++
          await d.nack(0)
        } else {
          await d.ack()
          const set = acked.get(key) ?? new Set<number>()
          set.add(seq)
          acked.set(key, set)
        }
      } catch {
        settleErrors++ // a lease lost with its leader: the message comes back after its visibility
      }
    }
    const consumers = Array.from({ length: CONSUMERS }, () =>
      client.consumer('orders', { prefetch: 8, waitMs: 1_000 }),
    )
    const loops = consumers.map(async (consumer, i) => {
      for await (const d of consumer) await handle(`c${i}`, d)
    })
    const ackedCount = () => [...acked.values()].reduce((n, s) => n + s.size, 0)

    // A third in, the leader of partition 0's data group dies.
    expect(await waitFor(() => ackedCount() >= (KEYS * PER_KEY) / 3, 60_000, 20)).toBe(true)
    const leader = (await client.admin.describeQueue('orders')).partitions[0]?.leaderId ?? ''
    await cluster.kill(leader)
    const killedAt = Date.now()
    const done = await waitFor(() => ackedCount() === KEYS * PER_KEY, 120_000, 50)
    console.log(
      `ordered keys: ${KEYS * PER_KEY} messages over ${KEYS} keys, ${CONSUMERS} consumers; up to ${peakHeld} keys held at once; ${nacks} nacks, ${settleErrors} settles lost with ${leader}, all acked ${Date.now() - killedAt} ms after its SIGKILL`,
    )
    await Promise.all(consumers.map((c) => c.close()))
    await Promise.all(loops)
    expect(done).toBe(true)
    expect(overlaps).toEqual([])
    // Consumers did work in parallel (on different keys).
    expect(peakHeld).toBeGreaterThan(1)
    for (const [key, seqs] of delivered) {
      // In order: a key's next message only once the one before is acked (a nacked or lost
      // one comes again first).
      const backwards = seqs.findIndex((s, i) => i > 0 && s < (seqs[i - 1] as number))
      expect(backwards, `${key}: ${seqs.join(',')}`).toBe(-1)
      expect([...(acked.get(key) ?? [])].sort((a, b) => a - b)).toEqual(
        Array.from({ length: PER_KEY }, (_, i) => i),
      )
    }
    const after = await client.admin.queueStats('orders')
    expect(after.reduce((n, p) => n + p.messages, 0)).toBe(0)
  }, 300_000)
})
