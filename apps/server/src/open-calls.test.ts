import { credentials, Metadata, Server, ServerCredentials, type ServiceError } from '@grpc/grpc-js'
import { PeerClient, PeerService, type ProbeResponse, unaryHandler } from '@mq/protocol'
import { afterEach, describe, expect, it } from 'vitest'
import { type OpenCalls, openCallsInterceptor } from './open-calls'

const closers: (() => void)[] = []
afterEach(() => {
  for (const close of closers.splice(0)) close()
})

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** A server whose Probe answers when `release` is called, and whose Raft streams never end. */
async function server(tally: OpenCalls) {
  const held: (() => void)[] = []
  let raftBatches = 0
  const s = new Server({ interceptors: [openCallsInterceptor(tally)] })
  s.addService(PeerService, {
    raft: (stream: { on: (event: 'data', listener: () => void) => void }) =>
      stream.on('data', () => raftBatches++),
    heartbeat: (_: unknown, cb: (e: null, r: object) => void) => cb(null, {}),
    probe: unaryHandler(
      () =>
        new Promise<ProbeResponse>((resolve) =>
          held.push(() => resolve({ nodeId: 'x', metaPristine: false })),
        ),
    ),
  })
  const port = await new Promise<number>((res, rej) =>
    s.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  )
  const client = new PeerClient(`127.0.0.1:${port}`, credentials.createInsecure())
  closers.push(() => {
    client.close()
    s.forceShutdown()
  })
  return { client, release: () => held.shift()?.(), held, raftBatches: () => raftBatches }
}

describe('openCallsInterceptor', () => {
  it('counts a call from its start to its end, answered or cancelled, and not the peers’ Raft streams', async () => {
    const tally: OpenCalls = { open: 0 }
    const { client, release, held, raftBatches } = await server(tally)

    const answered = new Promise<ServiceError | null>((resolve) =>
      client.probe({ nodeId: 'a' }, new Metadata(), (error) => resolve(error)),
    )
    await until(() => held.length === 1)
    expect(tally.open).toBe(1)
    release()
    expect(await answered).toBeNull()
    await until(() => tally.open === 0)

    const cancelled = client.probe({ nodeId: 'a' }, new Metadata(), () => {})
    await until(() => held.length === 1)
    expect(tally.open).toBe(1)
    cancelled.cancel()
    await until(() => tally.open === 0)
    release() // its handler answers after the cancel: not counted off twice
    await new Promise((r) => setTimeout(r, 50))
    expect(tally.open).toBe(0)

    const stream = client.raft(new Metadata(), () => {})
    stream.write({ fromNode: 'a', messages: [] })
    await until(() => raftBatches() === 1) // its handler runs: the call is open
    expect(tally.open).toBe(0)
    stream.cancel()
  })
})
