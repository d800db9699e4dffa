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
    expect(error?.message).toMatch(/tickMs must be an integer/)
    // Well before waitServing's 30 s deadline.
    expect(Date.now() - began).toBeLessThan(20_000)
  })
})
