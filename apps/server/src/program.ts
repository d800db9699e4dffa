import { fileURLToPath } from 'node:url'
import { Command, InvalidArgumentError } from 'commander'
import { ConfigError, loadConfig } from './config'
import { runDevCluster } from './dev-cluster'
import { MqNode } from './node'

export interface ProgramIo {
  readonly out: (line: string) => void
  readonly err: (line: string) => void
  /** Sets the process exit code. */
  readonly exit: (code: number) => void
}

const defaultIo: ProgramIo = {
  out: (l) => console.log(l),
  err: (l) => console.error(l),
  exit: (code) => {
    process.exitCode = code
  },
}

/** Builds the `mq-server` command line. `io` receives what the commands print. */
export function createProgram(io: ProgramIo = defaultIo): Command {
  const program = new Command('mq-server').description('mq server: a multi-Raft host of meta and data groups')
  program
    .command('start')
    .description('run one node')
    .option('--config <file>', 'JSON config file (keys as the flags in camelCase); flags override it')
    .option('--node-id <id>', 'stable id of this node, unique in the cluster')
    .option('--listen <host:port>', 'address to bind for clients and peers')
    .option('--advertise <host:port>', 'address others reach this node at (default: --listen)')
    .option('--data-dir <dir>', 'where this node keeps its data')
    .option('--initial-meta <members>', 'bootstrap a cluster: id=host:port,… of the meta group')
    .option('--join <host:port>', 'join a running cluster through any of its nodes')
    .option('--tick-ms <ms>', 'Raft tick length')
    .option('--peer-token <secret>', 'shared secret peers must present')
    .option(
      '--snapshot-entries <n>',
      'data groups snapshot and compact their log every n entries (default 50000)',
    )
    .option(
      '--replace-dead-after-ms <ms>',
      'a node not heard from for this long has its replicas replaced on other nodes (default 300000)',
    )
    .addHelpText(
      'after',
      '\nExample:\n  mq-server start --node-id n1 --listen 127.0.0.1:7001 --data-dir data/n1 \\\n    --initial-meta n1=127.0.0.1:7001,n2=127.0.0.1:7002,n3=127.0.0.1:7003',
    )
    .action(async (flags: Record<string, string | undefined>) => {
      let node: MqNode
      try {
        node = new MqNode(loadConfig(flags))
        await node.start()
      } catch (error) {
        io.err(`mq-server: ${(error as Error).message}`)
        io.exit(error instanceof ConfigError ? 2 : 1)
        return
      }
      io.out(
        `mq-server: node ${node.config.nodeId} listening on ${node.config.listen}, data in ${node.config.dataDir}`,
      )
      const shutdown = () => {
        io.out(`mq-server: node ${node.config.nodeId} stopping`)
        void node.stop().then(() => io.exit(0))
      }
      process.once('SIGTERM', shutdown)
      process.once('SIGINT', shutdown)
    })
  program
    .command('dev')
    .description('run a local cluster of separate processes')
    .option('--nodes <n>', 'number of nodes', parsePositiveInt, 3)
    .option('--data-dir <dir>', 'data directory', '.mq-data')
    .option('--base-port <port>', 'port of the first node; the others follow', parsePositiveInt, 7001)
    .action(async (opts: { nodes: number; dataDir: string; basePort: number }) => {
      const code = await runDevCluster({
        nodes: opts.nodes,
        dataDir: opts.dataDir,
        host: '127.0.0.1',
        basePort: opts.basePort,
        // Children start the way this process did (built, or from source under tsx).
        serverCommand: [
          ...process.execArgv,
          process.argv[1] ?? fileURLToPath(new URL('./main.js', import.meta.url)),
        ],
        out: io.out,
      })
      io.exit(code)
    })
  return program
}

function parsePositiveInt(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError(`expected a positive integer, got ${value}`)
  return n
}
