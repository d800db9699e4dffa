import { isIPv6 } from 'node:net'
import { ipv4Of } from './ipv4-spelling'

/** One member of an initial cluster: a node id and its `host:port` address. */
export interface Member {
  readonly nodeId: string
  readonly address: string
}

/** What NODE_ID_PATTERN allows, in words, for the messages that refuse an id. */
export const NODE_ID_RULE = "1-64 letters, digits, '_' or '-', starting with a letter or digit"
/** A node id: NODE_ID_RULE. */
export const NODE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/
const ADDRESS_PATTERN = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):([0-9]{1,5})$/

/**
 * Parses `n1=127.0.0.1:7001,n2=127.0.0.1:7002,…` (the `--initial-meta` flag). Throws an
 * Error naming the bad part when an item is malformed, a port is out of range, or a node
 * id or address repeats.
 */
export function parseMembers(text: string): Member[] {
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  if (items.length === 0) throw new Error('--initial-meta is empty; expected id=host:port[,id=host:port…]')
  const members: Member[] = []
  for (const item of items) {
    const eq = item.indexOf('=')
    if (eq < 0) throw new Error(`--initial-meta item ${JSON.stringify(item)} is not id=host:port`)
    const nodeId = item.slice(0, eq)
    const address = item.slice(eq + 1)
    if (!NODE_ID_PATTERN.test(nodeId)) {
      throw new Error(`node id ${JSON.stringify(nodeId)} must be ${NODE_ID_RULE}`)
    }
    members.push({ nodeId, address: parseAddress(address) })
  }
  const id = repeated(members.map((m) => m.nodeId))
  if (id !== undefined) throw new Error(`--initial-meta names node id ${id} twice`)
  const address = repeated(members.map((m) => m.address))
  if (address !== undefined) throw new Error(`--initial-meta names address ${address} twice`)
  return members
}

/** Returns `address` when it is `host:port` with a port in 1..65535; throws otherwise. */
export function parseAddress(address: string): string {
  const match = ADDRESS_PATTERN.exec(address)
  const port = match ? Number(match[2]) : Number.NaN
  if (!match || port < 1 || port > 65535) {
    throw new Error(`address ${JSON.stringify(address)} is not host:port with a port from 1 to 65535`)
  }
  // One spelling per address: nodes compare addresses as strings (a node finding itself among
  // --initial-meta, a NOT_LEADER hint, the meta state's records), and 127.0.0.1:07001 or
  // MQ-1.example:7001 named the same port and host as 127.0.0.1:7001 and mq-1.example:7001.
  return `${match[1]!.toLowerCase()}:${port}`
}

/** The host and port of an address `parseAddress` took (an IPv6 host keeps its brackets). */
export function hostAndPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':')
  return { host: address.slice(0, colon), port: Number(address.slice(colon + 1)) }
}

/**
 * Whether `host` is a wildcard (0.0.0.0, [::]), however it is spelt ([::0], [0::], 0, 0.0,
 * 0x0: the resolver reads them all as one): a node may listen on one, but it is no address
 * another node or a client can dial (on Linux, dialing 0.0.0.0:P reaches the dialer's own
 * port P). Until 2026-12-05 only 0.0.0.0, [::] and [0:0:0:0:0:0:0:0] were known.
 */
export function isWildcardHost(host: string): boolean {
  if (host.startsWith('[') && host.endsWith(']')) {
    const ip = host.slice(1, -1)
    return isIPv6(ip) && /^[0:]+$/.test(ip)
  }
  return ipv4Of(host) === '0.0.0.0'
}

/** The first of `values` that comes again, if any. */
function repeated(values: readonly string[]): string | undefined {
  const seen = new Set<string>()
  for (const v of values) {
    if (seen.has(v)) return v
    seen.add(v)
  }
  return undefined
}
