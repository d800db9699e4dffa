import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { freePort } from './free-port'

describe('freePort', () => {
  it('hands out distinct ports outside the ephemeral range that a server can bind', async () => {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number)
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()))
    expect(new Set(ports).size).toBe(ports.length)
    for (const port of ports) {
      expect(port < (lo ?? 0) || port > (hi ?? 0)).toBe(true)
      expect(port).toBeGreaterThanOrEqual(20_000)
    }
    const server = createServer()
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(ports[0], '127.0.0.1', resolve)
    })
    await new Promise((resolve) => server.close(resolve))
  })
})
