import { type ChildProcess, spawn } from 'node:child_process'
import { resolve } from 'node:path'
import { META_LIMITS } from '@mq/meta-service'
import { SERVER_NODE_FLAGS } from '@mq/protocol'
import { EXIT_WITH_PARENT_ENV } from './parent-watch'
import { PrefixedLines } from './prefixed-lines'

export interface DevClusterOptions {
  readonly nodes: number
  readonly dataDir: string
  readonly host: string
  readonly basePort: number
  /** HTTP port (/metrics, /healthz, /readyz) of the first node, the others following; 0 = none. */
  readonly httpBasePort: number
  /** The command that runs `mq-server`: node's flags and the entry script (this process's own). */
  readonly serverCommand: readonly string[]
  readonly out: (line: string) => void
  /** The Node.js binary that runs the nodes (default: this process's, `process.execPath`). */
  readonly execPath?: string
}

/** The highest TCP port. */
const PORT_MAX = 65_535

/**
 * Why the dev cluster's ports do not fit (its gRPC ports `basePort`.., its HTTP ports
 * `httpBasePort`.. unless 0, one per node), or undefined when they do: a base port near the
 * top started children that failed one by one, and overlapping ranges a node whose HTTP port
 * another's gRPC port had taken.
 */
export function devPortsProblem(
  options: Pick<DevClusterOptions, 'nodes' | 'basePort' | 'httpBasePort'>,
): string | undefined {
  const last = (base: number) => base + options.nodes - 1
  if (options.basePort < 1 || last(options.basePort) > PORT_MAX)
    return `--base-port ${options.basePort} with ${options.nodes} nodes needs ports ${options.basePort}-${last(options.basePort)}; ports go from 1 to ${PORT_MAX}`
  if (options.httpBasePort > 0 && last(options.httpBasePort) > PORT_MAX)
    return `the HTTP ports from ${options.httpBasePort} for ${options.nodes} nodes go past ${PORT_MAX}: give a lower --http-base-port, or 0 for none`
  const { basePort, httpBasePort } = options
  if (httpBasePort > 0 && httpBasePort <= last(basePort) && basePort <= last(httpBasePort))
    return `the gRPC ports ${basePort}-${last(basePort)} and the HTTP ports ${httpBasePort}-${last(httpBasePort)} overlap: give --base-port and --http-base-port at least ${options.nodes} apart, or --http-base-port 0 for none`
  return undefined
}

/**
 * The command line (node's flags, the entry script, `start` and its flags) of the dev
 * cluster's member `index`. With an HTTP port the console may show message bodies
 * (`--console-peek`): the dev cluster has no auth and listens on `host` (loopback) only.
 */
export function devNodeArgs(
  options: Pick<DevClusterOptions, 'dataDir' | 'host' | 'httpBasePort' | 'serverCommand'>,
  members: readonly { readonly nodeId: string; readonly address: string }[],
  index: number,
): string[] {
  const m = members[index] as (typeof members)[number]
  return [
    ...SERVER_NODE_FLAGS,
    ...options.serverCommand,
    'start',
    '--node-id',
    m.nodeId,
    '--listen',
    m.address,
    '--data-dir',
    resolve(options.dataDir, m.nodeId),
    // The meta group has at most 7 voters: a larger cluster's other nodes join through the first.
    ...(index < META_LIMITS.replicasPerGroupMax
      ? [
          '--initial-meta',
          members
            .slice(0, META_LIMITS.replicasPerGroupMax)
            .map((x) => `${x.nodeId}=${x.address}`)
            .join(','),
        ]
      : ['--join', (members[0] as (typeof members)[number]).address]),
    '--log-format',
    'pretty',
    ...(options.httpBasePort > 0
      ? ['--http-listen', `${options.host}:${options.httpBasePort + index}`, '--console-peek']
      : []),
  ]
}

