import { Server, ServerCredentials } from '@grpc/grpc-js'
import { PeerService } from '@mq/protocol'
import { type Message, MessageType, message } from '@mq/raft-core'
import { afterEach, describe, expect, it } from 'vitest'
import { AccessControl } from '../src/auth/access'
import { authInterceptor } from '../src/auth/auth-interceptor'
import { silentLogger } from '../src/log'
import { PeerTransport } from '../src/peer-transport'

interface Node {
  transport: PeerTransport
  server: Server
  address: string
  received: { groupId: number; message: Message; from: string }[]
}

const nodes: Node[] = []
afterEach(() => {
  for (const n of nodes.splice(0)) {
    n.transport.close()
    n.server.forceShutdown()
  }
})

async function node(
  id: string,
  token: string,
  addresses: Map<string, string>,
  onPeerDown: (nodeId: string) => void = () => {},
): Promise<Node> {
  const received: Node['received'] = []
  const transport = new PeerTransport(
    { nodeId: id, token, resolve: (n) => addresses.get(n), onPeerDown },
    (groupId, m, from) => received.push({ groupId, message: m, from }),
  )
  // As on a node: the access control checks the peer token of every Peer call.
  const access = new AccessControl({ peerToken: token, tokens: undefined })
  const server = new Server({ interceptors: [authInterceptor(access, silentLogger())] })
  const unused = (_: unknown, cb: (e: null, r: object) => void) => cb(null, {})
  server.addService(PeerService, { raft: transport.handleRaft, heartbeat: unused })
  const port = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  )
  const address = `127.0.0.1:${port}`
  addresses.set(id, address)
  const n = { transport, server, address, received }
  nodes.push(n)
  return n
}

const heartbeat = (to: string, term: number) => message({ type: MessageType.Heartbeat, from: 'a', to, term })

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached in time')
    await new Promise((r) => setTimeout(r, 10))
  }
}

describe('PeerTransport', () => {
  it('delivers messages of many groups in order, batched per node', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', 's3cret', addresses)
    const b = await node('b', 's3cret', addresses)
    for (let i = 1; i <= 2_000; i++) a.transport.send(i % 7, [heartbeat('b', i)])
    await until(() => b.received.length === 2_000)
    expect(b.received.map((r) => r.message.term)).toEqual(Array.from({ length: 2_000 }, (_, i) => i + 1))
    expect(b.received[0]).toMatchObject({ groupId: 1, from: 'a' })
    expect(a.transport.stats).toMatchObject({ sent: 2_000, dropped: 0 })
  })

  it('rejects a peer with the wrong token and delivers nothing', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', 'wrong', addresses)
    const b = await node('b', 'right', addresses)
    a.transport.send(1, [heartbeat('b', 1)])
    await until(() => a.transport.stats.streamFailures > 0) // refused: UNAUTHENTICATED
    expect(b.received).toEqual([])
  })

  it('drops messages for an unknown or unreachable node, then reconnects', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    a.transport.send(1, [heartbeat('nowhere', 1)])
    await until(() => a.transport.stats.dropped === 1)
    addresses.set('b', '127.0.0.1:1') // nothing listens there
    a.transport.send(1, [heartbeat('b', 1)])
    await until(() => a.transport.stats.streamFailures === 1)
    const b = await node('b', '', addresses) // b comes up on a real address
    const deadline = Date.now() + 10_000
    for (let term = 2; b.received.length === 0 && Date.now() < deadline; term++) {
      a.transport.send(1, [heartbeat('b', term)])
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(b.received.length).toBeGreaterThan(0)
  })

  it('reports a peer whose connection breaks as down, and as up once it is heard from again', async () => {
    const addresses = new Map<string, string>()
    const downs: string[] = []
    const a = await node('a', '', addresses, (id) => downs.push(id))
    const b = await node('b', '', addresses)
    a.transport.send(1, [heartbeat('b', 1)])
    await until(() => b.received.length === 1)
    expect(a.transport.isDown('b')).toBe(false)
    b.server.forceShutdown() // what a killed process looks like from a: the connection resets
    await until(() => downs.length > 0)
    expect(downs[0]).toBe('b')
    expect(a.transport.isDown('b')).toBe(true)
    // b's replacement speaks first: a hears from it, so it is up again.
    b.transport.close()
    const b2 = await node('b', '', addresses)
    b2.transport.send(1, [message({ type: MessageType.Heartbeat, from: 'b', to: 'a', term: 2 })])
    await until(() => a.received.length === 1)
    expect(a.transport.isDown('b')).toBe(false)
  })

  it('bounds its queue per destination', async () => {
    const addresses = new Map<string, string>([['b', '127.0.0.1:1']])
    const t = new PeerTransport(
      { nodeId: 'a', token: '', resolve: (n) => addresses.get(n), queueMax: 10 },
      () => {},
    )
    for (let i = 1; i <= 25; i++) t.send(1, [heartbeat('b', i)])
    expect(t.stats.dropped).toBe(15)
    t.close()
  })
})
