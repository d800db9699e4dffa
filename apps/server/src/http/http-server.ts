import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { isIP, type Socket } from 'node:net'
import { AddressSlots } from '../address-slots'
import type { ConsoleRoutes } from '../console/console-routes'
import { REFUSALS_REPORT_MS, throttledCount } from '../grpc-listener'
import type { Logger } from '../log'
import type { NodeMetrics } from '../metrics/node-metrics'
import { type NodeView, readiness } from '../node-view'
import { hostAllowed, isLoopback } from './loopback-host'

/**
 * The HTTP port's bounds. The port is often reachable more widely than the gRPC port (by
 * scrapers, probes, browsers), so no client may hold it: connections are capped in all and per
 * remote address (one host opening sockets that send nothing cannot take every slot and fail
 * the node's liveness probes), a request's headers must arrive within `headersTimeoutMs` and
 * the whole request within `requestTimeoutMs` (checked every `checkEveryMs`), a socket
 * that moves no bytes for `idleTimeoutMs` (a reader that stopped reading a big answer) is
 * closed, and at most `scrapesMax` scrapes of `/metrics` are rendered at once (429 beyond).
 */
export interface HttpLimits {
  readonly connectionsMax: number
  readonly connectionsPerAddressMax: number
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly checkEveryMs: number
  readonly idleTimeoutMs: number
  readonly scrapesMax: number
}

export const HTTP_LIMITS: HttpLimits = {
  connectionsMax: 64,
  connectionsPerAddressMax: 16,
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 10_000,
  checkEveryMs: 1_000,
  idleTimeoutMs: 30_000,
  scrapesMax: 8,
}

/**
 * The certificate the HTTP port presents with TLS (`--http-tls`): the node's own, as last
 * loaded, and told again on each reload (SIGHUP), so new connections get a rotated one.
 */
export interface HttpTls {
  identity(): { readonly cert: Buffer; readonly key: Buffer }
  onReload(listener: (identity: { readonly cert: Buffer; readonly key: Buffer }) => void): void
}

/** The node's operations HTTP server (see startHttpServer). */
export interface HttpServer {
  readonly port: number
  close(): Promise<void>
}

/**
 * Serves, on `listen` (`host:port`):
 * - `GET /metrics`: Prometheus text exposition of the node's metrics (with `metricsReader`, of
 *   what the caller's token may read; 401 without a token it knows);
 * - `GET /healthz`: 200 while the process is alive and has not stopped after a fatal error (liveness);
 * - `GET /readyz`: 200 when the node is ready (see `readiness`), else 503 with the reasons (readiness).
 * - with `console`: the web console (`/`, `/console/...`) and its JSON API (`/api/...`).
 * Other paths answer 404, other methods 405. When `listen` is a loopback address (or
 * `localhost`), or `allowedHosts` names hosts (`--http-allowed-hosts`), a request whose Host
 * header names anything but localhost, a loopback address or one of `allowedHosts` is
 * answered 403 on every path (DNS rebinding: see hostAllowed); on other addresses without
 * `allowedHosts` any Host is answered. Rejects naming the address when it cannot listen.
 */
