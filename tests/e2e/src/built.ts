import { join } from 'node:path'

const repoRoot = join(import.meta.dirname, '..', '..', '..')

/** The commands the end-to-end tests run: apps/server (`mq-server`) and apps/cli (`mq`). */
export type App = 'server' | 'cli'

/**
 * The built entry point of `app` (apps/<app>/dist/main.js), as `pnpm start` runs it; built
 * by the suite's global setup (build-apps.ts).
 */
export function builtMain(app: App): string {
  return join(repoRoot, 'apps', app, 'dist', 'main.js')
}
