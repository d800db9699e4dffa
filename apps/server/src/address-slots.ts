import type { Socket } from 'node:net'

/**
 * Connections open per remote address, at most `max` each: `take` counts a new connection in
 * (false when its address holds `max` already: the caller closes it), and its close counts it
 * out. An address with none open holds no entry, so the map is bounded by the open connections.
 * The gRPC port (grpc-listener.ts) and the HTTP port (http/http-server.ts) cap by it.
 */
export class AddressSlots {
  readonly #max: number
  readonly #open = new Map<string, number>()

  constructor(max: number) {
    this.#max = max
  }

  /** The connections `socket`'s address holds now (counting it once taken). */
  held(socket: Socket): number {
    return this.#open.get(socket.remoteAddress ?? '') ?? 0
  }

  /** Counts `socket` in until it closes; false (and nothing counted) when its address is full. */
  take(socket: Socket): boolean {
    const address = socket.remoteAddress ?? ''
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
