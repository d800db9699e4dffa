import { isIPv4, isIPv6, type Socket } from 'node:net'

/**
 * Connections open per remote address, at most `max` each: `take` counts a new connection in
 * (false when its address holds `max` already: the caller closes it), and its close counts it
 * out. An address with none open holds no entry, so the map is bounded by the open connections.
 * The gRPC port (grpc-listener.ts) and the HTTP port (http/http-server.ts) cap by it. An IPv6
 * address counts as its /64 (`slotOf`): one host is routinely given a whole /64 and can
 * connect from any of its addresses, so capped per address it held every slot.
 */
export class AddressSlots {
  readonly #max: number
  readonly #open = new Map<string, number>()

  constructor(max: number) {
    this.#max = max
  }

  /** The connections `socket`'s address holds now (counting it once taken). */
  held(socket: Socket): number {
    return this.#open.get(slotOf(socket.remoteAddress ?? '')) ?? 0
  }

  /** Counts `socket` in until it closes; false (and nothing counted) when its address is full. */
  take(socket: Socket): boolean {
    const address = slotOf(socket.remoteAddress ?? '')
    const count = this.#open.get(address) ?? 0
    if (count >= this.#max) return false
    this.#open.set(address, count + 1)
    socket.once('close', () => {
      const left = (this.#open.get(address) ?? 1) - 1
      if (left > 0) this.#open.set(address, left)
      else this.#open.delete(address)
    })
    return true
  }
}

/**
 * The slot a remote address counts in: an IPv4 address (an IPv4-mapped IPv6 one too) as
 * itself, an IPv6 address as its /64 (`2001:db8:0:1::/64`), anything else as given.
 */
export function slotOf(address: string): string {
  const bare = address.split('%')[0] ?? '' // a zone id (fe80::1%eth0) names no other host
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)?.[1]
  if (mapped !== undefined && isIPv4(mapped)) return mapped
  if (!isIPv6(bare)) return address
  const [head = '', tail] = bare.toLowerCase().split('::')
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  // A dotted tail (::1.2.3.4) is the last 32 bits: past the /64.
  const groups = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right]
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`
}
