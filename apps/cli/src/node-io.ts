import { getEventListeners } from 'node:events'
import { readFile } from 'node:fs/promises'
import { MqClient } from '@mq/router-client'
import { ExitCode } from './exit-codes'
import type { CliIO, InterruptReason } from './io'

/** A write to stdout that failed otherwise than by its reader leaving (EPIPE). */
let stdoutError: Error | undefined

/** What went wrong writing to stdout (not EPIPE), for people; undefined when nothing did. */
export function stdoutFailure(): string | undefined {
  return stdoutError && `stdout could not be written: ${stdoutError.message}`
}

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
  // Any other write error (a full disk: `mq consume > /dev/full`, ENOSPC) stops it the same way
  // but fails, exit 4 (stdoutFailure): it was thrown from here, a stack trace and exit 1, and a
  // consume left what it held leased until the visibility timeout.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    const epipe = error.code === 'EPIPE'
    if (!epipe) stdoutError ??= error
    if (interrupt.signal.aborted) return
    if (getEventListeners(interrupt.signal, 'abort').length === 0) {
      if (!epipe) process.stderr.write(`mq: ${stdoutFailure()}\n`)
      process.exit(epipe ? 0 : ExitCode.Other)
    }
    stop(
      epipe
        ? { why: "stdout's reader left (EPIPE)", exitCode: 0 }
        : { why: stdoutFailure() ?? '', exitCode: ExitCode.Other },
    )
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
