import { credentials, Metadata } from '@grpc/grpc-js'
import { type LeaseRequest, type LeaseResponse, QueueClient } from '@mq/protocol'
import { afterAll, describe, expect, it } from 'vitest'
import { waitFor } from '../src/scale-run'
import { suiteCluster } from '../src/suite-cluster'

// A lease whose answer the consumer never got (its deadline passed, its connection broke, the
// leader died right after the lease was committed): asked again under the same attempt id, the
// broker answers the leases that attempt made, instead of leaving their messages invisible
// until the visibility timeout. The attempt is in the partition's replicated state, so the
// next leader answers it too: here the leader is SIGKILLed between the two asks.
describe('lease attempts across a leader death', () => {
  const suite = suiteCluster()
  /** One raw Queue client per node address. */
  const queues = new Map<string, QueueClient>()
  afterAll(() => {
    for (const q of queues.values()) q.close()
  })

  /** One Lease call to whichever live node leads the partition, for up to 20 s. */
  const lease = async (
    attempt: string,
    max: number,
    attemptRepeat = false,
    queue = 'attempts',
  ): Promise<LeaseResponse> => {
    let last: unknown
    const deadline = Date.now() + 20_000
    while (Date.now() < deadline) {
      const route = await suite.client.admin.describeQueue(queue)
      const request: LeaseRequest = {
        target: { queue, partition: 0, routeEpoch: route.routeEpoch },
        consumerId: 'e2e',
        max,
        visibilityMs: 120_000,
        waitMs: 0,
        attempt,
        attemptRepeat,
        ackLeaseIds: [],
      }
      for (const address of suite.cluster.servers) {
        let q = queues.get(address)
        if (!q) {
          q = new QueueClient(address, credentials.createInsecure())
          queues.set(address, q)
        }
        try {
          return await new Promise<LeaseResponse>((resolve, reject) =>
            q.lease(request, new Metadata(), { deadline: Date.now() + 2_000 }, (error, response) =>
              error ? reject(error) : resolve(response),
            ),
          )
        } catch (error) {
          last = error
          // 14 = UNAVAILABLE (NOT_LEADER, no leader yet, the node is down), 9 = no replica
          // here, 4 = DEADLINE_EXCEEDED (an election under way).
          const code = (error as { code?: number }).code
          if (code !== 14 && code !== 9 && code !== 4) throw error
        }
      }
      await new Promise((r) => setTimeout(r, 100))
    }
    throw last
  }

  it('answers a repeated attempt with its leases on the next leader, and another attempt with the rest', async () => {
    await suite.client.admin.createQueue('attempts', { partitions: 1 })
    const producer = suite.client.producer('attempts')
    await Promise.all(Array.from({ length: 5 }, (_, i) => producer.send({ body: `m${i}` })))
    await producer.close()

    const first = (await lease('attempt-1', 3)).messages
    expect(first.map((m) => Buffer.from(m.body).toString())).toEqual(['m0', 'm1', 'm2'])
    const leaderOf = async () =>
      (await suite.client.admin.describeQueue('attempts')).partitions[0]?.leaderId ?? ''
    expect(await waitFor(async () => (await leaderOf()) !== '', 10_000, 100)).toBe(true)
    const leader = await leaderOf()
    await suite.cluster.kill(leader)

    // The same attempt on the next leader: the same leases (ids, bodies, deadlines), no more.
    const again = (await lease('attempt-1', 10, true)).messages
    expect(again.map((m) => [m.leaseId, Buffer.from(m.body).toString(), m.deadlineMs])).toEqual(
      first.map((m) => [m.leaseId, Buffer.from(m.body).toString(), m.deadlineMs]),
    )
    // A new attempt gets what is left; the first three stay leased (not delivered again).
    const rest = (await lease('attempt-2', 10)).messages
    expect(rest.map((m) => Buffer.from(m.body).toString())).toEqual(['m3', 'm4'])
    expect((await lease('attempt-3', 10)).messages).toEqual([])
    await suite.cluster.restart(leader)
  })

  it('answers a repeated attempt its leases on a paused queue, and leases nothing new there', async () => {
    await suite.client.admin.createQueue('paused-attempts', { partitions: 1 })
    const producer = suite.client.producer('paused-attempts')
    const ask = (attempt: string, max: number, repeat = false) =>
      lease(attempt, max, repeat, 'paused-attempts')
    await Promise.all(['m0', 'm1', 'm2'].map((body) => producer.send({ body })))
    const first = (await ask('attempt-1', 2)).messages
    expect(first.map((m) => Buffer.from(m.body).toString())).toEqual(['m0', 'm1'])
    await suite.client.admin.updateQueue('paused-attempts', { paused: true })
    // The leader hears of the pause by a heartbeat: until then a probe leases what is ready,
    // and one more message is sent for the next probe (bounded: 100 probes).
    let pausedThere = false
    for (let i = 0; i < 100 && !pausedThere; i++) {
      const probed = (await ask(`probe-${i}`, 1)).messages
      if (probed.length === 0) pausedThere = true
      else await producer.send({ body: `p${i}` })
    }
    await producer.close()
    expect(pausedThere).toBe(true)
    expect((await suite.client.admin.peek('paused-attempts', 10)).length).toBeGreaterThan(0)
    // The answer to attempt-1 was lost: repeated on the paused queue, the same leases at once.
    const again = (await ask('attempt-1', 10, true)).messages
    expect(again.map((m) => [m.leaseId, Buffer.from(m.body).toString(), m.deadlineMs])).toEqual(
      first.map((m) => [m.leaseId, Buffer.from(m.body).toString(), m.deadlineMs]),
    )
    // A repeat of an attempt that holds nothing gets nothing new while paused.
    expect((await ask('attempt-2', 10, true)).messages).toEqual([])
  })
})
