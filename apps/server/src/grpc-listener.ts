import { createServer, type Server as NetServer, type Socket } from 'node:net'
import type { Server, ServerCredentials } from '@grpc/grpc-js'
import { AddressSlots } from './address-slots'

/** The gRPC port's listening socket, bound by the node itself (not grpc-js's bindAsync). */
export interface GrpcListener {
  /** The port bound (the one asked for, or the one the system chose for port 0). */
  readonly port: number
  /** Connections open now. */
  connections(): number
  /** Connections refused since the start: `connectionsMax` were open, or `perAddressMax` from its address. */
  refused(): number
  /** Stops accepting connections; the open ones stay (grpc-js's shutdown ends them). */
  close(): void
  /**
   * Destroys every connection still open, once grpc-js's shutdown is done with them: a session
   * it destroys still ends its socket gracefully, and the socket of a peer that stopped reading
   * (SIGSTOPped, its receive window full) never finished ending, which kept a stopped node's
   * process from exiting.
   */
  destroyAll(): void
}

/** The listener's bounds on open connections. */
export interface ConnectionLimits {
  /** Connections open at once, from anywhere. */
  readonly connectionsMax: number
  /** Connections open at once from one remote address (taken as at most `connectionsMax`). */
  readonly perAddressMax: number
}

/** Refused connections are reported at most this often (the first at once), with their count since. */
export const REFUSALS_REPORT_MS = 10_000

/**
 * Splits `host:port` (IPv6 in brackets) for `net.Server#listen`. The address was checked by
 * the config (`parseAddress`); the port may be 0 here (tests).
 */
export function listenTarget(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':')
  const host = address.slice(0, colon)
  return {
    host: host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host,
    port: Number(address.slice(colon + 1)),
  }
}

/**
 * Listens on `address` and hands each accepted connection to `server` through a grpc-js
 * connection injector (the same HTTP/2 server options, interceptors and credentials — TLS
 * handshakes and certificate reloads included — as `bindAsync`'s). What binding the socket
 * here adds: at most `connectionsMax` connections open at once; one more is closed as soon as
 * it is accepted (`net.Server#maxConnections`) and counted in `refused()` and `onRefused`
 * (at most once per REFUSALS_REPORT_MS, with the count since its last report; a connection
 * the system would not accept, out of file descriptors, is counted and reported the same way),
 * so a client opening connections in a loop cannot take the node's file descriptors and
 * memory (grpc-js has no such bound). Peers count too: size it well above clients + nodes.
 * And at most `perAddressMax` from one remote address: one client looping could otherwise
 * take every slot, and the other clients and the peers were refused with it.
 */
export function listenGrpc(
  server: Server,
  credentials: ServerCredentials,
  address: string,
  limits: ConnectionLimits,
  onRefused: (refused: number, last: string) => void = () => {},
): Promise<GrpcListener> {
  const injector = server.createConnectionInjector(credentials)
  /** The connections accepted and open. */
  const sockets = new Set<Socket>()
  let refused = 0
  const report = throttledCount(REFUSALS_REPORT_MS, onRefused)
  const from = (host: string | undefined, port: number | undefined) =>
    host ? `from ${host}:${port}` : 'from an unknown address'
  const slots = new AddressSlots(limits.perAddressMax)
  const net: NetServer = createServer((socket: Socket) => {
    if (!slots.takeSocket(socket)) {
      refused++
      report(
        `${from(socket.remoteAddress, socket.remotePort)}, which holds ${slots.held(socket.remoteAddress ?? '')} already`,
      )
      socket.destroy()
      return
    }
    sockets.add(socket)
    socket.once('close', () => {
      sockets.delete(socket)
    })
    injector.injectConnection(socket)
  })
  net.maxConnections = limits.connectionsMax
  net.on('drop', (data) => {
    refused++
    report(from(data?.remoteAddress, data?.remotePort))
  })
  const { host, port } = listenTarget(address)
  return new Promise((resolve, reject) => {
    const failed = (error: Error) => {
      injector.destroy()
      reject(new Error(`cannot listen on ${address}: ${error.message}`, { cause: error }))
    }
    net.once('error', failed)
    net.listen({ host, port }, () => {
      net.off('error', failed)
      // After the bind, a failed accept (EMFILE: out of file descriptors, under the process's
      // `ulimit -n`) refuses that connection; the server carries on.
      net.on('error', (error) => {
        refused++
        report(`not accepted: ${error.message}`)
      })
      const bound = net.address()
      resolve({
        port: typeof bound === 'object' && bound ? bound.port : port,
        connections: () => sockets.size,
        refused: () => refused,
        close: () => {
          if (net.listening) net.close()
        },
        destroyAll: () => {
          for (const socket of sockets) socket.destroy()
        },
      })
    })
  })
}

/**
 * Counts events and reports them through `report(count since the last report, the last one's
 * description)`: the first at once, then at most once per `everyMs` (the events between two
 * reports are counted in the next).
 */
export function throttledCount(
  everyMs: number,
  report: (count: number, last: string) => void,
  now: () => number = Date.now,
): (what: string) => void {
  let unreported = 0
  let reportedAtMs = Number.NEGATIVE_INFINITY
  return (what) => {
    unreported++
    const t = now()
    if (t - reportedAtMs < everyMs) return
    reportedAtMs = t
    report(unreported, what)
    unreported = 0
  }
}
