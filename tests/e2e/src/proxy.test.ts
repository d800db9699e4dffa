import { once } from 'node:events'
import { createServer, type Socket, connect as tcpConnect } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { FaultProxy } from './proxy'

// The proxy against an echo server on loopback.
describe('FaultProxy', () => {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c()
  })

  async function setup(heldBytesMax?: number) {
    const received: string[] = []
    const server = createServer((s) => {
      s.on('data', (d) => {
        received.push(d.toString())
        s.write(d)
      })
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const port = (server.address() as { port: number }).port
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())))
    const proxy = await FaultProxy.start(0, port, heldBytesMax)
    cleanup.push(() => proxy.close())
    const client: Socket = tcpConnect({ port: proxy.port, host: '127.0.0.1' })
    await once(client, 'connect')
    cleanup.push(() => void client.destroy())
    const echoes: string[] = []
    client.on('data', (d) => echoes.push(d.toString()))
    const next = async () => {
      if (echoes.length === 0) await once(client, 'data')
      return echoes.splice(0).join('')
    }
    return { proxy, client, received, next }
  }

  it('carries bytes both ways', async () => {
    const { client, next } = await setup()
    client.write('hello')
    expect(await next()).toBe('hello')
  })

  it('holds bytes while held and delivers them in order on release', async () => {
    const { proxy, client, received, next } = await setup()
    proxy.hold()
    client.write('a')
    client.write('b')
    // The fault's duration: nothing may arrive during it.
    await new Promise((r) => setTimeout(r, 100))
    expect(received).toEqual([])
    proxy.release()
    let echoed = await next()
    while (echoed.length < 2) echoed += await next()
    expect(echoed).toBe('ab')
    expect(received.join('')).toBe('ab')
  })

  it('delays bytes by the set delay, in order', async () => {
    const { proxy, client, next } = await setup()
    proxy.delay(150)
    const sentMs = Date.now()
    client.write('x')
    client.write('y')
    let echoed = await next()
    while (echoed.length < 2) echoed += await next()
    expect(echoed).toBe('xy')
    // Both directions are delayed: at least two delays for the round trip.
    expect(Date.now() - sentMs).toBeGreaterThanOrEqual(290)
    proxy.delay(0)
    client.write('z')
    expect(await next()).toBe('z')
  })

  it('lets no close through while held: the node sees a client that went away only after release', async () => {
    const closed: string[] = []
    const server = createServer((s) => {
      s.on('error', () => {})
      s.on('close', () => closed.push('node side'))
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())))
    const proxy = await FaultProxy.start(0, (server.address() as { port: number }).port)
    cleanup.push(() => proxy.close())
    const client = tcpConnect({ port: proxy.port, host: '127.0.0.1' })
    await once(client, 'connect')
    await new Promise((r) => setTimeout(r, 50))
    proxy.hold()
    client.destroy()
    // The fault's duration: a network that drops every packet to the node drops its FIN too.
    await new Promise((r) => setTimeout(r, 200))
    expect(closed).toEqual([])
    proxy.release()
    for (let i = 0; i < 50 && closed.length === 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(closed).toEqual(['node side'])
  })

  it('lets no new connection reach the node while held, and carries it on release', async () => {
    let accepted = 0
    const received: string[] = []
    const server = createServer((s) => {
      accepted++
      s.on('data', (d) => received.push(d.toString()))
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    cleanup.push(() => new Promise<void>((r) => server.close(() => r())))
    const proxy = await FaultProxy.start(0, (server.address() as { port: number }).port)
    cleanup.push(() => proxy.close())
    proxy.hold()
    const client = tcpConnect({ port: proxy.port, host: '127.0.0.1' })
    cleanup.push(() => void client.destroy())
    await once(client, 'connect')
    client.write('syn')
    // A network that drops every packet to the node drops the connection's SYN too.
    await new Promise((r) => setTimeout(r, 200))
    expect(accepted).toBe(0)
    proxy.release()
    for (let i = 0; i < 50 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(accepted).toBe(1)
    expect(received.join('')).toBe('syn')
  })

  it('resets a held connection that buffers more than its bound', async () => {
    const { proxy, client, received } = await setup(10)
    proxy.hold()
    client.write('x'.repeat(100))
    await once(client, 'close')
    expect(received).toEqual([])
  })

  it('ends its connections when closed', async () => {
    const { proxy, client } = await setup()
    await proxy.close()
    await once(client, 'close')
    expect(client.destroyed).toBe(true)
  })
})
