import { type ClientHttp2Session, connect as connectHttp2 } from 'node:http2'
import { Server, ServerCredentials } from '@grpc/grpc-js'
import { afterEach, describe, expect, it } from 'vitest'
import { bytesClient, bytesService } from '../test/bytes-service'
import { listenGrpc } from './grpc-listener'
import { type SlowReader, UnsentAnswers, type UnsentLimits, unsentAnswersInterceptor } from './unsent-answers'

const MIB = 1024 * 1024
const PATH = '/test.Big/Get'
/** Answers as many bytes as the request's u32 asks for. */
const BIG = bytesService(PATH)

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c()
})

interface Served {
  readonly port: number
  readonly answers: UnsentAnswers
  readonly closed: SlowReader[]
  readonly rss: () => number
}

async function serve(limits: UnsentLimits): Promise<Served> {
  const closed: SlowReader[] = []
  const answers = new UnsentAnswers(limits, (r) => closed.push(r))
  let missing = false
  const server = new Server({
    interceptors: [
      unsentAnswersInterceptor(answers, () => {
        missing = true
      }),
    ],
  })
  server.addService(BIG, {
    call: (call: { request: Buffer }, cb: (e: null, b: Buffer) => void) =>
      // Answers after a turn of the event loop, as a handler that reads storage does.
      setImmediate(() => cb(null, Buffer.alloc(call.request.readUInt32BE(0), 7))),
  })
  const listener = await listenGrpc(server, ServerCredentials.createInsecure(), '127.0.0.1:0', {
    connectionsMax: 64,
    perAddressMax: 64,
  })
  cleanups.push(() => {
    listener.close()
    server.forceShutdown()
    expect(missing).toBe(false)
  })
  return { port: listener.port, answers, closed, rss: () => process.memoryUsage().rss }
}

function request(bytes: number): Buffer {
  const b = Buffer.alloc(4)
  b.writeUInt32BE(bytes, 0)
  return b
}

/**
 * A client that opens `calls` calls of `bytes` answers each on one HTTP/2 connection and never
 * reads them (each stream paused: HTTP/2 flow control stops the server after 64 KiB).
 */
function nonReader(
  port: number,
  calls: number,
  bytes: number,
): { session: ClientHttp2Session; closed: Promise<void> } {
  const session = connectHttp2(`http://127.0.0.1:${port}`)
  session.on('error', () => {})
  const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 4]), request(bytes)])
  for (let i = 0; i < calls; i++) {
    const stream = session.request({
      ':method': 'POST',
      ':path': PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    })
    stream.on('error', () => {})
    stream.end(frame)
    stream.pause()
  }
  cleanups.push(() => session.destroy())
  return { session, closed: new Promise((resolve) => session.once('close', () => resolve())) }
}

function reader(port: number): (bytes: number) => Promise<number> {
  const { client, call } = bytesClient(BIG, port, { 'grpc.max_receive_message_length': 64 * MIB })
  cleanups.push(() => client.close())
  return async (bytes) => (await call(request(bytes))).length
}

async function until(check: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('unsent answers', () => {
  it('closes a connection that leaves more than its bound unread; a reading client carries on', async () => {
    const served = await serve({ connectionBytesMax: 8 * MIB, totalBytesMax: 64 * MIB })
    const get = reader(served.port)
    const slow = nonReader(served.port, 40, MIB)
    // The reader's answers (4 MiB asked for at a time, within its bound) go through while the
    // slow connection fills and is closed.
    for (let round = 0; round < 10; round++) {
      const got = await Promise.all(Array.from({ length: 8 }, () => get(MIB / 2)))
      expect(got.every((n) => n === MIB / 2)).toBe(true)
    }
    await slow.closed
    expect(served.closed).toHaveLength(1)
    expect(served.closed[0]?.limit).toBe('connection')
    expect(served.closed[0]?.remote).toMatch(/^127\.0\.0\.1:\d+$/)
    expect(served.closed[0]?.unsentBytes).toBeGreaterThan(8 * MIB)
    expect(served.closed[0]?.unsentBytes).toBeLessThanOrEqual(9 * MIB + 64 * 1024)
    expect(served.answers.closed).toBe(1)
    // The reader's connection stays: more answers on it.
    expect(await get(MIB)).toBe(MIB)
    await until(() => served.answers.unsentBytes < 2 * MIB, 2_000)
  })

  it('closes the connections holding the most when the total passes its bound, each under its own', async () => {
    const served = await serve({ connectionBytesMax: 8 * MIB, totalBytesMax: 20 * MIB })
    const get = reader(served.port)
    const slow = [6, 5, 7, 6].map((calls) => nonReader(served.port, calls, MIB))
    const state = slow.map(() => 'open')
    slow.forEach((s, i) => {
      void s.closed.then(() => {
        state[i] = 'closed'
      })
    })
    await until(() => served.closed.length > 0, 5_000)
    // Every answer written (24 MiB unread): the one with 7 went, the rest (17 MiB) stay.
    await new Promise((r) => setTimeout(r, 300))
    expect(served.closed.map((r) => r.limit)).toEqual(['total'])
    expect(served.closed[0]?.unsentBytes).toBeGreaterThan(6.5 * MIB)
    expect(state).toEqual(['open', 'open', 'closed', 'open'])
    expect(served.answers.unsentBytes).toBeLessThanOrEqual(20 * MIB)
    expect(await get(MIB)).toBe(MIB)
  })

  it('never closes a client that reads, however much it asks for over time', async () => {
    const served = await serve({ connectionBytesMax: 8 * MIB, totalBytesMax: 16 * MIB })
    const get = reader(served.port)
    let total = 0
    // 7 MiB asked for at once, 40 times: 280 MiB through a connection bounded at 8.
    for (let round = 0; round < 40; round++) {
      const got = await Promise.all(Array.from({ length: 7 }, () => get(MIB)))
      total += got.reduce((a, b) => a + b, 0)
    }
    expect(total).toBe(280 * MIB)
    expect(served.closed).toEqual([])
  })

  it('bounds what a non-reading connection holds in memory', async () => {
    const served = await serve({ connectionBytesMax: 16 * MIB, totalBytesMax: 64 * MIB })
    const before = served.rss()
    const slow = nonReader(served.port, 200, 2 * MIB)
    await slow.closed
    // 200 answers of 2 MiB (400 MiB) were asked for; the connection went past 16 MiB.
    expect(served.rss() - before).toBeLessThan(150 * MIB)
    expect(served.closed[0]?.limit).toBe('connection')
  })
})
