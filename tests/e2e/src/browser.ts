import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { ensureDebianPackage } from './debian-package'

/** Debian's Chromium, the browser the console tests drive. */
export const CHROMIUM = '/usr/bin/chromium'
const repoRoot = join(import.meta.dirname, '..', '..', '..')

/** Makes sure Debian's `chromium` is installed (ensureDebianPackage); returns CHROMIUM. */
export function ensureChromium(): string {
  return ensureDebianPackage('chromium', CHROMIUM, 'the console tests')
}

/**
 * Builds the console's page (packages/console/www) with the workspace's tsup, as
 * `pnpm --filter @mq/console build` does: the servers run from source and serve that folder.
 * Throws with tsup's output when the build fails.
 */
export function buildConsolePage(): void {
  const require = createRequire(join(repoRoot, 'package.json'))
  const pkgPath = require.resolve('tsup/package.json')
  const bin = (JSON.parse(readFileSync(pkgPath, 'utf8')) as { bin: Record<string, string> }).bin
    .tsup as string
  const run = spawnSync(process.execPath, [join(dirname(pkgPath), bin)], {
    cwd: join(repoRoot, 'packages', 'console'),
    encoding: 'utf8',
    timeout: 120_000,
  })
  if (run.status !== 0) throw new Error(`building the console page failed:\n${run.stdout}\n${run.stderr}`)
}
