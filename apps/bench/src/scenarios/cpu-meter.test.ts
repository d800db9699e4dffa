import { describe, expect, it } from 'vitest'
import { processCpuMs } from '../cluster'
import { CpuMeter } from './cpu-meter'

/** Spins for `ms` of wall time (CPU time for this process). */
function spin(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {}
}

describe('CpuMeter', () => {
  it("reads a process's CPU time from /proc, growing as it works", () => {
    if (process.platform !== 'linux') return
    const before = processCpuMs(process.pid) as number
    expect(before).toBeGreaterThan(0)
    spin(200)
    expect((processCpuMs(process.pid) as number) - before).toBeGreaterThanOrEqual(100)
    expect(processCpuMs(2 ** 30)).toBeUndefined() // no such process
  })

  it("divides the servers' and the client's CPU time of the phase by its messages", () => {
    let serverMs = 1_000
    const meter = CpuMeter.start(() => serverMs)
    serverMs += 50 // 50 ms over 1,000 messages: 50 µs each
    spin(20)
    const m = meter.perMessage(1_000)
    expect(m.serverCpuUsPerMsg).toBe(50)
    expect(m.clientCpuUsPerMsg).toBeGreaterThanOrEqual(10)
    expect(meter.perMessage(0)).toEqual({})
  })

  it('leaves the server figure out when the servers cannot be read', () => {
    expect(Object.keys(CpuMeter.start().perMessage(10))).toEqual(['clientCpuUsPerMsg'])
    let readable = true
    const meter = CpuMeter.start(() => (readable ? 5 : undefined))
    readable = false
    expect(Object.keys(meter.perMessage(10))).toEqual(['clientCpuUsPerMsg'])
  })
})
