import { defineConfig, mergeConfig } from 'vitest/config'
import { sharedConfig } from '../../vitest.shared.ts'

// The process tests run the built mq-server: vitest.setup.ts builds it first.
export default mergeConfig(sharedConfig, defineConfig({ test: { globalSetup: ['./vitest.setup.ts'] } }))
