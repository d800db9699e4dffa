import { defineConfig } from 'tsup'

/**
 * The one build configuration of every workspace member: ESM for Node 20 with `.d.ts` of the
 * public surface (src/index.ts), built against tsconfig.build.json (which, unlike the test
 * setup, resolves other @mq packages to their built output). Apps add their bin entry.
 */
export function buildConfig(entry: readonly string[] = ['src/index.ts']) {
  return defineConfig({
    entry: [...entry],
    format: ['esm'],
    target: 'node20',
    platform: 'node',
    dts: { entry: 'src/index.ts' },
    tsconfig: 'tsconfig.build.json',
    sourcemap: true,
    clean: true,
  })
}
