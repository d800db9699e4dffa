import { isIPv4, isIPv6, type Socket } from 'node:net'

/**
 * Things open per remote address (connections, streams), at most `max` each: `take` counts one
 * in (false when its address holds `max` already: the caller refuses it), `give` counts it out.
 * An address with none open holds no entry, so the map is bounded by what is open. The gRPC
 * port (grpc-listener.ts) and the HTTP port (http/http-server.ts) cap connections by it
 * (`takeSocket`), the health service its Watch streams. An IPv6 address counts as its /64
 * (`slotOf`): one host is routinely given a whole /64 and can connect from any of its
 * addresses, so capped per address it held every slot.
 */
export class AddressSlots {
  readonly #max: number
  readonly #open = new Map<string, number>()

  constructor(max: number) {
    this.#max = max
  }

  /** What `address` holds open now. */
  held(address: string): number {
    return this.#open.get(slotOf(address)) ?? 0
  }

  /** Counts one in for `address`; false (and nothing counted) when it holds `max` already. */
  take(address: string): boolean {
    const slot = slotOf(address)
    const count = this.#open.get(slot) ?? 0
    if (count >= this.#max) return false
    this.#open.set(slot, count + 1)
    return true
  }

  /** Counts one out for `address` (one `take` answered true). */
  give(address: string): void {
    const slot = slotOf(address)
    const left = (this.#open.get(slot) ?? 1) - 1
    if (left > 0) this.#open.set(slot, left)
    else this.#open.delete(slot)
  }

  /** Counts `socket` in until it closes; false (and nothing counted) when its address is full. */
  takeSocket(socket: Socket): boolean {
    const address = socket.remoteAddress ?? ''
    if (!this.take(address)) return false
    socket.once('close', () => this.give(address))
    return true
  }

  /** Forgets every count (what was open is gone). */
  clear(): void {
    this.#open.clear()
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
