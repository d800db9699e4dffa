import { type ChildProcess, spawn } from 'node:child_process'
import { cpSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { ChannelCredentials } from '@grpc/grpc-js'
import { freePort, SERVER_NODE_FLAGS, waitServing } from '@mq/protocol'
import { builtMain } from './built'
import { NetNamespaces } from './netns'
import { FaultProxy } from './proxy'
import { mountTmpfs, unmount } from './small-disk'

const repoRoot = join(import.meta.dirname, '..', '..', '..')

/**
 * The server's built files (apps/server/dist, packages/{name}/dist) changed after `sinceMs`, at
 * most `limit`. The cluster runs the working tree's build: a node restarted after a rebuild
 * runs other code than its peers, against data the old code wrote, so a long run during
 * which this list is not empty proves nothing about the server.
 */
export function serverBuildChangedSince(sinceMs: number, limit = 20): string[] {
  const roots = [join(repoRoot, 'apps', 'server', 'dist')]
  for (const name of readdirSync(join(repoRoot, 'packages')))
    roots.push(join(repoRoot, 'packages', name, 'dist'))
  const changed: string[] = []
  const walk = (dir: string, depth: number): void => {
    if (depth > 8 || changed.length >= limit) return
    let entries: string[]
    try {
      entries = readdirSync(dir)
    } catch {
      return
    }
    for (const e of entries) {
      const path = join(dir, e)
      const st = statSync(path, { throwIfNoEntry: false })
      if (!st) continue
      if (st.isDirectory()) walk(path, depth + 1)
      else if (st.mtimeMs > sinceMs && changed.length < limit) changed.push(path.slice(repoRoot.length + 1))
    }
  }
  for (const r of roots) walk(r, 0)
  return changed
}

export interface NodeProcess {
  readonly nodeId: string
  /** The address the node advertises (its proxy's, when the cluster is proxied). */
  readonly address: string
  /** The address the node listens on. */
  readonly listenAddress: string
  /** The proxy in front of the node, when the cluster is proxied. */
  readonly proxy: FaultProxy | undefined
  readonly dataDir: string
  child: ChildProcess | undefined
  /** True between pause() and resume(): the process is stopped by SIGSTOP. */
  paused: boolean
  /** Exits the harness did not cause (a crash), with their code or signal. */
  readonly crashes: string[]
  /** True while the harness is ending the process (kill, stop). */
  ending: boolean
  output: string
  exited: Promise<void>
  /** For a node added with `join()`: the address it joins through (else it is a founder). */
  readonly joinVia?: string
}

/**
 * A node not started yet, listening on `host:port` (advertising its proxy's port when
 * proxied).
 */
function nodeProcess(
  nodeId: string,
  host: string,
  port: number,
  dir: string,
  proxy: FaultProxy | undefined,
  joinVia?: string,
): NodeProcess {
  return {
    nodeId,
    address: `${host}:${proxy ? proxy.port : port}`,
    listenAddress: `${host}:${port}`,
    proxy,
    dataDir: join(dir, nodeId),
    child: undefined,
    paused: false,
    crashes: [],
    ending: false,
    output: '',
    exited: Promise.resolve(),
    ...(joinVia ? { joinVia } : {}),
  }
}

export interface ClusterOptions {
  readonly nodes?: number
  /** Raft tick length of every node. */
  readonly tickMs?: number
  /**
   * Puts a FaultProxy in front of every node (each advertises its proxy's address), so that
   * `isolate(nodeId)` can cut the node off. Default false.
   */
  readonly proxied?: boolean
  /**
   * Runs every node in its own Linux network namespace with its own address (src/netns.ts;
   * needs root), so that `partition()` and `cut()` can separate given nodes. Not with
   * `proxied`. Default false.
   */
  readonly netns?: boolean
  /**
   * Nodes whose data dir is a tmpfs of the given size in bytes (e.g. `{ n3: 32 << 20 }`), so
   * that `fillDisk(node.dataDir)` can fill it up (needs root; unmounted by `stop()`).
   */
  readonly smallDisks?: Readonly<Record<string, number>>
  /** The tmpfs size of every node that `join()` adds (needs root). Default: none, the temp dir. */
  readonly joinDiskBytes?: number
  /** More `mq-server start` flags for every node (e.g. `['--snapshot-entries', '50']`). */
  readonly serverArgs?: readonly string[]
  /** More flags for one node (after `serverArgs`), e.g. its own `--http-listen` port. */
  readonly nodeArgs?: (nodeId: string) => readonly string[]
  /** More environment for one node's process (e.g. `clockAheadEnv`), over the test's own. */
  readonly nodeEnv?: (nodeId: string) => Readonly<Record<string, string>> | undefined
  /** Credentials of the health checks that wait for the nodes (TLS clusters; default plaintext). */
  readonly healthCredentials?: ChannelCredentials
  /** How much of each node's output is kept (its end), in characters. Default 20,000. */
  readonly outputCharsMax?: number
}

/**
 * A cluster of real `mq-server` processes on loopback (the built apps/server: src/built.ts), each
 * with its own data dir under one temporary folder. Processes are ended by their PID only.
 */
export class LocalCluster {
  readonly nodes: NodeProcess[]
  readonly dir: string
  #initialMeta: string
  readonly #tickMs: number
  readonly #serverArgs: readonly string[]
  readonly #netns: NetNamespaces | undefined
  /** Data dirs with a tmpfs mounted on them. */
  readonly #mounts: string[] = []
  readonly #retired = new Set<string>()
  #nodeArgs: (nodeId: string) => readonly string[] = () => []
  #nodeEnv: (nodeId: string) => Readonly<Record<string, string>> | undefined = () => undefined
  #healthCredentials: ChannelCredentials | undefined
  #outputCharsMax = 20_000
  #joinDiskBytes: number | undefined
  /** Every node has a fault proxy in front of it, joined ones too. */
  #proxied = false

  private constructor(
    nodes: NodeProcess[],
    dir: string,
    tickMs: number,
    serverArgs: readonly string[],
    netns: NetNamespaces | undefined,
  ) {
    this.nodes = nodes
    this.dir = dir
    this.#initialMeta = '' // set once the nodes' addresses are known
    this.#tickMs = tickMs
    this.#serverArgs = serverArgs
    this.#netns = netns
  }

  /**
   * Starts the nodes and waits until every one answers its health check (on failure, ends
   * what it started and throws).
   */
  static async start(options: ClusterOptions = {}): Promise<LocalCluster> {
    if (options.netns && options.proxied) throw new Error('a cluster is either proxied or in namespaces')
    const dir = mkdtempSync(join(tmpdir(), 'mq-e2e-'))
    const count = options.nodes ?? 3
    const netns = options.netns ? NetNamespaces.create() : undefined
    const nodes: NodeProcess[] = []
    const cluster = new LocalCluster(nodes, dir, options.tickMs ?? 20, options.serverArgs ?? [], netns)
    try {
      for (let i = 1; i <= count; i++) {
        const nodeId = `n${i}`
        const port = await freePort()
        const proxy = options.proxied ? await FaultProxy.start(0, port) : undefined
        const host = netns ? netns.add(nodeId, i) : '127.0.0.1'
        nodes.push(nodeProcess(nodeId, host, port, dir, proxy))
      }
      cluster.#initialMeta = nodes.map((n) => `${n.nodeId}=${n.address}`).join(',')
      cluster.#healthCredentials = options.healthCredentials
      if (options.nodeArgs) cluster.#nodeArgs = options.nodeArgs
      if (options.nodeEnv) cluster.#nodeEnv = options.nodeEnv
      if (options.outputCharsMax) cluster.#outputCharsMax = options.outputCharsMax
      cluster.#joinDiskBytes = options.joinDiskBytes
      cluster.#proxied = options.proxied ?? false
      for (const [nodeId, bytes] of Object.entries(options.smallDisks ?? {})) {
        cluster.#mountSmallDisk(cluster.node(nodeId), bytes)
      }
      for (const n of nodes) cluster.#spawn(n)
      await Promise.all(nodes.map((n) => cluster.#waitUp(n)))
    } catch (error) {
      await cluster.stop()
      throw error
    }
    return cluster
  }

  /** Seed addresses for a client. */
  get servers(): string[] {
    return this.nodes.map((n) => n.address)
  }

  node(nodeId: string): NodeProcess {
    const n = this.nodes.find((x) => x.nodeId === nodeId)
    if (!n) throw new Error(`no node ${nodeId}`)
    return n
  }

  /** Sends `signal` to the node's process and waits for it to exit. */
  async kill(nodeId: string, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const n = this.node(nodeId)
    n.ending = true
    n.child?.kill(signal)
    // A stopped process acts on no signal but SIGKILL until it is continued.
    if (n.paused && signal !== 'SIGKILL') n.child?.kill('SIGCONT')
    await n.exited
    n.child = undefined
    n.paused = false
    n.ending = false
  }

  /** Whether the node's process was started and has not exited (it may be paused). */
  isRunning(nodeId: string): boolean {
    const child = this.node(nodeId).child
    return child !== undefined && child.exitCode === null && child.signalCode === null
  }

  /**
   * Freezes the node's process (SIGSTOP): it keeps its sockets and state but answers nothing,
   * as a long GC pause or a stalled VM would. Throws when the node is not running.
   */
  pause(nodeId: string): void {
    const n = this.node(nodeId)
    if (!n.child || !this.isRunning(nodeId)) throw new Error(`${nodeId} is not running`)
    if (!n.child.kill('SIGSTOP')) throw new Error(`SIGSTOP to ${nodeId} failed`)
    n.paused = true
  }

  /** Lets a paused node run again (SIGCONT). */
  resume(nodeId: string): void {
    const n = this.node(nodeId)
    if (!n.child || !n.paused) return
    if (!n.child.kill('SIGCONT')) throw new Error(`SIGCONT to ${nodeId} failed`)
    n.paused = false
  }

  /**
   * Leaves a stopped node down for good (its data was found damaged and it is replaced under
   * a new id): `heal()` no longer restarts it, and `join()` does not go through it.
   */
  retire(nodeId: string): void {
    const n = this.node(nodeId)
    if (n.child) throw new Error(`${nodeId} is running; stop it before retiring it`)
    this.#retired.add(nodeId)
  }

  isRetired(nodeId: string): boolean {
    return this.#retired.has(nodeId)
  }

  /**
   * Resumes every paused node, reconnects every isolated or slowed one, restarts every
   * stopped or crashed one (not a retired one), and waits until all serve (throws when one
   * does not in 30 s).
   */
  async heal(): Promise<void> {
    const running = this.nodes.filter((n) => this.isRunning(n.nodeId))
    this.#netns?.healAll()
    for (const n of this.nodes) {
      this.resume(n.nodeId)
      this.reconnect(n.nodeId)
      // A process that crashed on its own is restarted like a killed one.
      if (n.child && !this.isRunning(n.nodeId)) n.child = undefined
    }
    await Promise.all([
      ...this.nodes
        .filter((n) => !n.child && !this.#retired.has(n.nodeId))
        .map((n) => this.restart(n.nodeId)),
      ...running.map((n) => this.#waitUp(n)),
    ])
  }

  /**
   * Starts one more node, `n<k>`, that joins the running cluster through the first node not
   * retired (`--join`, not a meta member), and waits until it serves.
   */
  async join(): Promise<NodeProcess> {
    const port = await freePort()
    const nodeId = `n${this.nodes.length + 1}`
    const host = this.#netns ? this.#netns.add(nodeId, this.nodes.length + 1) : '127.0.0.1'
    const via = this.nodes.find((x) => !this.#retired.has(x.nodeId)) ?? this.nodes[0]
    // A joined node gets its proxy too (a fault run's slow and isolate faults need one).
    const proxy = this.#proxied ? await FaultProxy.start(0, port) : undefined
    const n = nodeProcess(nodeId, host, port, this.dir, proxy, via?.address)
    this.nodes.push(n)
    if (this.#joinDiskBytes !== undefined) this.#mountSmallDisk(n, this.#joinDiskBytes)
    this.#spawn(n)
    await this.#waitUp(n)
    return n
  }

  #mountSmallDisk(n: NodeProcess, bytes: number): void {
    mountTmpfs(n.dataDir, bytes)
    this.#mounts.push(n.dataDir)
  }

  /** Whether the node's data dir is a small tmpfs (`smallDisks`, `joinDiskBytes`) that may be filled. */
  hasSmallDisk(nodeId: string): boolean {
    return this.#mounts.includes(this.node(nodeId).dataDir)
  }

  /**
   * Starts a stopped node again from its data dir and waits until it serves. With `dataDirOnly`
   * it is given neither `--initial-meta` nor `--join`: it finds its cluster from its data dir.
   */
  async restart(nodeId: string, options: { readonly dataDirOnly?: boolean } = {}): Promise<void> {
    const n = this.node(nodeId)
    if (n.child) throw new Error(`${nodeId} is running`)
    this.#spawn(n, options.dataDirOnly !== true)
    await this.#waitUp(n)
  }

  /**
   * Starts a stopped node that is expected to refuse to start (damaged data, say) and waits
   * up to `timeoutMs` for it to exit on its own. Returns its exit code (or signal); undefined
   * when it still runs by then (it is left running). Its exit does not count as a crash.
   */
  async startExpectingExit(nodeId: string, timeoutMs = 30_000): Promise<number | string | undefined> {
    const n = this.node(nodeId)
    if (n.child) throw new Error(`${nodeId} is running`)
    n.ending = true
    this.#spawn(n)
    const child = n.child as ChildProcess | undefined
    const exited = await exitedWithin(n, timeoutMs)
    n.ending = false
    if (!exited || !child) return undefined
    n.child = undefined
    return child.exitCode ?? child.signalCode ?? undefined
  }

  /**
   * Starts a second process under `nodeId`'s id — its own port and empty data dir, joining
   * through another node (a founder must advertise its `--initial-meta` address, which the
   * first process holds) — which the cluster is expected to refuse, and waits up to
   * `timeoutMs` for it to exit on its own (else it is killed, by its PID). Returns its exit
   * code (undefined when it had to be killed) and its output.
   */
  async startTwin(
    nodeId: string,
    timeoutMs = 30_000,
  ): Promise<{ exit: number | string | undefined; output: string }> {
    const original = this.node(nodeId)
    const host = original.listenAddress.slice(0, original.listenAddress.lastIndexOf(':'))
    const via = this.nodes.find((x) => x.nodeId !== nodeId && x.child)?.address
    const twin = nodeProcess(nodeId, host, await freePort(), join(this.dir, 'twins'), undefined, via)
    twin.ending = true
    this.#spawn(twin)
    const exited = await exitedWithin(twin, timeoutMs)
    const child = twin.child as ChildProcess | undefined
    if (!exited && child?.pid !== undefined) {
      child.kill('SIGKILL')
      await twin.exited
    }
    return {
      exit: exited ? (child?.exitCode ?? child?.signalCode ?? undefined) : undefined,
      output: twin.output,
    }
  }

  /**
   * Cuts the node off one way: nothing reaches it over its proxy (peers and clients alike),
   * while its own connections to the others still work. Needs a proxied cluster.
   */
  isolate(nodeId: string): void {
    const n = this.node(nodeId)
    if (!n.proxy) throw new Error('isolate needs a cluster started with proxied: true')
    n.proxy.hold()
  }

  /** Delays every byte to and from the node by `delayMs` (its proxy). Needs a proxied cluster. */
  slow(nodeId: string, delayMs: number): void {
    const n = this.node(nodeId)
    if (!n.proxy) throw new Error('slow needs a cluster started with proxied: true')
    n.proxy.delay(delayMs)
  }

  /**
   * Splits the nodes into `sides` that cannot reach each other, both ways; a node in no side
   * reaches all (a bridge). Clients (this process) still reach every node. Adds to the cuts
   * already made. Needs a cluster started with `netns: true`.
   */
  partition(sides: readonly (readonly string[])[]): void {
    this.#namespaces('partition').partition(sides)
  }

  /** Drops every packet from node `from` to node `to` (one way). Needs `netns: true`. */
  cut(from: string, to: string): void {
    this.#namespaces('cut').cut(from, to)
  }

  /** Removes every partition and cut. */
  healNetwork(): void {
    this.#netns?.healAll()
  }

  /** The active cuts between nodes, `from>to`. */
  get cuts(): string[] {
    return this.#netns?.cuts ?? []
  }

  #namespaces(what: string): NetNamespaces {
    if (!this.#netns) throw new Error(`${what} needs a cluster started with netns: true`)
    return this.#netns
  }

  /** Undoes isolate() and slow(): delivers what was held and carries traffic at once again. */
  reconnect(nodeId: string): void {
    const proxy = this.node(nodeId).proxy
    proxy?.delay(0)
    proxy?.release()
  }

  /**
   * Stops every node (SIGTERM, then SIGKILL after 10 s), removes the network namespaces and
   * the tmpfs mounts, and removes the data; with `keepDataIn`, each node's data dir is first
   * copied there (`<keepDataIn>/<node id>`), to be examined offline (when that copy throws,
   * the namespaces and mounts are still removed, the data left in place).
   */
  async stop(keepDataIn?: string): Promise<void> {
    await Promise.all(
      this.nodes.map(async (n) => {
        if (!n.child) return
        n.ending = true
        n.child.kill('SIGTERM')
        if (n.paused) n.child.kill('SIGCONT')
        const timer = setTimeout(() => n.child?.kill('SIGKILL'), 10_000)
        await n.exited
        clearTimeout(timer)
        n.child = undefined
        n.paused = false
      }),
    )
    await Promise.all(this.nodes.map((n) => n.proxy?.close()))
    try {
      if (keepDataIn !== undefined)
        for (const n of this.nodes)
          cpSync(n.dataDir, join(keepDataIn, n.nodeId), { recursive: true, errorOnExist: false })
    } finally {
      // A copy that failed (a full disk, say) still gives back the namespaces and the mounts,
      // which outlive the process; the data dirs are then left where they are.
      this.#netns?.destroy()
      for (const dir of this.#mounts.splice(0)) unmount(dir)
    }
    rmSync(this.dir, { recursive: true, force: true })
  }

  /**
   * Waits until the node answers its health check; throws at once if its process exits
   * first, and in both failures the error carries the end of the node's output.
   */
  async #waitUp(n: NodeProcess): Promise<void> {
    const serving = waitServing(n.listenAddress, undefined, this.#healthCredentials)
    serving.catch(() => {}) // the race below reports it; the poll ends at its own deadline
    const exited = n.exited.then(() => {
      throw new Error(`${n.nodeId} exited (${n.child?.exitCode ?? n.child?.signalCode}) before it served`)
    })
    exited.catch(() => {})
    try {
      await Promise.race([serving, exited])
    } catch (error) {
      const tail = n.output.split('\n').slice(-15).join('\n')
      throw new Error(`${(error as Error).message}; ${n.nodeId}'s last output:\n${tail}`)
    }
  }

  /** Starts `n`'s process; `seeds` false: without `--initial-meta` or `--join`. */
  #spawn(n: NodeProcess, seeds = true): void {
    const prefix = this.#netns ? ['ip', ...this.#netns.execPrefix(n.nodeId)] : []
    const child = spawn(
      prefix[0] ?? process.execPath,
      [
        ...prefix.slice(1),
        ...(prefix.length > 0 ? [process.execPath] : []),
        ...SERVER_NODE_FLAGS,
        builtMain('server'),
        'start',
        '--node-id',
        n.nodeId,
        '--listen',
        n.listenAddress,
        '--advertise',
        n.address,
        '--data-dir',
        n.dataDir,
        ...(!seeds ? [] : n.joinVia ? ['--join', n.joinVia] : ['--initial-meta', this.#initialMeta]),
        '--tick-ms',
        String(this.#tickMs),
        ...this.#serverArgs,
        ...this.#nodeArgs(n.nodeId),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...this.#nodeEnv(n.nodeId) } },
    )
    n.child = child
    const collect = (c: Buffer) => {
      // Cut only past the bound: a slice flattens the whole string, every chunk would copy it.
      n.output += c.toString()
      if (n.output.length > this.#outputCharsMax) n.output = n.output.slice(-this.#outputCharsMax)
    }
    child.stdout?.on('data', collect)
    child.stderr?.on('data', collect)
    n.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        if (!n.ending) n.crashes.push(`${new Date().toISOString()} exit ${code ?? signal}`)
        resolve()
      }),
    )
  }
}

/** Whether `n`'s process exits within `timeoutMs` (its timer cleared either way). */
async function exitedWithin(n: NodeProcess, timeoutMs: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined
  try {
    return await Promise.race([
      n.exited.then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

export { freePort, waitServing }
