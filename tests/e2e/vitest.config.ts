import { defineConfig, mergeConfig } from 'vitest/config'
import { sharedConfig } from '../../vitest.shared.ts'

// Cluster tests start real processes of the built commands (built first, build-apps.ts):
// one file at a time, generous timeouts.
export default mergeConfig(
  sharedConfig,
  defineConfig({
    test: {
      globalSetup: ['./build-apps.ts'],
      fileParallelism: false,
      testTimeout: 120_000,
      hookTimeout: 120_000,
    },
  }),
)
