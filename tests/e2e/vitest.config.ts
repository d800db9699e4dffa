import { defineConfig, mergeConfig } from 'vitest/config'
import { sharedConfig } from '../../vitest.shared.ts'

// Cluster tests start real processes: one file at a time, generous timeouts.
export default mergeConfig(
  sharedConfig,
  defineConfig({ test: { fileParallelism: false, testTimeout: 120_000, hookTimeout: 120_000 } }),
)
