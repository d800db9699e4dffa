import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'

/**
 * Makes sure a Debian package that a test needs is installed: nothing to do when `file` (a file
 * the package installs) exists, else `apt-get install -y --no-install-recommends <name>` (after
 * `apt-get update` when the first try fails), which needs root and the Debian archive. Throws
 * saying what to install, for `what`, when that is not possible: such tests never skip
 * silently. Returns `file`.
 */
export function ensureDebianPackage(name: string, file: string, what: string): string {
  if (existsSync(file)) return file
  const apt = (args: string[]) =>
    spawnSync('apt-get', args, {
      encoding: 'utf8',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      timeout: 10 * 60_000,
    })
  let run = apt(['install', '-y', '--no-install-recommends', name])
  if (run.status !== 0 && !run.error) {
    apt(['update'])
    run = apt(['install', '-y', '--no-install-recommends', name])
  }
  if (run.status !== 0 || !existsSync(file)) {
    const why = run.error
      ? run.error.message
      : (run.stderr || run.stdout).trim().split('\n').slice(-3).join(' | ')
    throw new Error(
      `${what} need Debian's ${name} (${file}), and installing it failed (${why}). ` +
        `Install it first: \`apt-get update && apt-get install -y ${name}\` (as root).`,
    )
  }
  return file
}
