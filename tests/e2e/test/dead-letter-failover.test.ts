import { describe, expect, it } from 'vitest'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

const DEAD = 12_000

// The dead-letter forwarder's promise under failover: a leader that dies between copying a
// span of dead letters and purging it leaves the span to the next leader, which copies it
// again, and the target's dedup window (5 min by default) drops the second copies. The leader
// of the source partition is SIGKILLed twice while it forwards; every dead letter must reach
// the dead-letter queue exactly once, and none stay behind.
describe('dead letters while the forwarding leader dies', () => {
  const suite = suiteCluster()

  const count = async (queue: string) =>
    (await suite.client.admin.queueStats(queue)).reduce((n, p) => n + p.messages, 0)
  const deadIn = async (queue: string) =>
    (await suite.client.admin.queueStats(queue)).reduce(
      (n, p) => n + p.weights.reduce((m, w) => m + w.dead, 0),
      0,
    )
  const leaderOf = async (queue: string) => (await suite.client.admin.describeQueue(queue)).partitions[0]

  /** Puts the leadership of jobs-dead's group on a node that does not lead jobs' group. */
  const leadApart = async (): Promise<boolean> => {
    const [source, target] = await Promise.all([leaderOf('jobs'), leaderOf('jobs-dead')])
    expect(source?.groupId).not.toBe(target?.groupId)
    if (target && target.leaderId === source?.leaderId) {
      const other = target.replicas.find((r) => r.nodeId !== source.leaderId)?.nodeId ?? ''
      await suite.client.admin.transferLeader(target.groupId, other)
    }
    return waitFor(
      async () => (await leaderOf('jobs'))?.leaderId !== (await leaderOf('jobs-dead'))?.leaderId,
      20_000,
      200,
    )
  }

  /**
   * Kills the leader of jobs' only partition once the dead-letter queue holds more than
   * `above`: mid-round, with copies in flight to jobs-dead's leader (another node, which
   * commits them) and their span not purged yet.
   */
  const killForwarderAbove = async (above: number): Promise<string> => {
    const landed = await waitFor(async () => (await count('jobs-dead').catch(() => 0)) > above, 30_000, 5)
    expect(landed).toBe(true)
    const leader = (await leaderOf('jobs'))?.leaderId ?? ''
    await suite.cluster.kill(leader)
    return leader
  }

  it('moves every dead letter once, across two leader deaths', async () => {
    // The two queues on two data groups: once the controller created the three.
    const groups = async () =>
      (await suite.client.admin.clusterStatus()).groups.filter((g) => g.groupId !== 0).length
    expect(await waitFor(async () => (await groups()) === 3, 30_000, 200)).toBe(true)
    await suite.client.admin.createQueue('jobs-dead', { partitions: 1 })
    await suite.client.admin.createQueue('jobs', {
      partitions: 1,
      maxDeliveries: 1,
      deadLetterQueue: 'jobs-dead',
    })
    expect((await suite.client.admin.describeQueue('jobs-dead')).config?.dedupWindowMs).toBe(5 * 60_000)
    expect(await leadApart()).toBe(true)
    const producer = suite.client.producer('jobs')
    for (let i = 0; i < DEAD; i += 1000)
      await Promise.all(Array.from({ length: 1000 }, (_, j) => producer.send({ body: `m${i + j}` })))
    // Each fails its only delivery: dead at once.
    const consumer = suite.client.consumer('jobs', { prefetch: 512, waitMs: 200 })
    const nacks: Promise<void>[] = []
    const timer = setTimeout(() => void consumer.close(), 60_000)
    for await (const d of consumer) {
      nacks.push(d.nack(0))
      if (nacks.length === DEAD) break
    }
    clearTimeout(timer)
    await Promise.all(nacks)
    await consumer.close()

    // Forwarding goes at most 6,400 a round, once a second: kill the forwarding leader after its
    // first copies landed, then the next one after its own.
    const first = await killForwarderAbove(0)
    const afterFirst = await count('jobs-dead')
    await suite.cluster.restart(first)
    expect(await leadApart()).toBe(true)
    const second = await killForwarderAbove(afterFirst)
    await suite.cluster.restart(second)

    expect(await waitFor(async () => (await deadIn('jobs').catch(() => -1)) === 0, 60_000, 250)).toBe(true)
    const bodies = new Map<string, number>()
    const reader = suite.client.consumer('jobs-dead', { prefetch: 1024, waitMs: 500 })
    const readTimer = setTimeout(() => void reader.close(), 60_000)
    // Acks not awaited one by one (a round trip each: 12,000 of them outlasted the 60 s on a
    // slow night); the SDK batches them.
    const acks: Promise<void>[] = []
    for await (const d of reader) {
      const body = new TextDecoder().decode(d.body)
      bodies.set(body, (bodies.get(body) ?? 0) + 1)
      acks.push(d.ack())
      if (bodies.size === DEAD) break
    }
    clearTimeout(readTimer)
    await Promise.all(acks)
    await reader.close() // gives back what it leased beyond: counted below
    // Copies read, plus any left in the queue: each beyond the first of a message is a duplicate.
    const copies = [...bodies.values()].reduce((a, b) => a + b, 0) + (await count('jobs-dead'))
    console.log(
      `dead-letter failover: ${copies} copies of ${bodies.size} dead letters; forwarding leaders ${first} then ${second} SIGKILLed (the first after its first copies, the second after ${afterFirst} had landed)`,
    )
    expect(bodies.size).toBe(DEAD)
    expect(copies).toBe(DEAD)
  }, 240_000)
})
