#!/usr/bin/env node
import { createProgram, runMain } from './program'

// Ctrl-C or a TERM ends the bench through process.exit, so that the 'exit' handler of a local
// cluster still kills the nodes it started and removes their data.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => process.exit(130))
}
await runMain(createProgram(), process.argv)
