import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, statfsSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ClusterStatusResponse, freePort, SERVER_NODE_FLAGS } from '@mq/protocol'
import { MqClient } from '@mq/router-client'
import { BENCH_DEFAULT_TIMING, type RaftTiming } from './timing'

/** apps/server relative to this file, in src/ and in dist/ alike. */
const serverDir = join(import.meta.dirname, '..', '..', 'server')

/**
 * The node arguments that run mq-server: `serverMain` or $MQ_BENCH_SERVER_MAIN if given,
 * else apps/server/dist/main.js, else (no build there) apps/server's source through tsx.
 */
export function serverCommand(options: Pick<BenchClusterOptions, 'fromSource' | 'serverMain'>): string[] {
  const fromSource = (): string[] => [
    '--import',
    import.meta.resolve('tsx'),
    '--conditions=source',
    join(serverDir, 'src', 'main.ts'),
  ]
  if (options.fromSource) return fromSource()
  const given = options.serverMain ?? process.env.MQ_BENCH_SERVER_MAIN
  if (given !== undefined) {
    if (!existsSync(given)) throw new Error(`${given} (the server's main.js) does not exist`)
    return [given]
  }
  const built = join(serverDir, 'dist', 'main.js')
  if (existsSync(built)) return [built]
  process.stderr.write(`mq-bench: ${built} is not built; running the server from source through tsx\n`)
  return fromSource()
}

/** Clusters started and not yet stopped: killed if the bench process exits first. */
const live = new Set<BenchCluster>()
function killLive(): void {
  for (const c of live) c.killNow()
}

export interface BenchNode {
  readonly nodeId: string
  readonly address: string
  child: ChildProcess | undefined
  exited: Promise<void>
  /** The last 20 kB of its stdout and stderr. */
  output: string
}

export interface BenchClusterOptions {
  readonly nodes?: number
  /** Raft tick, election and heartbeat ticks of every node (default: BENCH_DEFAULT_TIMING). */
  readonly timing?: Partial<RaftTiming>
  /** Run apps/server from source through tsx instead of its dist (tests). */
  readonly fromSource?: boolean
  /** The server's built entry (default: apps/server/dist/main.js of this repo). */
  readonly serverMain?: string
  /** How long to wait for the cluster to answer. */
  readonly readyMs?: number
}

/**
 * A cluster of real `mq-server` processes on loopback that the bench starts itself: one
 * `mq-server start` per node (so the bench knows each node's PID for failover), data in
 * one temporary folder. Every process is ended by its PID; `stop()` removes the folder.
 */
export class BenchCluster {
  private constructor(
    readonly nodes: BenchNode[],
    readonly dir: string,
    private readonly command: readonly string[],
    /** The Raft timing every node runs with (written to each node's config file). */
    readonly timing: RaftTiming,
  ) {}

  /**
   * Whether the leaderships had spread (leadershipsBalanced) before start() returned; false
   * when the wait for it ran out and the cluster was handed over unbalanced.
   */
  balancedAtStart = false

  /** What a report says about this cluster: its size and timing, and its caveats. */
  facts(): ClusterFacts {
    return localClusterFacts(this.nodes.length, this.timing, this.balancedAtStart, this.dir)
  }

  static async start(options: BenchClusterOptions = {}): Promise<BenchCluster> {
    const count = options.nodes ?? 3
    if (!Number.isInteger(count) || count < 1 || count > 9) {
      throw new RangeError(`nodes must be 1..9, got ${count}`)
    }
    const command = serverCommand(options)
    const dir = mkdtempSync(join(tmpdir(), 'mq-bench-'))
    const nodes: BenchNode[] = []
    for (let i = 1; i <= count; i++) {
      nodes.push({
        nodeId: `n${i}`,
        address: `127.0.0.1:${await freePort()}`,
        child: undefined,
        exited: Promise.resolve(),
        output: '',
      })
    }
    const timing: RaftTiming = { ...BENCH_DEFAULT_TIMING, ...options.timing }
    // The timing goes in a config file (mq-server has flags for the tick only), so that the
    // report can state the election and heartbeat ticks as run rather than as assumed.
    writeFileSync(join(dir, 'server.json'), `${JSON.stringify(timing)}\n`)
    const cluster = new BenchCluster(nodes, dir, command, timing)
    live.add(cluster)
    if (live.size === 1) process.on('exit', killLive)
    for (const n of nodes) cluster.#spawn(n)
    try {
      await cluster.#waitReady(options.readyMs ?? 60_000)
      cluster.balancedAtStart = await cluster.#waitBalanced(BALANCE_WAIT_MS)
    } catch (error) {
      const logs = nodes.map((n) => `--- ${n.nodeId}\n${n.output.slice(-2000)}`).join('\n')
      await cluster.stop()
      throw new Error(`the local cluster did not come up: ${(error as Error).message}\n${logs}`, {
        cause: error,
      })
    }
    return cluster
  }

