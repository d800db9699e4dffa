import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { freePort, waitServing } from '@mq/protocol'
import { expect } from 'vitest'

const serverDir = join(import.meta.dirname, '..')
// Node runs test scripts with tsx's loader directly (the tsx CLI would add a wrapper process).
const tsxLoader = import.meta.resolve('tsx')

/** A running process of `mq-server` or a test script, with its output collected. */
export interface ServerProcess {
  readonly child: ChildProcess
  readonly output: () => string
  /** Its standard error alone. */
  readonly stderr: () => string
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

/** Waits up to 30 s for `pattern` in the output of `server`, then expects it there. */
export async function untilOutput(
  server: { output(): string },
  pattern: RegExp,
  pollMs = 100,
): Promise<void> {
  const deadline = Date.now() + 30_000
  while (!pattern.test(server.output()) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, pollMs))
  expect(server.output()).toMatch(pattern)
}

/**
 * Starts the built `mq-server <args>` (dist/main.js, as users run it; built by the suite's
 * global setup, vitest.setup.ts) as its own process. End it by its PID (`child.kill`).
 */
export function startServer(args: readonly string[]): ServerProcess {
  return startNode([join(serverDir, 'dist', 'main.js'), ...args])
}

/** Starts the TypeScript file `file` (from source, through tsx) as its own process. End it by its PID. */
export function startScript(file: string, args: readonly string[] = []): ServerProcess {
  return startNode(['--import', tsxLoader, '--conditions=source', file, ...args])
}

function startNode(args: readonly string[]): ServerProcess {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
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
  return [...startArgs(nodeId, address, dir, `${nodeId}=${address}`), ...extra]
}

/** A node of a test cluster: its id, gRPC address and HTTP address. */
export interface TestNode {
  readonly id: string
  readonly address: string
  readonly http: string
}

/** `count` test nodes n1…nN on free loopback ports. */
export async function testNodes(count: number): Promise<TestNode[]> {
  const nodes: TestNode[] = []
  for (let i = 1; i <= count; i++) {
    nodes.push({
      id: `n${i}`,
      address: `127.0.0.1:${await freePort()}`,
      http: `127.0.0.1:${await freePort()}`,
    })
  }
  return nodes
}

/**
 * `start` arguments of `node` in a cluster founded by `nodes` (20-ms ticks, its HTTP port
 * on), its data under `dir`, then `extra`.
 */
export function clusterNodeArgs(
  node: TestNode,
  nodes: readonly TestNode[],
  dir: string,
  extra: readonly string[] = [],
): string[] {
  return [
    ...startArgs(node.id, node.address, dir, nodes.map((n) => `${n.id}=${n.address}`).join(',')),
    '--tick-ms',
    '20',
    '--http-listen',
    node.http,
    ...extra,
  ]
}

/** `start` of node `nodeId` at `address`, its data under `dir`, founded by `initialMeta`. */
function startArgs(nodeId: string, address: string, dir: string, initialMeta: string): string[] {
  return [
    'start',
    '--node-id',
    nodeId,
    '--listen',
    address,
    '--data-dir',
    join(dir, nodeId),
    '--initial-meta',
    initialMeta,
  ]
}

export { freePort, waitServing }
