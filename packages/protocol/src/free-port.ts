import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'

/** Ports this process has handed out: never handed out twice. */
const handedOut = new Set<number>()

/** The kernel's range for the local ports of outgoing connections (Linux; else its default). */
function ephemeralRange(): readonly [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number)
    if (lo !== undefined && hi !== undefined && lo > 0 && hi >= lo) return [lo, hi]
  } catch {
    // not Linux: the IANA range
  }
  return [49152, 65535]
}

/** The port ranges outside the ephemeral one (and above the usual service ports). */
function candidateRanges(): [number, number][] {
  const [lo, hi] = ephemeralRange()
  const ranges: [number, number][] = []
  if (lo - 1 >= 20_000) ranges.push([20_000, lo - 1])
  if (hi + 1 <= 65_535) ranges.push([hi + 1, 65_535])
  return ranges.filter(([a, b]) => b - a >= 1_000)
}

function canBind(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer()
    s.once('error', () => resolve(false))
    s.listen(port, host, () => s.close(() => resolve(true)))
  })
}

/**
 * A TCP port free on `host` that a server can be told to listen on later. It is drawn outside
 * the kernel's ephemeral range, so that no client connection (of this or another process)
 * takes it in the meantime — a port from `listen(0)` is in that range and was seen taken
 * before the server bound it. For tools and tests that start servers.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const ranges = candidateRanges()
  const size = ranges.reduce((sum, [a, b]) => sum + b - a + 1, 0)
  for (let attempt = 0; attempt < 200 && size > 0; attempt++) {
    let k = Math.floor(Math.random() * size)
    let port = 0
    for (const [a, b] of ranges) {
      if (k <= b - a) {
        port = a + k
        break
      }
      k -= b - a + 1
    }
    if (handedOut.has(port) || !(await canBind(port, host))) continue
    handedOut.add(port)
    return port
  }
  throw new Error(`no free port on ${host} outside the ephemeral range after 200 tries`)
}