  get servers(): string[] {
    return this.nodes.map((n) => n.address)
  }

  node(nodeId: string): BenchNode {
    const n = this.nodes.find((x) => x.nodeId === nodeId)
    if (!n) throw new Error(`no node ${nodeId} in the local cluster`)
    return n
  }

  /**
   * CPU time (user + system, ms) the nodes' processes have used so far, from /proc/PID/stat;
   * undefined where that cannot be read (not Linux, a node not running).
   */
  serverCpuMs(): number | undefined {
    let total = 0
    for (const n of this.nodes) {
      const used = n.child?.pid === undefined ? undefined : processCpuMs(n.child.pid)
      if (used === undefined) return undefined
      total += used
    }
    return total
  }

  /**
   * The resident set (bytes) of the largest node process now, from /proc/PID/status;
   * undefined where that cannot be read (not Linux, a node not running).
   */
  serverRssBytes(): number | undefined {
    let largest = 0
    for (const n of this.nodes) {
      const rss = n.child?.pid === undefined ? undefined : processRssBytes(n.child.pid)
      if (rss === undefined) return undefined
      largest = Math.max(largest, rss)
    }
    return largest
  }

  /** SIGSTOP to the node's PID: it falls silent (its sockets stay open) until resume(). */
  pause(nodeId: string): void {
    this.node(nodeId).child?.kill('SIGSTOP')
  }

  /** SIGCONT to a node stopped by pause(). */
  resume(nodeId: string): void {
    this.node(nodeId).child?.kill('SIGCONT')
  }

  /** Sends SIGKILL to the node's PID and waits until it has exited. */
  async kill(nodeId: string): Promise<void> {
    const n = this.node(nodeId)
    n.child?.kill('SIGKILL')
    await n.exited
    n.child = undefined
  }

  /** SIGTERM to every node (SIGKILL after 10 s), waits for each, removes the data folder. */
  async stop(): Promise<void> {
    await Promise.all(
      this.nodes.map(async (n) => {
        if (!n.child) return
        n.child.kill('SIGCONT') // a paused node must run to handle its SIGTERM
        n.child.kill('SIGTERM')
        const timer = setTimeout(() => n.child?.kill('SIGKILL'), 10_000)
        await n.exited
        clearTimeout(timer)
        n.child = undefined
      }),
    )
    rmSync(this.dir, { recursive: true, force: true })
    live.delete(this)
    if (live.size === 0) process.off('exit', killLive)
  }

  /** Synchronous last resort on process exit: SIGKILL to every node's PID, data removed. */
  killNow(): void {
    for (const n of this.nodes) n.child?.kill('SIGKILL')
    rmSync(this.dir, { recursive: true, force: true })
  }

  #spawn(n: BenchNode): void {
    const initialMeta = this.nodes.map((x) => `${x.nodeId}=${x.address}`).join(',')
    const child = spawn(
      process.execPath,
      [
        ...SERVER_NODE_FLAGS,
        ...this.command,
        'start',
        '--config',
        join(this.dir, 'server.json'),
        '--node-id',
        n.nodeId,
        '--listen',
        n.address,
        '--data-dir',
        join(this.dir, n.nodeId),
        '--initial-meta',
        initialMeta,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    n.child = child
    const collect = (c: Buffer) => {
      n.output = (n.output + c.toString()).slice(-20_000)
    }
    child.stdout?.on('data', collect)
    child.stderr?.on('data', collect)
    n.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve()
      else child.once('exit', () => resolve())
    })
  }

  /**
   * Resolves true once every data group has a leader and no node leads two more groups than
   * another, or false after `timeoutMs`. A new cluster's first elections may leave one
   * node leading most groups; the meta leader moves leaderships once the nodes have been
   * stable for 10 s, and that hand-off (each group's writes pause briefly) would otherwise
   * land inside the first scenario and show as its worst latencies.
   */
  async #waitBalanced(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    const client = await MqClient.connect({ servers: this.servers, deadlineMs: timeoutMs, attemptMs: 1_000 })
    try {
      while (Date.now() < deadline) {
        const status = await client.admin.clusterStatus().catch(() => undefined)
        if (status && leadershipsBalanced(status)) return true
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
      return false
    } finally {
      await client.close()
    }
  }

  /** Resolves once the meta group answers through every node; bounded by `timeoutMs`. */
  async #waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs
    for (const n of this.nodes) {
      const remaining = deadline - Date.now()
      if (remaining <= 0) throw new Error(`not ready within ${timeoutMs} ms`)
      if (n.child?.exitCode !== null && n.child?.exitCode !== undefined) {
        throw new Error(`${n.nodeId} exited with code ${n.child.exitCode}`)
      }
      const client = await MqClient.connect({ servers: [n.address], deadlineMs: remaining, attemptMs: 1_000 })
      await client.close()
    }
  }
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on every Linux build it runs on). */
const CLOCK_TICKS_PER_S = 100

