import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { freePort, LocalCluster } from '../src/cluster'
import { waitFor } from '../src/scale-run'

// A node takes at most 1,000 calls at once on one client connection (GRPC_LIMITS); the client's
// HTTP/2 layer holds the others until one ends. One client whose consumers long-poll more
// partitions of a node than that (here 8 consumers of a 256-partition queue: 2,048 polls) sent
// its produces, acks and route fetches on the same connection, behind the polls: sends failed
// after their deadline (SendOutcomeUnknownError, 15-24 s) and an ack took 26 s.
describe('many long polls from one client', () => {
  let cluster: LocalCluster
  let client: MqClient
  let httpPort: number

  beforeAll(async () => {
    httpPort = await freePort()
    cluster = await LocalCluster.start({
      nodes: 1,
      nodeArgs: () => ['--http-listen', `127.0.0.1:${httpPort}`],
    })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 15_000 })
    await client.admin.createQueue('idle', { partitions: 256 })
    await client.admin.createQueue('work', { partitions: 1 })
  })

  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('do not hold up the sends and acks of the same client', async () => {
    const consumers = Array.from({ length: 8 }, () => client.consumer('idle', { waitMs: 5_000 }))
    const reading = consumers.map(async (c) => {
      for await (const d of c) await d.ack()
    })
    // The node holds as many of the client's polls as one connection takes (1,000 calls at
    // once): the rest wait in the client, as its other calls did on a shared connection.
    const pollsOpen = async () => {
      const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text()
      return Number(text.match(/^mq_lease_polls_open\{node="n1"\} (\d+)$/m)?.[1] ?? 0)
    }
    expect(await waitFor(async () => (await pollsOpen()) >= 1_000, 30_000)).toBe(true)
    const producer = client.producer('work')
    const sendMs: number[] = []
    for (let i = 0; i < 3; i++) {
      const started = Date.now()
      await producer.send({ body: `job${i}` })
      sendMs.push(Date.now() - started)
    }
    const work = client.consumer('work', { waitMs: 0 })
    let ackMs = Number.POSITIVE_INFINITY
    for await (const d of work) {
      const started = Date.now()
      await d.ack()
      ackMs = Date.now() - started
      break
    }
    // A bound far from both: ~10 ms each here with their own connection, the deadline (15 s)
    // or seconds without (the machine is shared: no tighter bound in a test).
    expect(Math.max(...sendMs), `sends took ${sendMs.join(', ')} ms`).toBeLessThan(5_000)
    expect(ackMs).toBeLessThan(5_000)
    await Promise.all(consumers.map((c) => c.close()))
    await Promise.all(reading)
  }, 120_000)
})
