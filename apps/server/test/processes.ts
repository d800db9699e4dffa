import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { freePort, waitServing } from '@mq/protocol'

const serverDir = join(import.meta.dirname, '..')
// Node runs the server with tsx's loader directly (the tsx CLI would add a wrapper process).
const tsxLoader = import.meta.resolve('tsx')

/** A running `mq-server` process (from source, through tsx), with its output collected. */
export interface ServerProcess {
  readonly child: ChildProcess
  readonly output: () => string
  /** Its standard error alone. */
  readonly stderr: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Starts `mq-server <args>` as its own process. End it by its PID (`child.kill`). */
export function startServer(args: readonly string[]): ServerProcess {
  const child = spawn(
    process.execPath,
    ['--import', tsxLoader, '--conditions=source', join(serverDir, 'src', 'main.ts'), ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let output = ''
  let stderr = ''
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString()
  })
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString()
    stderr += c.toString()
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  )
  return { child, output: () => output, stderr: () => stderr, exited }
}

/** `start` arguments of a one-node cluster `nodeId` at `address`, its data under `dir`, then `extra`. */
export function singleNodeArgs(
  nodeId: string,
  address: string,
  dir: string,
  extra: readonly string[] = [],
): string[] {
  return [
    'start',
    '--node-id',
    nodeId,
    '--listen',
    address,
    '--data-dir',
    join(dir, nodeId),
    '--initial-meta',
    `${nodeId}=${address}`,
    ...extra,
  ]
}

export { freePort, waitServing }
