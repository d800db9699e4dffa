import { getEventListeners } from 'node:events'
import { readFile } from 'node:fs/promises'
import { MqClient } from '@mq/router-client'
import type { CliIO, InterruptReason } from './io'

/**
 * The real IO of the `mq` binary: the process's streams and environment, the file system,
 * MqClient.connect, and Ctrl-C, SIGTERM and SIGHUP (or stdout's reader gone: EPIPE) as
 * `interrupt`. Each exits at once (130, 143, 129), unless a command listens on `interrupt`
 * (`consume` and `produce` stop cleanly); then a second one exits.
 */
export function nodeIO(): CliIO {
  const interrupt = new AbortController()
  // SIGTERM (systemd, Kubernetes, `timeout`) and SIGHUP (the terminal closed) stop a command
  // as Ctrl-C does: a consume gives back what it holds (it left 50 messages leased for their
  // visibility timeout, each a delivery counted: the operator audit). Exit codes 128 + signal.
  // Standard input is no longer read once interrupted (produce stops reading it): destroyed,
  // it no longer holds the process up.
  const stop = (reason: InterruptReason) => {
    interrupt.abort(reason)
    process.stdin.destroy()
  }
  for (const [signal, code, why] of [
    ['SIGINT', 130, 'Ctrl-C'],
    ['SIGTERM', 143, 'SIGTERM'],
    ['SIGHUP', 129, 'SIGHUP'],
  ] as const) {
    process.on(signal, () => {
      if (interrupt.signal.aborted || getEventListeners(interrupt.signal, 'abort').length === 0)
        process.exit(code)
      stop({ why, exitCode: code })
    })
  }
  // `mq consume | head -1`: a closed pipe ends mq quietly — a command that handles Ctrl-C
  // (consume, produce) stops as for Ctrl-C, giving back what it holds; any other exits at once.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error
    if (interrupt.signal.aborted) return
    if (getEventListeners(interrupt.signal, 'abort').length === 0) process.exit(0)
    stop({ why: "stdout's reader left (EPIPE)", exitCode: 0 })
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