export async function startHttpServer(options: {
  readonly listen: string
  readonly metrics: NodeMetrics
  readonly view: NodeView
  readonly log: Logger
  readonly console?: ConsoleRoutes
  readonly limits?: HttpLimits
  /** Host names answered besides loopback ones (parseAllowedHosts); [] = the listen address decides. */
  readonly allowedHosts?: readonly string[]
  /** Serve HTTPS with this certificate (`--http-tls`); plain HTTP without. */
  readonly tls?: HttpTls
  /** Who may read `/metrics`, and which queues' series (metricsReader); everyone everything without. */
  readonly metricsReader?: (authorization: string | undefined) => ((queue: string) => boolean) | undefined
}): Promise<HttpServer> {
  const { metrics, view, log } = options
  const limits = options.limits ?? HTTP_LIMITS
  const serverOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: limits.checkEveryMs,
    keepAliveTimeout: Math.min(5_000, limits.headersTimeoutMs),
  }
  const colon = options.listen.lastIndexOf(':')
  const host = options.listen.slice(0, colon).replace(/^\[(.*)\]$/, '$1')
  const port = Number(options.listen.slice(colon + 1))
  const allowedHosts = options.allowedHosts ?? []
  let checkHost = isLoopback(host) || allowedHosts.length > 0
  /** The names answered besides loopback ones: allowedHosts, or the listen name (see below). */
  let hostNames: readonly string[] = allowedHosts
  /** Scrapes of /metrics being rendered (at most limits.scrapesMax). */
  let scrapes = 0
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    if (checkHost && !hostAllowed(req.headers.host, hostNames)) {
      const names = [
        'localhost',
        '127.0.0.1',
        '[::1]',
        ...hostNames.map((n) => (n.includes(':') ? `[${n}]` : n)),
      ]
      return send(
        res,
        403,
        `the Host header named a host this port does not answer for: open it as ${names.join(', ')}${allowedHosts.length === 0 ? ` (it listens on loopback, ${options.listen}; --http-allowed-hosts adds names)` : ' (--http-allowed-hosts)'}\n`,
      )
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/'
    if (options.console?.handle(req, res, path)) return
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD')
      return send(res, 405, 'only GET\n')
    }
    switch (path) {
      case '/metrics': {
        let sees: ((queue: string) => boolean) | undefined
        try {
          sees = options.metricsReader?.(req.headers.authorization)
        } catch (error) {
          res.setHeader('www-authenticate', 'Bearer realm="mq"')
          return send(res, 401, `${(error as Error).message}\n`)
        }
        // Each scrape renders its own text (some 11 MB on a node leading 1,000 partitions), and
        // one connection may pipeline hundreds of requests in a write, each handled at once: they
        // rendered that many copies together. A scraper refused asks again at its next interval.
        if (scrapes >= limits.scrapesMax) {
          return send(res, 429, `${scrapes} scrapes of /metrics are being answered: try again in a moment\n`)
        }
        scrapes++
        metrics
          .render(view, sees)
          .then(
            (text) => send(res, 200, text, metrics.contentType),
            (error: unknown) => {
              log.error({ err: error }, 'metrics scrape failed')
              send(res, 500, `metrics failed: ${(error as Error).message}\n`)
            },
          )
          .finally(() => {
            scrapes--
          })
        return
      }
      case '/healthz':
        return view.failed() ? send(res, 503, 'failed\n') : send(res, 200, 'ok\n')
      case '/readyz': {
        const r = readiness(view)
        return r.ready ? send(res, 200, 'ready\n') : send(res, 503, `not ready:\n${r.reasons.join('\n')}\n`)
      }
      default:
        return send(
          res,
          404,
          `not found: try /metrics, /healthz or /readyz${options.console ? ' or /console/' : ''}\n`,
        )
    }
  }
  const tls = options.tls
  let server: Server
  if (tls) {
    // A handshake gets the headers' time (Node's default, 120 s, held a silent socket that long).
    const secure = createHttpsServer(
      { ...serverOptions, handshakeTimeout: limits.headersTimeoutMs, ...tls.identity() },
      handle,
    )
    tls.onReload((identity) => secure.setSecureContext({ ...identity }))
    // A handshake that fails (a plaintext request, an unknown CA) is the client's business.
    secure.on('tlsClientError', () => {})
    server = secure as unknown as Server
  } else server = createServer(serverOptions, handle)
  server.maxConnections = limits.connectionsMax
  // No 'timeout' listener: a socket idle this long is destroyed.
  server.setTimeout(limits.idleTimeoutMs)
  capPerAddress(server, limits.connectionsPerAddressMax)
  await new Promise<void>((resolve, reject) => {
    const failed = (error: Error) =>
      reject(new Error(`cannot listen on ${options.listen} (http): ${error.message}`, { cause: error }))
    server.once('error', failed)
    server.listen(port, host, () => {
      server.off('error', failed)
      // After the bind, a failed accept (EMFILE, ENOBUFS, a network error Linux passes on) is an
      // 'error' of the server: that connection is lost, the port carries on (the listen's once
      // listener took the first, the next took the process down). Logged at most every
      // REFUSALS_REPORT_MS, as the gRPC port's.
      const report = throttledCount(REFUSALS_REPORT_MS, (count, last) =>
        log.warn(`http ${options.listen}: ${count} connection(s) not accepted, the last: ${last}`),
      )
      server.on('error', (error) => report(error.message))
      // A listen name the resolver maps to loopback (the machine's own name in /etc/hosts, which
      // Debian maps to 127.0.1.1; localhost.localdomain) binds loopback too: checked as such, its
      // own name answered besides the loopback ones (the console URL the node prints names it).
      const bound = server.address()
      if (!checkHost && typeof bound === 'object' && bound && isLoopback(bound.address)) {
        checkHost = true
        if (isIP(host) === 0) hostNames = [host.toLowerCase()]
      }
      resolve()
    })
  })
  const address = server.address()
  return {
    port: typeof address === 'object' && address ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** Closes a new connection at once when its remote address holds `max` already. */
function capPerAddress(server: Server, max: number): void {
  const slots = new AddressSlots(max)
  server.on('connection', (socket: Socket) => {
    if (!slots.takeSocket(socket)) socket.destroy()
  })
}

function send(
  res: ServerResponse,
  code: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(code, { 'content-type': contentType, 'cache-control': 'no-store' })
  res.end(body)
}
