import { describe, expect, it } from 'vitest'
import { processCpuMs } from '../cluster'
import { CpuMeter, SERVER_CPU_MIN_MS } from './cpu-meter'
import { spinCpu } from './cpu-spin'

describe('CpuMeter', () => {
  it("reads a process's CPU time from /proc, growing as it works", () => {
    if (process.platform !== 'linux') return
    const before = processCpuMs(process.pid) as number
    expect(before).toBeGreaterThan(0)
    spinCpu(200)
    // /proc counts 10 ms ticks: 200 ms used shows as at least 180.
    expect((processCpuMs(process.pid) as number) - before).toBeGreaterThanOrEqual(180)
    expect(processCpuMs(2 ** 30)).toBeUndefined() // no such process
  })

  it("divides the servers' and the client's CPU time of the phase by its messages", () => {
    let serverMs = 1_000
    const meter = CpuMeter.start(() => serverMs)
    serverMs += 5_000 // 5 s over 100,000 messages: 50 µs each
    spinCpu(20)
    const m = meter.perMessage(100_000)
    expect(m.serverCpuUsPerMsg).toBe(50)
    expect(m.clientCpuUsPerMsg).toBeGreaterThanOrEqual(0.1)
    expect(meter.perMessage(0)).toEqual({})
  })

  it('leaves the server figure out when the phase took less CPU than the ticks can tell', () => {
    let serverMs = 0
    const meter = CpuMeter.start(() => serverMs)
    serverMs += SERVER_CPU_MIN_MS - 10
    expect(meter.perMessage(300).serverCpuUsPerMsg).toBeUndefined()
  })

  it('starts once the servers have gone quiet, or after its bound', async () => {
    let serverMs = 0
    let reads = 0
    // Busy for the first four reads (a core each 250 ms), then quiet.
    const read = () => {
      reads++
      serverMs += reads <= 4 ? 250 : 1
      return serverMs
    }
    const t0 = performance.now()
    await CpuMeter.startSettled(read)
    expect(reads).toBeGreaterThanOrEqual(5)
    expect(performance.now() - t0).toBeLessThan(5_000)
  })

  it("counts an idle cluster at the bench's tick as quiet: it starts at the first look", async () => {
    let reads = 0
    // 0.2 of a core in all (3 nodes' ticks and heartbeats at 20 ms): 50 ms each 250 ms.
    const read = () => 50 * ++reads
    await CpuMeter.startSettled(read)
    // The first read, one window, and the start's own read: it waited no longer.
    expect(reads).toBe(3)
  })

  it('leaves the server figure out when the servers cannot be read', () => {
    expect(Object.keys(CpuMeter.start().perMessage(10))).toEqual(['clientCpuUsPerMsg'])
    let readable = true
    const meter = CpuMeter.start(() => (readable ? 5 : undefined))
    readable = false
    expect(Object.keys(meter.perMessage(10))).toEqual(['clientCpuUsPerMsg'])
  })
})
