import { Server, ServerCredentials } from '@grpc/grpc-js'
import { MetaService, QueueNotFoundError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { MqClient } from '../src/client'
import { FakeBroker } from './fake-broker'

describe('the meta leader a client knows', () => {
  it('stays known after it refuses a call for good (a queue that does not exist): the next call goes there', async () => {
    const broker = new FakeBroker()
    await broker.start()
    // The first seed accepts calls and never answers (a paused process, a machine gone silent).
    const silent = new Server()
    let asked = 0
    silent.addService(
      MetaService,
      Object.fromEntries(
        Object.keys(MetaService).map((m) => [
          m,
          () => {
            asked++
          },
        ]),
      ),
    )
    const port = await new Promise<number>((resolve, reject) =>
      silent.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) =>
        e ? reject(e) : resolve(p),
      ),
    )
    const client = await MqClient.connect({
      servers: [`127.0.0.1:${port}`, broker.leaderAddress],
      leaderSilenceMs: 600,
    })
    try {
      expect(asked).toBe(1) // connect asked the silent seed first, then the other one
      await expect(client.admin.describeQueue('no-such-queue')).rejects.toBeInstanceOf(QueueNotFoundError)
      const started = Date.now()
      await client.admin.listQueues()
      // Until an audit, any answer but a redirect made the client forget the meta leader: the
      // next call started at the first seed again and waited leaderSilenceMs there (with
      // leaderSilenceMs 0, its whole attempt).
      expect(asked).toBe(1)
      expect(Date.now() - started).toBeLessThan(500)
    } finally {
      await client.close()
      silent.forceShutdown()
      broker.stop()
    }
  })
})
