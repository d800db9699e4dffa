#!/usr/bin/env node
import { createRequire } from 'node:module'
import { nodeIO } from './node-io'
import { runCli } from './program'
import { silenceIpServernameWarning } from './warnings'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

// TLS to a server given by IP address (as in the dev-certs setup) must not print DEP0123.
silenceIpServernameWarning()
process.exitCode = await runCli(process.argv.slice(2), nodeIO(), version)
// Everything is closed by now; a lingering handle (a reconnecting channel) must not keep mq up.
setTimeout(() => {
  process.stderr.write('mq: connections still open 2 s after the command finished; exiting\n')
  process.exit()
}, 2_000).unref()
