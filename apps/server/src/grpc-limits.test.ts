import { connect } from 'node:net'
import { Server, ServerCredentials } from '@grpc/grpc-js'
import { afterEach, describe, expect, it } from 'vitest'
import { GRPC_LIMITS, grpcServerOptions } from './grpc-limits'

const servers: Server[] = []
afterEach(() => {
  for (const s of servers.splice(0)) s.forceShutdown()
})

async function serve(options: ReturnType<typeof grpcServerOptions>): Promise<number> {
  const server = new Server(options)
  servers.push(server)
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (error, port) =>
      error ? reject(error) : resolve(port),
    ),
  )
}

/**
 * How long the server keeps a connection that opened HTTP/2 (preface and SETTINGS) and then
 * fell silent — it reads but answers nothing, pings included, as a client whose machine died
 * behind a half-open connection — up to `limitMs` (then `limitMs`: still open).
 */
function silentConnectionLifetime(port: number, limitMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const socket = connect({ host: '127.0.0.1', port }, () => {
      // The client connection preface, then an empty SETTINGS frame (type 4, stream 0).
      socket.write(
        Buffer.concat([
          Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'),
          Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
        ]),
      )
    })
    socket.resume()
    socket.once('error', reject)
    const timer = setTimeout(() => {
      socket.destroy()
      resolve(limitMs)
    }, limitMs)
    socket.once('close', () => {
      clearTimeout(timer)
      resolve(Date.now() - started)
    })
  })
}

describe('gRPC connection limits', () => {
  it('sets the message, call and keepalive bounds', () => {
    expect(grpcServerOptions()).toEqual({
      'grpc.max_receive_message_length': 64 * 1024 * 1024,
      'grpc.max_send_message_length': 64 * 1024 * 1024,
      'grpc.max_concurrent_streams': 1_000,
      'grpc.keepalive_time_ms': 60_000,
      'grpc.keepalive_timeout_ms': 20_000,
    })
  })

  it('closes a connection that stops answering pings; without keepalive it stays open', async () => {
    const quick = await serve(
      grpcServerOptions({ ...GRPC_LIMITS, keepaliveMs: 200, keepaliveTimeoutMs: 300 }),
    )
    expect(await silentConnectionLifetime(quick, 5_000)).toBeLessThan(3_000)
    // grpc-js's default (no keepalive): the dead connection stays for good.
    const { 'grpc.keepalive_time_ms': _, 'grpc.keepalive_timeout_ms': __, ...none } = grpcServerOptions()
    const plain = await serve(none)
    expect(await silentConnectionLifetime(plain, 1_500)).toBe(1_500)
  })
})
