import { execFileSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { LocalCluster } from './cluster'

describe('LocalCluster', () => {
  it('fails at once, with the node output, when a node exits before it serves', async () => {
    const began = Date.now()
    const error = await LocalCluster.start({ nodes: 1, serverArgs: ['--tick-ms', '0'] }).then(
      () => undefined,
      (e: unknown) => e as Error,
    )
    expect(error?.message).toMatch(/n1 exited \(2\) before it served/)
    expect(error?.message).toMatch(/--tick-ms \(config file: "tickMs"\) must be an integer/)
    // Well before waitServing's 30 s deadline.
    expect(Date.now() - began).toBeLessThan(20_000)
  })
})

describe.runIf(process.getuid?.() === 0)('LocalCluster.stop', () => {
  it('gives back the tmpfs mounts even when keeping the data fails (a full disk, say)', async () => {
    const cluster = await LocalCluster.start({ nodes: 1, smallDisks: { n1: 64 << 20 } })
    const dataDir = cluster.node('n1').dataDir
    const mounted = () => readFileSync('/proc/self/mounts', 'utf8').includes(` ${dataDir} `)
    expect(mounted()).toBe(true)
    // Somewhere no copy can go: under a file.
    const file = join(cluster.dir, 'not-a-dir')
    writeFileSync(file, '')
    try {
      await expect(cluster.stop(join(file, 'data'))).rejects.toThrow()
      expect(mounted()).toBe(false)
    } finally {
      if (mounted()) execFileSync('umount', ['-l', dataDir])
      rmSync(cluster.dir, { recursive: true, force: true })
    }
  })
})
