import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

/**
 * Builds the workspace members `filters` select (`@mq/server...`: the server and what it
 * uses) with the workspace's turbo, for the test suites and scripts that run built commands
 * as users do. Turbo's cache makes this ~0.1 s when nothing changed, and then writes nothing:
 * under `pnpm test` those members are built before such a suite starts (its turbo.json), so
 * this builds only when a suite runs alone. Throws with turbo's output when the build fails.
 */
export function turboBuild(filters: readonly string[]): void {
  const root = import.meta.dirname
  const run = spawnSync(
    join(root, 'node_modules', '.bin', 'turbo'),
    ['run', 'build', ...filters.map((f) => `--filter=${f}`), '--output-logs=errors-only'],
    {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' },
      maxBuffer: 64 << 20,
      timeout: 600_000,
    },
  )
  if (run.status !== 0) {
    const why = run.error?.message ?? `exit ${run.status ?? run.signal}`
    throw new Error(
      `building ${filters.join(' ')} failed (${why}):\n${`${run.stdout}${run.stderr}`.slice(-4_000)}`,
    )
  }
}
