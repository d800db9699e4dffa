import { Command, InvalidArgumentError } from 'commander'

export interface ProgramIo {
  readonly out: (line: string) => void
}

/** Builds the `mq-server` command line. `io` receives what the commands print. */
export function createProgram(io: ProgramIo = { out: (l) => console.log(l) }): Command {
  const program = new Command('mq-server').description('mq server: a multi-Raft host of meta and data groups')
  program
    .command('dev')
    .description('run a local cluster of separate processes')
    .option('--nodes <n>', 'number of nodes', parsePositiveInt, 3)
    .option('--data-dir <dir>', 'data directory', '.mq-data')
    .action((opts: { nodes: number; dataDir: string }) => {
      io.out(
        `mq-server dev: a local ${opts.nodes}-node cluster in ${opts.dataDir} is not built yet ` +
          '(see issue "The cluster"); the packages build and test: pnpm test',
      )
    })
  return program
}

function parsePositiveInt(value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError(`expected a positive integer, got ${value}`)
  return n
}
