import { getEventListeners } from 'node:events'
import { readFile } from 'node:fs/promises'
import { MqClient } from '@mq/router-client'
import type { CliIO } from './io'

/**
 * The real IO of the `mq` binary: the process's streams and environment, the file system,
 * MqClient.connect, and Ctrl-C (or stdout's reader gone: EPIPE) as `interrupt`. Ctrl-C exits
 * at once with 130, unless a command listens on `interrupt` (`consume` stops cleanly); then a
 * second Ctrl-C exits.
 */
export function nodeIO(): CliIO {
  const interrupt = new AbortController()
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted || getEventListeners(interrupt.signal, 'abort').length === 0)
      process.exit(130)
    interrupt.abort()
  })
  // `mq consume | head -1`: a closed pipe ends mq quietly — a command that handles Ctrl-C
  // (consume) stops as for Ctrl-C, giving back what it holds; any other exits at once.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error
    if (interrupt.signal.aborted) return
    if (getEventListeners(interrupt.signal, 'abort').length === 0) process.exit(0)
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
