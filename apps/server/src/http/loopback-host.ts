import { BlockList, isIP } from 'node:net'

const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6')

/** A Host header: a name or IPv4 address, or an IPv6 address in brackets; then a port or none. */
const HOST_HEADER = /^(?:\[([0-9a-f:.]+)\]|([0-9a-z.-]+))(?::\d{1,5})?$/i

/**
 * Whether `host` (a listen address's host, IPv6 without brackets) is `localhost` or a
 * loopback address (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104).
 */
export function isLoopback(host: string): boolean {
  const name = host.toLowerCase()
  if (name === 'localhost') return true
  const family = isIP(name)
  return family !== 0 && LOOPBACK.check(name, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * Whether a request to a server listening on loopback may be answered: its Host header names
 * `localhost` or a loopback address (any port), or it has none (HTTP/1.0; a browser always
 * sends one). Any other name is what a DNS-rebinding page sends: a site that renamed itself to
 * 127.0.0.1 to read this port from the visitor's browser, as its own origin.
 */
export function loopbackHostAllowed(hostHeader: string | undefined): boolean {
  if (hostHeader === undefined) return true
  const match = HOST_HEADER.exec(hostHeader)
  if (!match) return false
  return isLoopback(match[1] ?? match[2] ?? '')
}
