import { MqClient } from '@mq/router-client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LocalCluster } from './cluster'
import { Prng } from './prng'
import { waitFor } from './scale-run'
import { STEADY_VISIBILITY_MS, startSteadyLoad } from './steady-load'

describe('startSteadyLoad', () => {
  let cluster: LocalCluster | undefined
  let client: MqClient | undefined
  beforeAll(async () => {
    cluster = await LocalCluster.start({ nodes: 1 })
    client = await MqClient.connect({ servers: cluster.servers, deadlineMs: 20_000 })
  })
  afterAll(async () => {
    await client?.close()
    await cluster?.stop()
  })

  it('drains what the queue still holds once every acknowledged enqueue is acked: a second copy is delivered and checked', async () => {
    const c = client as MqClient
    await c.admin.createQueue('steady', {
      partitions: 1,
      visibilityTimeoutMs: STEADY_VISIBILITY_MS,
      maxDeliveries: 1_000,
    })
    const steady = startSteadyLoad(c, 'steady', new Prng(1), { producers: 1, consumers: 1 })
    expect(await waitFor(async () => steady.load.enqueued.has('p0-0'), 20_000, 50)).toBe(true)
    // A second copy of p0-0, as a server that stored a message twice would hold it, that
    // becomes visible only after the workload's own messages are all acked.
    const producer = c.producer('steady')
    await producer.send({ body: 'p0-0', delayMs: 4_000 })
    await producer.close()
    const outcome = await steady.finish()
    expect(outcome.drained).toBe(true)
    expect(outcome.report.storedTwice).toBe(1)
  })
})
