#!/usr/bin/env node
import { createRequire } from 'node:module'
import { ExitCode } from './exit-codes'
import { nodeIO, stdoutFailure } from './node-io'
import { runCli } from './program'
import { silenceIpServernameWarning } from './warnings'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

// TLS to a server given by IP address (as in the dev-certs setup) must not print DEP0123.
silenceIpServernameWarning()
const code = await runCli(process.argv.slice(2), nodeIO(), version)
// A command that ended as if stdout's reader had left (consume ends quietly) while stdout failed
// otherwise (a full disk) failed: said, exit 4, not 0.
const failure = code === ExitCode.Ok ? stdoutFailure() : undefined
if (failure !== undefined) process.stderr.write(`mq: ${failure}\n`)
process.exitCode = failure !== undefined ? ExitCode.Other : code
// Everything is closed by now; a lingering handle (a reconnecting channel) must not keep mq up.
setTimeout(() => {
  process.stderr.write('mq: connections still open 2 s after the command finished; exiting\n')
  process.exit()
}, 2_000).unref()
