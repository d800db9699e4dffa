import { join } from 'node:path'
import {
  Client,
  credentials,
  Metadata,
  Server,
  ServerCredentials,
  type ServerReadableStream,
  type ServiceError,
  type sendUnaryData,
  status,
} from '@grpc/grpc-js'
import { PeerService, type RaftBatch, type RaftStreamEnd, unaryHandler } from '@mq/protocol'
import { type Entry, EntryType, type Message, MessageType, message } from '@mq/raft-core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { AccessControl } from '../src/auth/access'
import { authInterceptor } from '../src/auth/auth-interceptor'
import { silentLogger } from '../src/log'
import { PEER_TOKEN_KEY, PeerTransport } from '../src/peer-transport'
import { startScript } from './processes'

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
  raft?: (stream: ServerReadableStream<RaftBatch, RaftStreamEnd>, cb: sendUnaryData<RaftStreamEnd>) => void,
): Promise<Node> {
  const received: Node['received'] = []
  const transport = new PeerTransport(
    { nodeId: id, token, resolve: (n) => addresses.get(n), onPeerDown },
    (groupId, m, from) => received.push({ groupId, message: m, from }),
  )
  // As on a node: the access control checks the peer token of every Peer call, and one
  // gRPC message is at most 16 MiB here (64 MiB on a node).
  const access = new AccessControl({ peerToken: token, tokens: undefined })
  const server = new Server({
    interceptors: [authInterceptor(access, silentLogger())],
    'grpc.max_receive_message_length': 16 * 1024 * 1024,
  })
  const unused = (_: unknown, cb: (e: null, r: object) => void) => cb(null, {})
  server.addService(PeerService, {
    raft: raft ?? transport.handleRaft,
    heartbeat: unused,
    probe: unaryHandler(async () => ({ nodeId: id, metaPristine: false })),
  })
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

/** An App carrying one entry of `bytes` bytes. */
const app = (to: string, index: number, bytes: number) => {
  const entry: Entry = { index, term: 1, type: EntryType.Normal, timestampMs: 0, data: new Uint8Array(bytes) }
  return message({
    type: MessageType.App,
    from: 'a',
    to,
    term: 1,
    index: index - 1,
    logTerm: 1,
    entries: [entry],
  })
}
const MiB = 1024 * 1024
const turn = () => new Promise((r) => setImmediate(r))

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

  it('keeps trying to reconnect when the wall clock steps back (reconnects are timed on a monotonic clock)', async () => {
    const addresses = new Map<string, string>([['b', '127.0.0.1:1']]) // nothing listens there
    const a = await node('a', '', addresses)
    const realNow = Date.now.bind(Date)
    let offset = 0
    const clock = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset)
    try {
      for (let term = 1; term <= 10; term++) {
        a.transport.send(1, [heartbeat('b', term)])
        await new Promise((r) => setTimeout(r, 50))
      }
      const before = a.transport.stats.streamFailures
      expect(before).toBeGreaterThan(0)
      offset = -60_000 // NTP steps this node's clock back a minute
      for (let term = 11; term <= 50; term++) {
        a.transport.send(1, [heartbeat('b', term)])
        await new Promise((r) => setTimeout(r, 50))
      }
      // Still trying (a reconnect at most every reconnectMs): none for a minute before.
      expect(a.transport.stats.streamFailures - before).toBeGreaterThan(2)
    } finally {
      clock.mockRestore()
    }
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

  it('forgets the destination sent to least recently past peersMax: nodes gone for good are not kept for ever', async () => {
    // Nodes replaced over time under new ids, each gone once replaced (nothing listens there).
    const gone = ['n1', 'n2', 'n3', 'n4', 'n5']
    const t = new PeerTransport(
      { nodeId: 'a', token: '', resolve: () => '127.0.0.1:1', peersMax: 2, reconnectMs: 60_000 },
      () => {},
    )
    try {
      for (const id of gone) {
        t.send(1, [heartbeat(id, 1)])
        await until(() => t.isDown(id)) // its stream was refused
      }
      // Before, every one was kept (its queue, its channel, its down mark), for the life of the process.
      expect(gone.filter((id) => t.isDown(id))).toEqual(['n4', 'n5'])
      expect(t.stats.streamFailures).toBe(5)
    } finally {
      t.close()
    }
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

  it('cuts batches by bytes: many big Apps of one turn are not one message over the gRPC limit', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    const b = await node('b', '', addresses)
    // 40 MiB in one turn, to a peer that takes 16 MiB per gRPC message: before, one batch of
    // 40 cut the stream (RESOURCE_EXHAUSTED) and every message was dropped.
    for (let i = 1; i <= 40; i++) a.transport.send(1, [app('b', i, MiB)])
    await until(() => b.received.length === 40, 20_000)
    expect(a.transport.stats).toMatchObject({ streamFailures: 0, dropped: 0 })
    expect(a.transport.queuedBytes).toBe(0)
  })

  it("keeps a received entry's own bytes, not the whole batch it came in", async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    const b = await node('b', '', addresses)
    // One turn: a 4 MiB entry of group 1 and a 10-byte one of group 2 go in one batch.
    a.transport.send(1, [app('b', 1, 4 * MiB)])
    a.transport.send(2, [app('b', 1, 10)])
    await until(() => b.received.length === 2)
    const small = b.received.find((r) => r.groupId === 2)?.message.entries[0]?.data
    expect(small?.length).toBe(10)
    // A view into the batch's buffer kept all of it alive while the entry stayed in its group's
    // in-memory log (until a compaction), which counts the entry's 10 bytes only.
    expect(small?.buffer.byteLength).toBeLessThan(64 * 1024)
  })

  it("keeps a received snapshot chunk's own bytes, not the whole batch it came in", async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    const b = await node('b', '', addresses)
    // One turn: a 4 MiB entry of group 1 and a snapshot chunk (an image's 31-byte handle) of
    // group 2 go in one batch; the image stager keeps the chunk's message while it fetches.
    a.transport.send(1, [app('b', 1, 4 * MiB)])
    a.transport.send(2, [
      message({
        type: MessageType.Snap,
        from: 'a',
        to: 'b',
        term: 1,
        snapshot: {
          meta: {
            index: 5,
            term: 1,
            conf: { voters: ['a', 'b'], learners: [], votersOutgoing: [], learnersNext: [] },
          },
          offset: 0,
          totalBytes: 31,
          data: new Uint8Array(31),
        },
      }),
    ])
    await until(() => b.received.length === 2)
    const chunk = b.received.find((r) => r.groupId === 2)?.message.snapshot?.data
    expect(chunk?.length).toBe(31)
    expect(chunk?.buffer.byteLength).toBeLessThan(64 * 1024)
  })

  it('bounds the bytes queued per destination, and lets messages without data pass', async () => {
    const addresses = new Map<string, string>([['b', '127.0.0.1:1']])
    const t = new PeerTransport(
      { nodeId: 'a', token: '', resolve: (n) => addresses.get(n), queueBytesMax: 10 * MiB },
      () => {},
    )
    for (let i = 1; i <= 30; i++) t.send(1, [app('b', i, MiB)])
    expect(t.queuedBytes).toBeLessThanOrEqual(10 * MiB)
    expect(t.stats.dropped).toBe(21) // 9 of 1 MiB and a bit fit
    t.send(1, [heartbeat('b', 2)])
    expect(t.stats.dropped).toBe(21)
    t.close()
    // One message bigger than the bound passes when nothing else waits: dropped every time,
    // it would hold its group at that entry for good.
    const alone = new PeerTransport(
      { nodeId: 'a', token: '', resolve: (n) => addresses.get(n), queueBytesMax: 10 * MiB },
      () => {},
    )
    alone.send(1, [app('b', 1, 12 * MiB)])
    expect(alone.stats.dropped).toBe(0)
    alone.send(1, [app('b', 2, MiB)])
    expect(alone.stats.dropped).toBe(1)
    alone.close()
  })

  it('counts what its stream is writing against the byte bound: a stopped peer holds ~queueBytesMax, not ~16 batches more', async () => {
    // The peer in a process of its own, stopped (SIGSTOP): nothing it is sent completes.
    const peer = startScript(join(import.meta.dirname, 'peer-server-process.ts'))
    const child = peer.child
    try {
      const port = await vi.waitFor(
        () => {
          const m = /PORT (\d+)/.exec(peer.output())
          if (!m) throw new Error(`the peer process has not bound yet: ${peer.output()}`)
          return Number(m[1])
        },
        { timeout: 15_000, interval: 50 },
      )
      const t = new PeerTransport({ nodeId: 'a', token: '', resolve: () => `127.0.0.1:${port}` }, () => {})
      try {
        t.send(1, [heartbeat('b', 1)])
        await vi.waitFor(() => expect(t.stats.sent).toBe(1))
        child.kill('SIGSTOP')
        const MiB = 1024 * 1024
        for (let round = 0, i = 1; round < 40; round++) {
          for (let k = 0; k < 16; k++) t.send(1, [app('b', ++i, MiB)])
          await new Promise((r) => setTimeout(r, 20))
        }
        await new Promise((r) => setTimeout(r, 300))
        // Queued and being written: the 64 MiB bound (one message past it at most).
        expect(t.queuedBytes).toBeLessThanOrEqual(65 * MiB)
        // Handed to grpc-js: one batch being written (8 MiB) and what the sockets and HTTP/2
        // windows took; before, ~16 batches more waited in grpc-js's stream (88 messages).
        expect(t.stats.sent).toBeLessThan(40)
      } finally {
        t.close()
      }
    } finally {
      child.kill('SIGKILL')
    }
  }, 30_000)

  it("moves a stream waiting for a peer that stopped reading to the peer's new address", async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    // b's first address takes the stream and never reads it.
    const stuck = await node(
      'b',
      '',
      addresses,
      () => {},
      (stream) => stream.pause(),
    )
    const stuckAddress = stuck.address
    for (let i = 1; i <= 48 && a.transport.stats.sent < 48; i++) {
      a.transport.send(1, [app('b', i, MiB)])
      await turn()
    }
    await new Promise((r) => setTimeout(r, 200))
    // b moves: the next send goes to its new address, not after the stalled stream.
    const moved = await node('b', '', addresses)
    expect(moved.address).not.toBe(stuckAddress)
    a.transport.send(1, [heartbeat('b', 7)])
    await until(() => moved.received.some((r) => r.message.term === 7), 3_000)
  })

  it('cancels its streams on close when a peer never finishes them', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    const events: string[] = []
    // A peer that reads but never ends the call (a stopped process answers nothing).
    await node(
      'b',
      '',
      addresses,
      () => {},
      (stream) => {
        stream.on('data', () => events.push('data'))
        stream.on('cancelled', () => events.push('cancelled'))
      },
    )
    a.transport.send(1, [heartbeat('b', 1)])
    await until(() => events.includes('data'))
    a.transport.close()
    await until(() => events.includes('cancelled'), 3_000)
  })

  it("ends the peers' inbound streams at a stop, and refuses new ones: the senders see the node down, a graceful shutdown waits for nothing", async () => {
    const addresses = new Map<string, string>()
    const down: string[] = []
    const a = await node('a', '', addresses, (id) => down.push(id))
    const b = await node('b', '', addresses)
    a.transport.send(1, [heartbeat('b', 1)])
    await until(() => b.received.length === 1)
    // grpc-js's graceful shutdown waits for every open call: a's stream into b, which a would
    // end only when it stops too.
    let shutDown = false
    b.server.tryShutdown(() => {
      shutDown = true
    })
    await new Promise((r) => setTimeout(r, 200))
    expect(shutDown).toBe(false)
    b.transport.endInbound()
    await until(() => shutDown, 3_000)
    await until(() => down.includes('b')) // UNAVAILABLE: what a stopped node's cut connection shows
    expect(a.transport.isDown('b')).toBe(true)

    // A stream opened after the stop is answered UNAVAILABLE at once (on a server still open).
    const c = await node('c', '', addresses)
    c.transport.endInbound()
    a.transport.send(1, [heartbeat('c', 1)])
    await until(() => down.includes('c'))
    expect(c.received).toEqual([])
  })

  it('answers bytes that are not a RaftBatch or a ProbeRequest with INVALID_ARGUMENT, and goes on delivering', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', 's3cret', addresses)
    const b = await node('b', 's3cret', addresses)
    const raw = new Client(b.address, credentials.createInsecure())
    const metadata = new Metadata()
    metadata.set(PEER_TOKEN_KEY, 's3cret')
    const same = (x: Buffer) => x
    // A length past the end of the message: the generated decoder threw, and grpc-js answered
    // INTERNAL "Error deserializing request", which the sending node takes for a peer gone.
    const garbage = Buffer.from([0x0a, 0x05, 0x61])
    try {
      const probed = await new Promise<ServiceError | null>((resolve) =>
        raw.makeUnaryRequest('/mq.v1.Peer/Probe', same, same, garbage, metadata, (e) => resolve(e)),
      )
      expect(probed?.code).toBe(status.INVALID_ARGUMENT)
      expect(probed?.details).toMatch(/^ProbeRequest: not a valid protobuf encoding/)
      const streamed = await new Promise<ServiceError | null>((resolve) => {
        const stream = raw.makeClientStreamRequest('/mq.v1.Peer/Raft', same, same, metadata, (e) =>
          resolve(e),
        )
        stream.write(garbage)
        stream.end()
      })
      expect(streamed?.code).toBe(status.INVALID_ARGUMENT)
      expect(streamed?.details).toMatch(/^RaftBatch: not a valid protobuf encoding/)
      a.transport.send(1, [heartbeat('b', 1)])
      await until(() => b.received.length === 1)
    } finally {
      raw.close()
    }
  })

  it('drops what it has for a peer whose address grpc-js cannot parse (as a peer may register it), never throwing out of its flush', async () => {
    // A line break makes grpc-js's channel constructor throw ("Could not parse target name"):
    // thrown in the flush's setImmediate, it ended the process.
    const addresses = new Map<string, string>([['b', '127.0.0.1:7001\nx']])
    const t = new PeerTransport({ nodeId: 'a', token: '', resolve: (n) => addresses.get(n) }, () => {})
    try {
      t.send(1, [heartbeat('b', 1), app('b', 2, 100)])
      await turn()
      await turn()
      expect(t.stats.dropped).toBe(2)
      expect(t.stats.sent).toBe(0)
      expect(t.queuedBytes).toBe(0)
      // Once the peer's address is one grpc-js takes, messages go to it again.
      const b = await node('b', '', addresses)
      t.send(1, [heartbeat('b', 3)])
      await until(() => b.received.some((r) => r.message.term === 3))
    } finally {
      t.close()
    }
  })

  it('drops a message it cannot deliver and goes on with the batch', async () => {
    const addresses = new Map<string, string>()
    const a = await node('a', '', addresses)
    const delivered: number[] = []
    const b = new PeerTransport({ nodeId: 'b', token: '', resolve: (n) => addresses.get(n) }, (_, m) => {
      if (m.term === 2) throw new Error('a bug in a group')
      delivered.push(m.term)
    })
    const server = new Server()
    server.addService(PeerService, {
      raft: b.handleRaft,
      heartbeat: (_: unknown, cb: (e: null, r: object) => void) => cb(null, {}),
    })
    const port = await new Promise<number>((res, rej) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
    )
    addresses.set('b', `127.0.0.1:${port}`)
    try {
      a.transport.send(1, [heartbeat('b', 1), heartbeat('b', 2), heartbeat('b', 3)])
      await until(() => delivered.length === 2)
      expect(delivered).toEqual([1, 3])
      expect(b.stats.rejected).toBe(1)
      // A message whose sender is not the batch's ('a' passing one off as from 'c') is dropped.
      a.transport.send(1, [{ ...heartbeat('b', 4), from: 'c' }, heartbeat('b', 5)])
      await until(() => delivered.length === 3)
      expect(delivered).toEqual([1, 3, 5])
      expect(b.stats.rejected).toBe(2)
    } finally {
      b.close()
      server.forceShutdown()
    }
  })
})
