import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { FORMAT_LEVEL } from '@mq/protocol'
import { Command, CommanderError, InvalidArgumentError } from 'commander'
import { loadTokenFile } from './auth/token-file'
import { ConfigError, loadConfig, weakSecretWarning } from './config'
import { type ConsoleRoutes, consoleRoutes } from './console/console-routes'
import { makeDevCerts } from './dev-certs'
import { devPortsProblem, runDevCluster } from './dev-cluster'
import { HTTP_LIMITS, type HttpServer, startHttpServer } from './http/http-server'
import { metricsReader } from './http/metrics-scope'
import { createLogger, type Logger } from './log'
import { MqNode } from './node'
import { watchParent } from './parent-watch'

export interface ProgramIo {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
  /** Sets the process exit code. */
  readonly exit: (code: number) => void
}

/** This build's version (package.json) and the format level it writes up to (FORMAT_LEVEL). */
const SERVER_VERSION = `${(createRequire(import.meta.url)('../package.json') as { version: string }).version} (format level ${FORMAT_LEVEL})`

const defaultIo: ProgramIo = {
  out: (l) => console.log(l),
  err: (l) => console.error(l),
  exit: (code) => {
    process.exitCode = code
  },
}

/**
 * Runs `mq-server` with `argv` (node's, from: 'node'). A command line the parser refuses (an
 * unknown flag, a bad value) exits 2, as a refused configuration does: it exited 1, the code
 * of a node that failed while running. Help and the version exit 0.
 */
export async function runProgram(argv: readonly string[], io: ProgramIo = defaultIo): Promise<void> {
  try {
    await createProgram(io).parseAsync([...argv])
  } catch (error) {
    if (!(error instanceof CommanderError)) throw error
    // Commander has written its message.
    io.exit(error.exitCode === 0 ? 0 : 2)
  }
}

/**
 * Builds the `mq-server` command line. `io` receives what the commands print. A command line
 * the parser refuses throws its CommanderError (runProgram sets the exit code).
 */
