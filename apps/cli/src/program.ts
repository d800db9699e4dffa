import { Command, CommanderError, Option } from 'commander'
import { registerClusterCommands } from './commands/cluster'
import { registerConsumeCommand } from './commands/consume'
import { registerProduceCommand } from './commands/produce'
import { registerQueueCommands } from './commands/queue'
import { registerTokenCommands } from './commands/token'
import { DEFAULT_SERVERS, Runtime } from './context'
import { formatDuration } from './durations'
import { UsageError } from './errors'
import { classify, ExitCode, oneLine } from './exit-codes'
import type { CliIO } from './io'
import { durationArg, serversArg } from './options'

const OVERVIEW = `
Servers come from --servers, else MQ_SERVERS, else ${DEFAULT_SERVERS}. Global flags go before
or after the command. Durations: 500ms, 30s, 5m, 1h, 1m30s. A secured cluster: --token (or
MQ_TOKEN), --tls-ca (MQ_TLS_CA), and for mutual TLS --tls-cert/--tls-key.

Exit codes: 0 ok, 1 usage, 2 not found, 3 cluster unavailable, 4 other error,
5 not authenticated or not allowed.

Examples:
  $ export MQ_SERVERS=10.0.0.1:7001,10.0.0.2:7001
  $ mq cluster status
  $ mq queue create jobs --partitions 4 --visibility 30s
  $ mq produce jobs --weight 5 'hello'
  $ mq consume jobs --max 10 --json
  $ mq queue describe jobs --timeout 3s
  $ MQ_TOKEN=$(mq --token "$ADMIN_TOKEN" token create app -r 'producer:jobs*')
`

/**
 * Builds the `mq` program over `io`. Commands throw on failure (runCli turns that into an
 * exit code); commander's own errors throw CommanderError (exitOverride) after it has
 * written its message through `io.stderr`.
 */
export function createProgram(io: CliIO, version: string, runtime = new Runtime(io)): Command {
  const program = new Command('mq')
    .description('mq: administer an mq cluster, and produce and consume its messages')
    .version(version, '-V, --version', 'print the version of mq')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    })
    .showSuggestionAfterError(true)
    // Each command's --help lists the global flags too (--json, --servers, ...): its examples use them.
    .configureHelp({ showGlobalOptions: true })
    .addOption(
      new Option(
        '-s, --servers <list>',
        'comma-separated seed addresses HOST:PORT (env: MQ_SERVERS)',
      ).argParser(serversArg),
    )
    .option('--json', 'print one JSON object per line instead of tables')
    .option('--token <token>', 'the token the cluster gave you (env: MQ_TOKEN)')
    .option('--tls-ca <file>', "TLS: the CA that signs the servers' certificates, PEM (env: MQ_TLS_CA)")
    .option('--tls-cert <file>', 'mutual TLS: your client certificate, PEM (env: MQ_TLS_CERT)')
    .option('--tls-key <file>', 'mutual TLS: the key of --tls-cert, PEM (env: MQ_TLS_KEY)')
    .option(
      '-t, --timeout <duration>',
      `deadline of each operation, retries included (default: ${formatDuration(10_000)})`,
      durationArg,
    )
    .hook('preAction', (_program, action) => {
      const timeout = action.optsWithGlobals<{ timeout?: number }>().timeout
      if (timeout === 0) throw new UsageError('--timeout must be longer than 0, e.g. 10s')
    })
    .addHelpText('after', OVERVIEW)
  registerClusterCommands(program, runtime)
  registerQueueCommands(program, runtime)
  registerProduceCommand(program, runtime)
  registerConsumeCommand(program, runtime)
  registerTokenCommands(program, runtime)
  pointErrorsAtHelp(program)
  return program
}

/** Makes each command's usage errors one line that points at that command's --help. */
function pointErrorsAtHelp(command: Command, path = command.name()): void {
  command.configureOutput({ outputError: (s, write) => write(`mq: ${oneLine(s)} (see ${path} --help)\n`) })
  for (const sub of command.commands) pointErrorsAtHelp(sub, `${path} ${sub.name()}`)
}

/**
 * Runs `mq` with `argv` (the arguments after the program name) and returns the exit code.
 * Every failure writes one line to stderr: `mq: what was wrong`.
 */
export async function runCli(argv: readonly string[], io: CliIO, version: string): Promise<number> {
  const runtime = new Runtime(io)
  const program = createProgram(io, version, runtime)
  try {
    await program.parseAsync([...argv], { from: 'user' })
    return ExitCode.Ok
  } catch (error) {
    const failure = classify(error, runtime.target)
    // commander has written its own message already.
    if (!(error instanceof CommanderError)) io.stderr.write(`mq: ${failure.message}\n`)
    return failure.exitCode
  }
}
