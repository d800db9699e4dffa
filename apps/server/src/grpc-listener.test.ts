import { connect, createServer, type Socket } from 'node:net'
import { Server, ServerCredentials } from '@grpc/grpc-js'
import { afterEach, describe, expect, it } from 'vitest'
import { bytesClient, bytesService } from '../test/bytes-service'
import { type GrpcListener, listenGrpc, listenTarget, throttledCount } from './grpc-listener'

const ECHO = bytesService('/test.Echo/Echo')

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c()
})

async function echoServer(
  connectionsMax: number,
  onRefused?: (refused: number, lastRemote: string) => void,
  perAddressMax = connectionsMax,
): Promise<GrpcListener> {
  const server = new Server()
  server.addService(ECHO, {
    call: (call: { request: Buffer }, cb: (e: null, b: Buffer) => void) => cb(null, call.request),
  })
  const listener = await listenGrpc(
    server,
    ServerCredentials.createInsecure(),
    '127.0.0.1:0',
    { connectionsMax, perAddressMax },
    onRefused,
  )
  cleanups.push(() => {
    listener.close()
    server.forceShutdown()
  })
  return listener
}

/** A TCP connection to `port`, and a promise of its close (resolves with how long it stayed open). */
function open(port: number, localAddress?: string): { socket: Socket; closed: Promise<number> } {
  const started = Date.now()
  const socket = connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) })
  socket.on('error', () => {})
  socket.resume()
  cleanups.push(() => socket.destroy())
  return {
    socket,
    closed: new Promise((resolve) => socket.once('close', () => resolve(Date.now() - started))),
  }
}

/** Resolves with `ms` unless `p` settles first. */
function within<T>(p: Promise<T>, ms: number): Promise<T | 'open'> {
  return Promise.race([p, new Promise<'open'>((resolve) => setTimeout(() => resolve('open'), ms))])
}

/** Waits (2 s at most) until the listener holds `count` connections; its count then. */
async function holding(listener: GrpcListener, count: number): Promise<number> {
  const deadline = Date.now() + 2_000
  while (listener.connections() !== count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
  return listener.connections()
}

async function echo(port: number, text: string): Promise<string> {
  const { client, call } = bytesClient(ECHO, port)
  cleanups.push(() => client.close())
  return String(await call(Buffer.from(text)))
}

describe('the gRPC listener', () => {
  it('splits host:port for listen, IPv6 in brackets', () => {
    expect(listenTarget('127.0.0.1:7001')).toEqual({ host: '127.0.0.1', port: 7001 })
    expect(listenTarget('[::1]:7001')).toEqual({ host: '::1', port: 7001 })
    expect(listenTarget('mq-1.example:0')).toEqual({ host: 'mq-1.example', port: 0 })
  })

  it('serves gRPC calls on the port it bound', async () => {
    const listener = await echoServer(8)
    expect(listener.port).toBeGreaterThan(0)
    expect(await echo(listener.port, 'hello')).toBe('hello')
    expect(listener.connections()).toBe(1)
  })

  it('closes a connection past connectionsMax at once, reports it, and takes one again when one left', async () => {
    const reports: [number, string][] = []
    const listener = await echoServer(3, (n, remote) => reports.push([n, remote]))
    const held = [open(listener.port), open(listener.port), open(listener.port)]
    expect(await holding(listener, 3)).toBe(3)
    const extra = open(listener.port)
    expect(await within(extra.closed, 2_000)).not.toBe('open')
    const another = open(listener.port)
    expect(await within(another.closed, 2_000)).not.toBe('open')
    expect(listener.refused()).toBe(2)
    // The first refusal is reported at once; the second within REFUSALS_REPORT_MS waits for a later one.
    expect(reports).toHaveLength(1)
    expect(reports[0]?.[0]).toBe(1)
    expect(reports[0]?.[1]).toMatch(/^from 127\.0\.0\.1:\d+$/)
    for (const h of held) expect(await within(h.closed, 100)).toBe('open')
    held[0]?.socket.destroy()
    await held[0]?.closed
    expect(await holding(listener, 2)).toBe(2)
    expect(await echo(listener.port, 'again')).toBe('again')
  })

  it('closes a connection past perAddressMax from its address, and takes others from elsewhere', async () => {
    const reports: [number, string][] = []
    const listener = await echoServer(8, (n, remote) => reports.push([n, remote]), 2)
    const held = [open(listener.port), open(listener.port)]
    await holding(listener, 2)
    const extra = open(listener.port)
    expect(await within(extra.closed, 2_000)).not.toBe('open')
    expect(listener.refused()).toBe(1)
    expect(reports[0]?.[1]).toMatch(/^from 127\.0\.0\.1:\d+, which holds 2 already$/)
    // Another address (loopback answers for all of 127/8) is not held back by that one.
    const other = open(listener.port, '127.0.0.2')
    expect(await within(other.closed, 300)).toBe('open')
    expect(listener.connections()).toBe(3)
    // Once one of the address's closes, it may open one again.
    held[0]?.socket.destroy()
    await held[0]?.closed
    await holding(listener, 2)
    expect(await echo(listener.port, 'again')).toBe('again')
    expect(listener.refused()).toBe(1)
  })

  it('destroys the connections still open, one whose peer reads nothing too', async () => {
    const listener = await echoServer(10)
    const reading = open(listener.port)
    // Never reads: what the server writes fills its window (a SIGSTOPped peer's connection).
    const stalled = connect({ host: '127.0.0.1', port: listener.port })
    stalled.on('error', () => {})
    stalled.pause()
    cleanups.push(() => stalled.destroy())
    expect(await holding(listener, 2)).toBe(2)
    listener.close() // stops accepting; the open ones stay
    expect(await within(reading.closed, 100)).toBe('open')
    listener.destroyAll()
    expect(await within(reading.closed, 2_000)).not.toBe('open')
    // Gone on the server's side (the paused client notices only once it reads again).
    expect(await holding(listener, 0)).toBe(0)
  })

  it('reports counted events at once, then at most once per period with the count since', () => {
    let t = 0
    const reports: [number, string][] = []
    const note = throttledCount(
      10_000,
      (n, last) => reports.push([n, last]),
      () => t,
    )
    note('a')
    note('b')
    t = 5_000
    note('c')
    expect(reports).toEqual([[1, 'a']])
    t = 10_000
    note('d')
    expect(reports).toEqual([
      [1, 'a'],
      [3, 'd'],
    ])
  })

  it('fails with the address when the port is taken', async () => {
    const taken = createServer()
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r))
    cleanups.push(() => taken.close())
    const port = (taken.address() as { port: number }).port
    const server = new Server()
    cleanups.push(() => server.forceShutdown())
    await expect(
      listenGrpc(server, ServerCredentials.createInsecure(), `127.0.0.1:${port}`, {
        connectionsMax: 8,
        perAddressMax: 8,
      }),
    ).rejects.toThrow(`cannot listen on 127.0.0.1:${port}: listen EADDRINUSE`)
  })
})
