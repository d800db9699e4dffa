import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { runDevCluster } from './dev-cluster'

const dir = mkdtempSync(join(tmpdir(), 'mq-dev-cluster-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('runDevCluster', () => {
  it('says which nodes could not start and exits 1 when spawning fails, instead of crashing', async () => {
    const lines: string[] = []
    const code = await runDevCluster({
      nodes: 2,
      dataDir: dir,
      host: '127.0.0.1',
      basePort: 7001,
      httpBasePort: 0,
      serverCommand: ['main.js'],
      out: (line) => lines.push(line),
      execPath: join(dir, 'no-such-node'),
    })
    expect(code).toBe(1)
    expect(lines[0]).toMatch(/n1 127\.0\.0\.1:7001 not started, n2 127\.0\.0\.1:7002 not started/)
    // The spawn errors come a turn later.
    await new Promise((r) => setImmediate(r))
    expect(lines).toContain(
      `[n1] could not start ${join(dir, 'no-such-node')}: spawn ${join(dir, 'no-such-node')} ENOENT`,
    )
    expect(lines.some((l) => l.startsWith('[n2] could not start'))).toBe(true)
  })

  it('exits 0 when stopped while its nodes still load, before they handle signals', async () => {
    // Nodes that never set a handler (as every node while it loads): the SIGTERM dev sends them
    // on its own SIGHUP ends them by the signal, which counted as a failed node (exit 1).
    const lines: string[] = []
    const running = runDevCluster({
      nodes: 2,
      dataDir: dir,
      host: '127.0.0.1',
      basePort: 7001,
      httpBasePort: 0,
      serverCommand: ['-e', 'setInterval(() => {}, 1000)'],
      out: (line) => lines.push(line),
    })
    expect(lines[0]).toMatch(/n1 127\.0\.0\.1:7001 pid \d+, n2 127\.0\.0\.1:7002 pid \d+/)
    process.emit('SIGHUP', 'SIGHUP')
    expect(await running).toBe(0)
  })
})