/**
 * User + system CPU time (ms) process `pid` has used, from /proc/PID/stat (fields 14 and 15,
 * after the command's closing parenthesis), or undefined when it cannot be read.
 */
export function processCpuMs(pid: number): number | undefined {
  const stat = procFile(pid, 'stat')
  if (stat === undefined) return undefined
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // fields[0] is the state (field 3): utime and stime are fields 14 and 15.
  const utime = Number(fields[11])
  const stime = Number(fields[12])
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) return undefined
  return ((utime + stime) * 1000) / CLOCK_TICKS_PER_S
}

/** The resident set of process `pid` in bytes (VmRSS of /proc/PID/status), or undefined. */
export function processRssBytes(pid: number): number | undefined {
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(procFile(pid, 'status') ?? '')?.[1]
  return kb === undefined ? undefined : Number(kb) * 1024
}

/** The text of /proc/PID/`name`, or undefined where it cannot be read (not Linux, no such process). */
function procFile(pid: number, name: string): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/${name}`, 'utf8')
  } catch {
    return undefined
  }
}

/** How long a new local cluster may take to spread its leaderships before the run starts anyway. */
const BALANCE_WAIT_MS = 30_000

/** Every data group led, and the leaderships per node within one of each other. */
export function leadershipsBalanced(status: Pick<ClusterStatusResponse, 'nodes' | 'groups'>): boolean {
  if (status.groups.some((g) => g.leaderId === '')) return false
  const led = new Map(status.nodes.map((n) => [n.nodeId, 0]))
  for (const g of status.groups) led.set(g.leaderId, (led.get(g.leaderId) ?? 0) + 1)
  const counts = [...led.values()]
  return Math.max(...counts) - Math.min(...counts) <= 1
}

/** What a report says about the cluster a scenario ran against. */
export interface ClusterFacts {
  /**
   * Merged into the scenario's params: `cluster` ('local': started by mq-bench, or 'given':
   * `--servers`), and for a local one its node count and Raft timing.
   */
  readonly params: Readonly<Record<string, string | number>>
  /** Caveats for the report's notes. */
  readonly notes: readonly string[]
}

/** Servers given with `--servers`: their timing is theirs and not known here. */
export const GIVEN_CLUSTER_FACTS: ClusterFacts = { params: { cluster: 'given' }, notes: [] }

/** statfs types of the file systems held in memory: an fsync there reaches no disk. */
const MEMORY_FS_TYPES: ReadonlyMap<number, string> = new Map([
  [0x01021994, 'tmpfs'],
  [0x858458f6, 'ramfs'],
])

/** The memory file system `dir` is on (tmpfs, ramfs), or undefined (a disk, or not known). */
export function memoryFsOf(dir: string): string | undefined {
  try {
    return MEMORY_FS_TYPES.get(Number(statfsSync(dir).type))
  } catch {
    return undefined
  }
}

/**
 * The facts of a cluster mq-bench started: its size, its timing, whether it was balanced, and
 * whether its data folder (`dataDir`) was on a memory file system: the nodes' data goes under
 * $TMPDIR, a tmpfs on some systems, where the fsync before each ack costs nothing.
 */
export function localClusterFacts(
  nodes: number,
  timing: RaftTiming,
  balanced: boolean,
  dataDir?: string,
): ClusterFacts {
  const memoryFs = dataDir === undefined ? undefined : memoryFsOf(dataDir)
  return {
    params: { cluster: 'local', nodes, ...timing },
    notes: [
      ...(memoryFs
        ? [
            `the nodes' data was on ${memoryFs} (${dataDir}): their fsyncs reached no disk, so the figures leave out its cost (set TMPDIR to a folder on a disk)`,
          ]
        : []),
      ...(balanced
        ? []
        : [
            `the local cluster's leaderships were not balanced after ${BALANCE_WAIT_MS / 1000} s; the run started anyway (one node leads more groups, and the meta leader may move some during the run)`,
          ]),
    ],
  }
}
