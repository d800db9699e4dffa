import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { ConsoleRoutes } from '../console/console-routes'
import type { Logger } from '../log'
import type { NodeMetrics } from '../metrics/node-metrics'
import { type NodeView, readiness } from '../node-view'

/** Concurrent HTTP connections at most (scrapers and probes are few). */
const CONNECTIONS_MAX = 64
const REQUEST_TIMEOUT_MS = 10_000

/** The node's operations HTTP server (see startHttpServer). */
export interface HttpServer {
  readonly port: number
  close(): Promise<void>
}

/**
 * Serves, on `listen` (`host:port`):
 * - `GET /metrics`: Prometheus text exposition of the node's metrics;
 * - `GET /healthz`: 200 while the process is alive and has not stopped after a fatal error (liveness);
 * - `GET /readyz`: 200 when the node is ready (see `readiness`), else 503 with the reasons (readiness).
 * - with `console`: the web console (`/`, `/console/...`) and its JSON API (`/api/...`).
 * Other paths answer 404, other methods 405. Rejects naming the address when it cannot listen.
 */
export async function startHttpServer(options: {
  readonly listen: string
  readonly metrics: NodeMetrics
  readonly view: NodeView
  readonly log: Logger
  readonly console?: ConsoleRoutes
}): Promise<HttpServer> {
  const { metrics, view, log } = options
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/'
    if (options.console?.handle(req, res, path)) return
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'only GET\n')
    switch (path) {
      case '/metrics':
        metrics.render(view).then(
          (text) => send(res, 200, text, metrics.contentType),
          (error: unknown) => {
            log.error({ err: error }, 'metrics scrape failed')
            send(res, 500, `metrics failed: ${(error as Error).message}\n`)
          },
        )
        return
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
  })
  server.maxConnections = CONNECTIONS_MAX
  server.requestTimeout = REQUEST_TIMEOUT_MS
  const colon = options.listen.lastIndexOf(':')
  const host = options.listen.slice(0, colon).replace(/^\[(.*)\]$/, '$1')
  const port = Number(options.listen.slice(colon + 1))
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(new Error(`cannot listen on ${options.listen} (http): ${error.message}`, { cause: error })),
    )
    server.listen(port, host, () => resolve())
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

function send(
  res: ServerResponse,
  code: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(code, { 'content-type': contentType, 'cache-control': 'no-store' })
  res.end(body)
}
