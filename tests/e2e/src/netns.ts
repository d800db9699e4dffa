import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'

/**
 * Linux network namespaces for a cluster (needs root and iproute2): each node gets its own
 * namespace with one veth on a bridge in the test's namespace and its own address
 * `10.A.B.i`; the test process reaches every node over the bridge (clients are never cut).
 * A cut from node x to node y is a blackhole route to y's address inside x's namespace:
 * x's packets to y vanish (new connections from x to y fail, y's connections to x hang
 * because x's answers vanish, open streams stall), as on a real network partition.
 * Neither iptables nor tc qdiscs are needed (the test machine has neither).
 */
export class NetNamespaces {
  readonly #tag: string
  readonly #subnet: string
  readonly #bridge: string
  /** Namespace name by node id. */
  readonly #spaces = new Map<string, { name: string; ip: string }>()
  /** Active cuts, `from>to`. */
  readonly #cuts = new Set<string>()

  private constructor(tag: string, subnet: string) {
    this.#tag = tag
    this.#subnet = subnet
    this.#bridge = `mqb${tag}`
  }

  /** True when network namespaces can be made here (root, iproute2, a kernel that allows them). */
  static usable(): boolean {
    if (process.getuid?.() !== 0) return false
    const probe = `mq-probe-${randomBytes(3).toString('hex')}`
    try {
      ip('netns', 'add', probe)
      ip('netns', 'del', probe)
      return true
    } catch {
      return false
    }
  }

  /** A bridge on a fresh 10.A.B.0/24 (A, B random; a subnet already on this host is skipped). */
  static create(): NetNamespaces {
    const used = ip('-o', 'addr')
    for (let attempt = 0; attempt < 20; attempt++) {
      const bytes = randomBytes(5)
      const subnet = `10.${100 + ((bytes[0] ?? 0) % 100)}.${bytes[1] ?? 0}`
      if (used.includes(`${subnet}.`)) continue
      const net = new NetNamespaces(bytes.subarray(2).toString('hex'), subnet)
      ip('link', 'add', net.#bridge, 'type', 'bridge')
      ip('addr', 'add', `${subnet}.254/24`, 'dev', net.#bridge)
      ip('link', 'set', net.#bridge, 'up')
      return net
    }
    throw new Error('no free 10.x.y.0/24 subnet found')
  }

  /** Makes the namespace of `nodeId` (the `index`-th node, 1..250) and returns its address. */
  add(nodeId: string, index: number): string {
    if (index < 1 || index > 250) throw new Error(`node index ${index} outside 1..250`)
    const name = `mq-${this.#tag}-${nodeId}`
    const host = `mqv${this.#tag}${index}`
    const address = `${this.#subnet}.${index}`
    ip('netns', 'add', name)
    this.#spaces.set(nodeId, { name, ip: address })
    ip('link', 'add', host, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', name)
    ip('link', 'set', host, 'master', this.#bridge)
    ip('link', 'set', host, 'up')
    ip('-n', name, 'addr', 'add', `${address}/24`, 'dev', 'eth0')
    ip('-n', name, 'link', 'set', 'eth0', 'up')
    ip('-n', name, 'link', 'set', 'lo', 'up')
    return address
  }

  /**
   * The command prefix that runs a program in the node's namespace. `ip netns exec` execs the
   * program in place (no wrapper process), so the spawned PID is the program's own.
   */
  execPrefix(nodeId: string): string[] {
    return ['netns', 'exec', this.#space(nodeId).name]
  }

  /** Drops every packet from `from` to `to` (one way; a TCP connection needs both ways). */
  cut(from: string, to: string): void {
    const key = `${from}>${to}`
    if (from === to || this.#cuts.has(key)) return
    ip('-n', this.#space(from).name, 'route', 'add', 'blackhole', `${this.#space(to).ip}/32`)
    this.#cuts.add(key)
  }

  /**
   * Splits the nodes into `sides` that cannot reach each other (both ways); a node in no side
   * reaches every side (a bridge). Cuts made before stay.
   */
  partition(sides: readonly (readonly string[])[]): void {
    for (const [i, a] of sides.entries())
      for (const [j, b] of sides.entries()) {
        if (i === j) continue
        for (const x of a) for (const y of b) this.cut(x, y)
      }
  }

  /** Removes every cut. */
  healAll(): void {
    for (const key of [...this.#cuts]) {
      const [from = '', to = ''] = key.split('>')
      ip('-n', this.#space(from).name, 'route', 'del', 'blackhole', `${this.#space(to).ip}/32`)
      this.#cuts.delete(key)
    }
  }

  /** The active cuts, `from>to`. */
  get cuts(): string[] {
    return [...this.#cuts].sort()
  }

  /** Deletes the namespaces (their veths go with them) and the bridge. Best effort. */
  destroy(): void {
    for (const { name } of this.#spaces.values()) {
      try {
        ip('netns', 'del', name)
      } catch {}
    }
    this.#spaces.clear()
    this.#cuts.clear()
    try {
      ip('link', 'del', this.#bridge)
    } catch {}
  }

  #space(nodeId: string): { name: string; ip: string } {
    const s = this.#spaces.get(nodeId)
    if (!s) throw new Error(`no namespace for ${nodeId}`)
    return s
  }
}

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 })
}