/**
 * Runs a local cluster of `nodes` separate `mq-server start` processes on consecutive ports,
 * each with its own data dir under `dataDir`, their output prefixed with the node id. Ends
 * them with SIGTERM when this process gets SIGINT, SIGTERM or SIGHUP (and they stop
 * themselves when it is killed outright), and resolves with the worst exit code once all
 * have exited.
 */
export async function runDevCluster(options: DevClusterOptions): Promise<number> {
  const members = Array.from({ length: options.nodes }, (_, i) => ({
    nodeId: `n${i + 1}`,
    address: `${options.host}:${options.basePort + i}`,
  }))
  const children: ChildProcess[] = members.map((m, i) => {
    // An IPC channel the node watches: this process killed outright (SIGKILL, no handler
    // runs) closes it, and the node stops itself instead of running on unsupervised.
    const execPath = options.execPath ?? process.execPath
    const child = spawn(execPath, devNodeArgs(options, members, i), {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: { ...process.env, [EXIT_WITH_PARENT_ENV]: '1' },
    })
    // Line by line, per stream: a line (or a character) split across two chunks came out as
    // two prefixed pieces, garbled (until 2026-12-07).
    for (const stream of [child.stdout, child.stderr]) {
      const lines = new PrefixedLines((line) => options.out(`[${m.nodeId}] ${line}`))
      stream?.on('data', (chunk: Buffer) => lines.write(chunk))
      stream?.on('end', () => lines.end())
    }
    // Without a listener a failed spawn (no such binary, no processes left: EAGAIN) would
    // throw from the event loop and take this process down with a stack trace.
    child.on('error', (e) =>
      options.out(
        `[${m.nodeId}] ${child.pid === undefined ? `could not start ${execPath}` : 'error'}: ${e.message}`,
      ),
    )
    return child
  })
  options.out(
    `mq dev cluster: ${options.nodes} nodes (${members.map((m, i) => `${m.nodeId} ${m.address} ${children[i]?.pid === undefined ? 'not started' : `pid ${children[i]?.pid}`}`).join(', ')}), data in ${resolve(options.dataDir)}`,
  )
  options.out(
    `  create:   mq --servers ${members[0]?.address} queue create jobs --partitions ${options.nodes}`,
  )
  options.out(`  produce:  mq --servers ${members[0]?.address} produce jobs "hello"`)
  options.out(`  consume:  mq --servers ${members[0]?.address} consume jobs`)
  if (options.httpBasePort > 0) {
    options.out(
      `  metrics:  curl http://${options.host}:${options.httpBasePort}/metrics   (/healthz, /readyz)`,
    )
    options.out(
      `  console:  http://${options.host}:${options.httpBasePort}/console/   (read-only without --auth-file; shows message bodies: --console-peek)`,
    )
  }
  options.out('  stop:     Ctrl-C')
  let stopping = false
  const stop = () => {
    stopping = true
    // Never kill() a child that did not start: with no pid, Node 20 signals pid 0 — this
    // whole process group, dev itself and whatever ran it (measured: a test runner killed).
    for (const c of children)
      if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) c.kill('SIGTERM')
  }
  // SIGHUP too (the terminal closed): the nodes take it for "reload the token and TLS files",
  // and would be left running without their parent.
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
  for (const s of signals) process.on(s, stop)
  const codes = await Promise.all(
    children.map(
      (c) =>
        new Promise<number>((done) => {
          c.once('exit', (code, signal) => {
            // Ended by the stop signal before its handlers were set (still loading): stopped as asked.
            const asked = stopping && (signal === 'SIGTERM' || signal === 'SIGINT')
            const exitCode = code ?? (signal && !asked ? 1 : 0)
            // One node failing brings the dev cluster down rather than leaving it half up.
            if (exitCode !== 0) stop()
            done(exitCode)
          })
          // A node that never started has no exit to wait for.
          if (c.pid === undefined) {
            stop()
            done(1)
          }
        }),
    ),
  )
  for (const s of signals) process.off(s, stop)
  return Math.max(0, ...codes)
}
