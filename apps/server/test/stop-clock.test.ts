import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, waitServing } from '@mq/protocol'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { loadConfig } from '../src/config'
import { createLogger } from '../src/log'
import { MqNode } from '../src/node'

const dir = mkdtempSync(join(tmpdir(), 'mq-stop-clock-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('MqNode.stop', () => {
  it('hands its leaderships away for at most its transfer time when the wall clock steps back meanwhile (timed on a monotonic clock)', async () => {
    const address = `127.0.0.1:${await freePort()}`
    const node = new MqNode(
      loadConfig({ nodeId: 'n1', listen: address, dataDir: join(dir, 'n1'), initialMeta: `n1=${address}` }),
      { log: createLogger({ nodeId: 'n1', level: 'fatal', format: 'json' }) },
    )
    await node.start()
    await waitServing(address)
    // A lone node: it leads the meta group, and has no other voter to hand it to.
    const deadline = performance.now() + 20_000
    while (
      !node
        .view()
        .groups()
        .some((g) => g.status.role === 'leader')
    ) {
      if (performance.now() > deadline) throw new Error('the node leads nothing')
      await new Promise((r) => setTimeout(r, 50))
    }
    const realNow = Date.now.bind(Date)
    let offset = 0
    const clock = vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset)
    try {
      const started = performance.now()
      const stopped = node.stop(500, 1_000)
      offset = -3_600_000 // NTP steps the clock back an hour while the node stops
      let timer: NodeJS.Timeout | undefined
      const outcome = await Promise.race([
        stopped.then(() => 'stopped'),
        new Promise((r) => {
          timer = setTimeout(() => r('still stopping'), 10_000)
        }),
      ]).finally(() => clearTimeout(timer))
      expect(outcome).toBe('stopped')
      expect(performance.now() - started).toBeLessThan(8_000)
    } finally {
      clock.mockRestore()
    }
  }, 60_000)
})