export function createProgram(io: ProgramIo = defaultIo): Command {
  const program = new Command('mq-server')
    .exitOverride()
    .description('mq server: a multi-Raft host of meta and data groups')
    .version(SERVER_VERSION, '-V, --version', 'print the version of mq-server and its format level')
  program
    .command('start')
    .description('run one node')
    .option('--config <file>', 'JSON config file (keys as the flags in camelCase); flags override it')
    .option('--node-id <id>', 'stable id of this node, unique in the cluster')
    .option('--listen <host:port>', 'address to bind for clients and peers')
    .option('--advertise <host:port>', 'address others reach this node at (default: --listen)')
    .option('--data-dir <dir>', 'where this node keeps its data')
    .option(
      '--initial-meta <members>',
      'bootstrap a cluster: id=host:port,… of the meta group (kept in the data dir: a restart needs it no more)',
    )
    .option(
      '--join <host:port>',
      'join a running cluster through any of its nodes (kept in the data dir: a restart needs it no more)',
    )
    .option('--tick-ms <ms>', 'Raft tick length')
    .option(
      '--peer-token <secret>',
      'shared secret peers must present, 16+ characters (else a warning; required with --auth-file); better in MQ_PEER_TOKEN: a flag shows in ps',
    )
    .option('--http-listen <host:port>', 'serve /metrics, /healthz and /readyz over HTTP here (default: off)')
    .option(
      '--http-allowed-hosts <names>',
      'host names the HTTP port answers for besides localhost (comma-separated; * = any); given, other Host headers get 403 on any listen address',
    )
    .option(
      '--http-tls',
      'serve the HTTP port over TLS (HTTPS) with the node certificate (--tls-cert, --tls-key)',
    )
    .option('--no-console', 'do not serve the web console (/console/) and its API (/api/) on the HTTP port')
    .option(
      '--console-peek',
      'without --auth-file, let the console show message bodies to anyone who reaches the HTTP port',
    )
    .option(
      '--metrics-open',
      'with --auth-file, serve /metrics without a token (by default it asks one: admin reads all, other tokens their queues)',
    )
    .option('--log-level <level>', 'fatal, error, warn, info (default), debug or trace')
    .option('--log-format <format>', 'json (default) or pretty')
    .option('--auth-file <file>', 'client tokens and their roles (JSON); without it clients need no token')
    .option('--tls-cert <file>', "this node's certificate (PEM); turns TLS on for clients and peers")
    .option('--tls-key <file>', "this node's private key (PEM)")
    .option('--tls-ca <file>', 'the CA that signs the cluster certificates (PEM)')
    .option('--tls-client-auth', 'mutual TLS: callers must present a certificate signed by --tls-ca')
    .option(
      '--tls-peer-ids',
      "peers' certificates must name the node they speak for (CN = node id); needs --tls-client-auth",
    )
    .option(
      '--snapshot-entries <n>',
      'data groups snapshot and compact their log every n entries (default 50000)',
    )
    .option(
      '--log-memory-mb <n>',
      "MiB of applied Raft log data this node's data groups keep in memory together; past it the largest compacts (default 128; each group may keep up to 12.8 MiB)",
    )
    .option(
      '--replace-dead-after-ms <ms>',
      'a node not heard from for this long has its replicas replaced on other nodes (default 300000)',
    )
    .option(
      '--replica-stall-ms <ms>',
      'a replica being added on a live node that makes no progress for this long goes to another node (default 600000)',
    )
    .option(
      '--http-connections-per-address-max <n>',
      'HTTP connections open at once from one remote address (a reverse proxy needs more; default 16, at most 64)',
    )
    .option(
      '--connections-max <n>',
      'gRPC connections (clients and peers) open at once; one more is closed as accepted (default 4096)',
    )
    .option(
      '--connections-per-address-max <n>',
      'gRPC connections open at once from one remote address (clients behind one NAT share theirs); one more is closed as accepted (default 1024, at most --connections-max count)',
    )
    .option(
      '--connection-unsent-max-mb <n>',
      'MiB of answers one connection may leave unread before it is closed as a slow reader (default 256)',
    )
    .option(
      '--unsent-max-mb <n>',
      'MiB of unread answers of all connections together; past it the largest holders are closed (default 1024)',
    )
    .option(
      '--format-level <n>',
      `replicated entry formats to allow, 1-${FORMAT_LEVEL} (default ${FORMAT_LEVEL}); a lower level pins the cluster's formats during an upgrade, so a rollback stays possible`,
    )
    .addHelpText(
      'after',
      '\nExample:\n  mq-server start --node-id n1 --listen 127.0.0.1:7001 --data-dir data/n1 \\\n    --initial-meta n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003\n  mq-server start --node-id n1 --listen 127.0.0.1:7001 --data-dir data/n1   # a restart',
    )
    .action(async (flags: Record<string, string | boolean | undefined>) => {
      let node: MqNode
      let log: Logger | undefined
      let http: HttpServer | undefined
      let webConsole: ConsoleRoutes | undefined
      // A node that stops serving for good once it serves (damaged data found, or removed from
      // the cluster) exits 1; during start, start() itself fails.
      let serving = false
      let failed = false
      const stopFailed = () => {
        void Promise.all([node.stop(0, 0), http?.close(), webConsole?.close()]).then(() => io.exit(1))
      }
      // A dev node whose `mq-server dev` is gone (killed outright, say) stops as on SIGTERM,
      // once it serves: nobody would stop it otherwise. Its output has nowhere to go by then.
      let parentGone = false
      let shutdown: (() => void) | undefined
      watchParent(() => {
        parentGone = true
        shutdown?.()
      })
      // SIGTERM and SIGINT are handled from the first moment: one that comes while the node
      // starts (reading its files, opening its database and replicas, binding) is kept, and the
      // node stops in order once it serves (a start that fails exits as such). Node's default
      // action ended the process there and then, its start half done.
      let stopAsked = false
      const onStopSignal = () => {
        stopAsked = true
        shutdown?.()
      }
      process.on('SIGTERM', onStopSignal)
      process.on('SIGINT', onStopSignal)
      // SIGHUP likewise: one during the start is answered with a reload once the node serves.
      let reload: (() => void) | undefined
      let reloadAsked = false
      const onReloadSignal = () => {
        reloadAsked = true
        reload?.()
      }
      process.on('SIGHUP', onReloadSignal)
      try {
        // Commander sets `console: true` unless --no-console is given: only `false` is a choice
        // (so that a config file's `"console": false` holds).
        const { console: consoleFlag, ...rest } = flags
        const config = loadConfig(consoleFlag === false ? { ...rest, console: false } : rest)
        log = createLogger({ nodeId: config.nodeId, level: config.logLevel, format: config.logFormat })
        const weak = weakSecretWarning(config)
        if (weak) log.warn(weak)
        if (
          config.tlsClientAuth &&
          config.httpListen &&
          config.console &&
          !(config.httpTls && config.authFile)
        ) {
          log.warn(
            config.httpTls
              ? `the HTTP port (${config.httpListen}) asks no client certificate, and its console calls the cluster with this node's client certificate for whoever reaches it: without --auth-file it shows the cluster and its queues to callers the gRPC port refuses; give --auth-file, keep the port on loopback, or give --no-console (README "TLS")`
              : `the HTTP port (${config.httpListen}) has no TLS, and its console calls the cluster with this node's client certificate for whoever reaches it: ${config.authFile ? 'tokens typed into the console cross it in plaintext' : 'without --auth-file it shows the cluster and its queues to callers the gRPC port refuses'}; give --http-tls, keep it on loopback behind a TLS proxy, or give --no-console (README "TLS")`,
          )
        }
        const tokens = config.authFile ? loadTokenFile(config.authFile) : undefined
        node = new MqNode(config, {
          log,
          ...(tokens ? { tokens } : {}),
          onFailStop: () => {
            if (failed) return
            failed = true
            if (serving) stopFailed()
          },
        })
        // HTTP first: a taken HTTP port fails the start before the node binds or opens anything
        // (until the node serves, /readyz answers 503 and /healthz 200).
        if (config.httpListen) {
          if (config.console) {
            webConsole = consoleRoutes({
              nodeId: config.nodeId,
              advertise: config.advertise,
              access: node.access,
              credentials: node.clientCredentials(),
              log,
              peekWithoutAuth: config.consolePeek,
            })
          }
          const tls = config.httpTls ? node.httpTls() : undefined
          http = await startHttpServer({
            listen: config.httpListen,
            limits: { ...HTTP_LIMITS, connectionsPerAddressMax: config.httpConnectionsPerAddressMax },
            allowedHosts: config.httpAllowedHosts,
            ...(tls ? { tls } : {}),
            metrics: node.metrics,
            metricsReader: metricsReader(node.access, config.metricsOpen),
            view: node.view(),
            log,
            ...(webConsole ? { console: webConsole } : {}),
          })
        }
        await node.start()
      } catch (error) {
        process.off('SIGTERM', onStopSignal)
        process.off('SIGINT', onStopSignal)
        process.off('SIGHUP', onReloadSignal)
        await http?.close()
        // One plain line on stderr in any case (the structured log, with its stack, goes to
        // stdout, where a person starting the server by hand may not look for a failure).
        if (log && !(error instanceof ConfigError))
          log.fatal({ err: error }, `mq-server: ${(error as Error).message}`)
        io.err(`mq-server: ${(error as Error).message}`)
        io.exit(error instanceof ConfigError ? 2 : 1)
        return
      }
      const c = node.config
      log.info(
        {
          listen: c.listen,
          dataDir: c.dataDir,
          http: c.httpListen || 'off',
          console:
            c.httpListen && c.console ? `${c.httpTls ? 'https' : 'http'}://${c.httpListen}/console/` : 'off',
          tls: c.tlsCert ? (c.tlsClientAuth ? 'mutual' : 'on') : 'off',
          auth: c.authFile ? 'tokens' : 'off',
        },
        `mq-server: node ${c.nodeId} listening on ${c.listen}, data in ${c.dataDir}`,
      )
      serving = true
      if (failed) stopFailed()
      // Once: a second signal while stopping (a dev node gets SIGINT from the terminal and
      // SIGTERM from `mq-server dev`) does not stop the node a second time meanwhile.
      let stopping = false
      shutdown = () => {
        if (stopping) return
        stopping = true
        log.info(
          `mq-server: node ${c.nodeId} stopping${parentGone ? ' (the process that started it is gone)' : ''}`,
        )
        void Promise.all([node.stop(), http?.close(), webConsole?.close()]).then(
          // A node that stopped serving for good meanwhile (removed from the cluster, damaged
          // data: stopFailed) exits 1, whichever of the two stops ends last.
          () => io.exit(failed ? 1 : 0),
          (error: unknown) => {
            log.error({ err: error }, `mq-server: node ${c.nodeId} failed to stop cleanly`)
            io.exit(1)
          },
        )
      }
      // SIGHUP: the token file and the TLS files are read again (rotation without a restart).
      reload = () => {
        try {
          const r = node.reload()
          log.info(
            r,
            `mq-server: reloaded ${r.tokens === undefined ? 'no token file' : `${r.tokens} file tokens`}, ${r.tls ? 'the TLS files' : 'no TLS files'}`,
          )
        } catch (error) {
          log.error({ err: error }, `mq-server: reload refused, nothing changed: ${(error as Error).message}`)
        }
      }
      if (parentGone || stopAsked) shutdown()
      else if (reloadAsked) reload()
    })
  program
    .command('dev')
    .description('run a local cluster of separate processes')
    .option('--nodes <n>', `number of nodes (1-${DEV_NODES_MAX})`, parseDevNodes, 3)
    .option('--data-dir <dir>', 'data directory', '.mq-data')
    .option('--base-port <port>', 'port of the first node; the others follow', parsePositiveInt, 7001)
    .option(
      '--http-base-port <port>',
      'HTTP port (/metrics, /healthz, /readyz) of the first node; the others follow; 0 = off (default: base port + 1000)',
      parsePort,
    )
    .action(async (opts: { nodes: number; dataDir: string; basePort: number; httpBasePort?: number }) => {
      const httpBasePort = opts.httpBasePort ?? opts.basePort + 1000
      const problem = devPortsProblem({ nodes: opts.nodes, basePort: opts.basePort, httpBasePort })
      if (problem) {
        io.err(`mq-server: ${problem}`)
        io.exit(2)
        return
      }
      const code = await runDevCluster({
        nodes: opts.nodes,
        dataDir: opts.dataDir,
        host: '127.0.0.1',
        basePort: opts.basePort,
        httpBasePort,
        // Children start the way this process did (built, or from source under tsx).
        serverCommand: [
          ...process.execArgv,
          process.argv[1] ?? fileURLToPath(new URL('./main.js', import.meta.url)),
        ],
        out: io.out,
      })
      io.exit(code)
    })
  program
    .command('dev-certs')
    .description(
      'make a development CA and node and client certificates (with openssl) for a local TLS cluster',
    )
    .argument('<dir>', 'where to write ca.crt, ca.key, node.crt, node.key, client.crt, client.key')
    .option(
      '--hosts <names>',
      'more host names or IPs the node certificate is valid for (comma-separated)',
      '',
    )
    .option(
      '--node-ids <ids>',
      'also one certificate per node naming it, node-ID.crt/.key, for --tls-peer-ids (comma-separated)',
      '',
    )
    .option('--days <n>', 'validity in days', parsePositiveInt, 365)
    .option('--force', 'replace files already in <dir>', false)
    .action((dir: string, opts: { hosts: string; nodeIds: string; days: number; force: boolean }) => {
      try {
        const files = makeDevCerts({
          dir,
          hosts: opts.hosts.split(',').filter((h) => h.length > 0),
          nodeIds: opts.nodeIds.split(',').filter((h) => h.length > 0),
          days: opts.days,
          force: opts.force,
        })
        io.out(`mq-server: wrote a dev CA and certificates to ${dir}:`)
        io.out(
          `  mq-server start … --tls-cert ${files.nodeCert} --tls-key ${files.nodeKey} --tls-ca ${files.caCert} [--tls-client-auth]`,
        )
        for (const [id, own] of Object.entries(files.nodes)) {
          io.out(
            `  mq-server start --node-id ${id} … --tls-cert ${own.cert} --tls-key ${own.key} --tls-ca ${files.caCert} --tls-client-auth --tls-peer-ids`,
          )
        }
        io.out(
          `  mq --tls-ca ${files.caCert} [--tls-cert ${files.clientCert} --tls-key ${files.clientKey}] …`,
        )
      } catch (error) {
        io.err(`mq-server: dev-certs: ${(error as Error).message}`)
        io.exit(error instanceof ConfigError ? 2 : 1)
      }
    })
  return program
}

function parsePort(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError(`expected a port (0-65535), got ${value}`)
  return n
}

/**
 * The dev cluster's size: each node is a process of a few hundred MB on this one machine, so
 * a mistyped `--nodes 1000` would start a thousand of them (until 2026-12-07 nothing bounded it).
 */
const DEV_NODES_MAX = 16

function parseDevNodes(value: string): number {
  const n = parsePositiveInt(value)
  if (n > DEV_NODES_MAX)
    throw new InvalidArgumentError(`a dev cluster has at most ${DEV_NODES_MAX} nodes, got ${value}`)
  return n
}

function parsePositiveInt(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError(`expected a positive integer, got ${value}`)
  return n
}
