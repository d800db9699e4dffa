import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from '../src/cluster'
import { waitFor } from '../src/scale-run'

// A node's stop is bounded (transfer 2 s, gRPC grace 3 s, applies 5 s): SIGTERM ends it with
// exit 0 also while a peer is SIGSTOPped and a consumer long-polls it. Before, the stop itself
// ended within ~3 s but the process never exited: grpc-js's forced shutdown destroys each
// session but ends its socket gracefully, and the paused peer's connections, whose unread data
// filled their windows, never finished ending (the listener now destroys what is left).
describe('SIGTERM with a paused peer and an open long poll', () => {
  let cluster: LocalCluster
  let client: MqClient

  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 3 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 10_000 })
    await client.admin.createQueue('stophang', { partitions: 3 })
  })

  afterAll(async () => {
    await client?.close()
    for (const n of cluster?.nodes ?? []) cluster.resume(n.nodeId)
    await cluster?.stop()
  })

  it('exits 0 within 30 s', async () => {
    let leader = ''
    const led = await waitFor(
      async () => {
        leader = (await client.admin.describeQueue('stophang')).partitions[0]?.leaderId ?? ''
        return leader !== ''
      },
      30_000,
      200,
    )
    expect(led, 'partition 0 has no leader').toBe(true)
    const others = cluster.nodes.map((n) => n.nodeId).filter((id) => id !== leader)
    const producer = client.producer('stophang')
    await producer.send({ body: 'x' })
    await producer.close()
    const consumer = client.consumer('stophang', { waitMs: 30_000, prefetch: 4 })
    const first = await consumer[Symbol.asyncIterator]().next()
    expect(first.done).toBe(false)
    // The other fetchers long-poll now. Pause one peer (a transfer target, maybe), and let a
    // second of Raft traffic to it pile up unread in its connections (what kept them open).
    const paused = others[0] as string
    cluster.pause(paused)
    await new Promise((r) => setTimeout(r, 1_000))
    const node = cluster.node(leader)
    const exit = new Promise<number | null>((resolve) => node.child?.once('exit', (code) => resolve(code)))
    const t0 = Date.now()
    node.child?.kill('SIGTERM')
    const code = await Promise.race([
      exit,
      new Promise<string>((r) => setTimeout(() => r('timeout'), 30_000)),
    ])
    console.log(
      `stop with a paused peer: ${leader} exited ${String(code)} ${Date.now() - t0} ms after SIGTERM`,
    )
    expect(code, `no exit; ${leader}'s output:\n${node.output.split('\n').slice(-20).join('\n')}`).toBe(0)
    cluster.resume(paused)
    await consumer.close()
  }, 120_000)
})
