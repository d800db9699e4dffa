import { Command } from 'commander'

export interface ProgramIo {
  readonly out: (line: string) => void
}

/** Builds the `mq-bench` command line. */
export function createProgram(io: ProgramIo = { out: (l) => console.log(l) }): Command {
  const program = new Command('mq-bench').description('benchmarks of an mq cluster and of its packages')
  program
    .command('suite')
    .description('the standard quick set of benchmarks')
    .action(() => {
      io.out('mq-bench suite: no scenarios are built yet (see issue "mq-bench")')
    })
  return program
}
