import { defineConfig } from 'vitest/config'

/**
 * The one vitest configuration every package extends. Tests run against source: the
 * `source` export condition maps each `@mq/*` import to the package's `src/index.ts`,
 * so no build is needed before a test.
 */
export const sharedConfig = defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'], externalConditions: ['source'] } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    environment: 'node',
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
})
