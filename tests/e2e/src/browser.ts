import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

/** Debian's Chromium, the browser the console tests drive. */
export const CHROMIUM = '/usr/bin/chromium'
const repoRoot = join(import.meta.dirname, '..', '..', '..')

/**
 * Makes sure Debian's `chromium` is installed: nothing to do when CHROMIUM exists, else
 * `apt-get install -y chromium` (after `apt-get update` when the first try fails), which needs
 * root and the Debian archive. Throws saying what to install when that is not possible: the
 * browser tests never skip silently.
 */
export function ensureChromium(): string {
  if (existsSync(CHROMIUM)) return CHROMIUM
  const apt = (args: string[]) =>
    spawnSync('apt-get', args, {
      encoding: 'utf8',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      timeout: 10 * 60_000,
    })
  let run = apt(['install', '-y', '--no-install-recommends', 'chromium'])
  if (run.status !== 0 && !run.error) {
    apt(['update'])
    run = apt(['install', '-y', '--no-install-recommends', 'chromium'])
  }
  if (run.status !== 0 || !existsSync(CHROMIUM)) {
    const why = run.error
      ? run.error.message
      : (run.stderr || run.stdout).trim().split('\n').slice(-3).join(' | ')
    throw new Error(
      `the console tests need Debian's chromium at ${CHROMIUM}, and installing it failed (${why}). ` +
        'Install it first: `apt-get update && apt-get install -y chromium` (as root).',
    )
  }
  return CHROMIUM
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
