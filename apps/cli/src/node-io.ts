import { getEventListeners } from 'node:events'
import { readFile } from 'node:fs/promises'
import { MqClient } from '@mq/router-client'
import type { CliIO } from './io'

/**
 * The real IO of the `mq` binary: the process's streams and environment, the file system,
 * MqClient.connect, and Ctrl-C, SIGTERM and SIGHUP (or stdout's reader gone: EPIPE) as
 * `interrupt`. Each exits at once (130, 143, 129), unless a command listens on `interrupt`
 * (`consume` stops cleanly); then a second one exits.
 */
export function nodeIO(): CliIO {
  const interrupt = new AbortController()
  // SIGTERM (systemd, Kubernetes, `timeout`) and SIGHUP (the terminal closed) stop a command
  // as Ctrl-C does: a consume gives back what it holds (it left 50 messages leased for their
  // visibility timeout, each a delivery counted: the operator audit). Exit codes 128 + signal.
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    process.on(signal, () => {
      if (interrupt.signal.aborted || getEventListeners(interrupt.signal, 'abort').length === 0)
        process.exit(code)
      interrupt.abort()
    })
  }
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
