import { getEventListeners } from 'node:events'
import { readFile } from 'node:fs/promises'
import { MqClient } from '@mq/router-client'
import type { CliIO } from './io'

/**
 * The real IO of the `mq` binary: the process's streams and environment, the file system,
 * MqClient.connect, and Ctrl-C as `interrupt`. Ctrl-C exits at once with 130, unless a command
 * listens on `interrupt` (`consume --follow` stops cleanly); then a second Ctrl-C exits.
 */
export function nodeIO(): CliIO {
  const interrupt = new AbortController()
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted || getEventListeners(interrupt.signal, 'abort').length === 0)
      process.exit(130)
    interrupt.abort()
  })
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    connect: (options) => MqClient.connect(options),
    readFile: async (path) => new Uint8Array(await readFile(path)),
    now: () => Date.now(),
    interrupt: interrupt.signal,
  }
}
