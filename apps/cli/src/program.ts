import { Command } from 'commander'

/** Builds the `mq` command line: admin, produce and consume against a cluster. */
export function createProgram(version: string): Command {
  return new Command('mq')
    .description('mq: admin, produce and consume for an mq cluster')
    .version(version)
    .option('-s, --servers <list>', 'comma-separated seed addresses', '127.0.0.1:7001')
}
