import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ChannelCredentials } from '@grpc/grpc-js'
import { consoleAssetsDir } from '@mq/console'
import { MqClient } from '@mq/router-client'
import type { AccessControl } from '../auth/access'
import type { Logger } from '../log'
import { ConsoleApi } from './console-api'
import { ConsoleAssets } from './console-assets'
import { ConsoleClients } from './console-clients'

/** What the HTTP server hands the console: its paths, and a way to let go of its clients. */
export interface ConsoleRoutes {
  /** Answers `path` when it is the console's (`/`, `/console/...`, `/api/...`) and returns true; else false. */
  handle(req: IncomingMessage, res: ServerResponse, path: string): boolean
  close(): Promise<void>
}

/** The bound on one console call to the cluster, with its retries. */
const CALL_DEADLINE_MS = 8_000
const ATTEMPT_MS = 3_000

/**
 * The web console of one node: the built page (from @mq/console) and its JSON API, which
 * calls the cluster through the SDK at this node's own address (`advertise`) with the
 * node's client credentials and the caller's token.
 */
export function consoleRoutes(options: {
  readonly nodeId: string
  readonly advertise: string
  readonly access: AccessControl
  readonly credentials: ChannelCredentials
  readonly log: Logger
  /** The built page's folder (default: @mq/console's). */
  readonly assetsDir?: string
  /** Show message bodies while clients are not authenticated (`--console-peek`). */
  readonly peekWithoutAuth?: boolean
}): ConsoleRoutes {
  const assets = new ConsoleAssets(options.assetsDir ?? consoleAssetsDir())
  if (assets.missing) {
    options.log.warn(
      'the web console was not built (run `pnpm --filter @mq/console build`): /console/ answers 404 until it is; the /api/ routes work',
    )
  }
  const clients = new ConsoleClients((token) =>
    MqClient.connect({
      servers: [options.advertise],
      credentials: options.credentials,
      deadlineMs: CALL_DEADLINE_MS,
      attemptMs: ATTEMPT_MS,
      ...(token ? { token } : {}),
    }),
  )
  const peekWithoutAuth = options.peekWithoutAuth === true && !options.access.clientAuth
  if (peekWithoutAuth) {
    options.log.warn(
      'the web console shows message bodies to anyone who reaches the HTTP port (--console-peek without --auth-file)',
    )
  }
  const api = new ConsoleApi({
    nodeId: options.nodeId,
    access: options.access,
    clients,
    peekWithoutAuth,
    log: options.log,
  })
  return {
    handle: (req, res, path) => {
      if (path.startsWith('/api/')) {
        void api.handle(req, res, path)
        return true
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') return false
      return assets.serve(path, res)
    },
    close: () => clients.close(),
  }
}
