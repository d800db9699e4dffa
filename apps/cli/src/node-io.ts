import { readFile } from 'node:fs/promises'
import { MqClient } from '@mq/router-client'
import type { CliIO } from './io'

/**
 * The real IO of the `mq` binary: the process's streams and environment, the file system,
 * MqClient.connect, and Ctrl-C as `interrupt` (a second Ctrl-C exits at once with 130).
 */
export function nodeIO(): CliIO {
  const interrupt = new AbortController()
  process.on('SIGINT', () => {
    if (interrupt.signal.aborted) process.exit(130)
    interrupt.abort()
  })
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    connect: (options) => MqClient.connect(options),
    readFile: async (path) => new Uint8Array(await readFile(path)),
    now: () => performance.now(),
    interrupt: interrupt.signal,
  }
}
