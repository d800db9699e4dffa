import { BlockList, isIP } from 'node:net'
import { ipv4Of } from '../ipv4-spelling'

const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6')

/** A Host header: a name or IPv4 address, or an IPv6 address in brackets; then a port or none. */
const HOST_HEADER = /^(?:\[([0-9a-f:.]+)\]|([0-9a-z.-]+))(?::\d{1,5})?$/i

/** A name of `--http-allowed-hosts`: a DNS name or IPv4 address, or an IPv6 address (brackets optional). */
const ALLOWED_NAME = /^(?:\[([0-9a-f:.]+)\]|([0-9a-z.-]+)|([0-9a-f]*:[0-9a-f:.]*))$/i

/**
 * Whether `host` (a listen address's host, IPv6 without brackets) is `localhost` or a
 * loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104), however it is spelt: the
 * resolver binds `127.1` or `0x7f.1` to 127.0.0.1, and a port listening there without the
 * Host check was open to DNS rebinding.
 */
export function isLoopback(host: string): boolean {
  const name = host.toLowerCase()
  if (name === 'localhost') return true
  const address = ipv4Of(name) ?? name
  const family = isIP(address)
  return family !== 0 && LOOPBACK.check(address, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * The names a request's Host header may give, besides localhost and loopback addresses
 * (`--http-allowed-hosts`): lower-case, IPv6 without brackets; `'*'` alone: any Host.
 * Throws naming the first entry that is no host name or address.
 */
export function parseAllowedHosts(list: string): string[] {
  const names = list
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
  for (const name of names) {
    if (name === '*') {
      if (names.length > 1) throw new Error(`"*" (any host) stands alone, not with other names: ${list}`)
      continue
    }
    const match = ALLOWED_NAME.exec(name)
    const ipv6 = match?.[1] ?? match?.[3]
    if (!match || (ipv6 !== undefined && isIP(ipv6) !== 6)) {
      throw new Error(
        `"${name}" is no host name or address (give names as a browser sends them, without port)`,
      )
    }
  }
  return names.map((name) => name.toLowerCase().replace(/^\[(.*)\]$/, '$1'))
}

/**
 * Whether a request may be answered for its Host header: it names `localhost` or a loopback
 * address (any port), or one of `allowed` (see parseAllowedHosts; `['*']`: anything), or it
 * has none (HTTP/1.0; a browser always sends one). Any other name is what a DNS-rebinding
 * page sends: a site that renamed itself to the node's address to read this port from the
 * visitor's browser, as its own origin.
 */
export function hostAllowed(hostHeader: string | undefined, allowed: readonly string[] = []): boolean {
  if (hostHeader === undefined) return true
  if (allowed[0] === '*') return true
  const match = HOST_HEADER.exec(hostHeader)
  if (!match) return false
  const name = (match[1] ?? match[2] ?? '').toLowerCase()
  return isLoopback(name) || allowed.includes(name)
}
