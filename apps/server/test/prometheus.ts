import { execFileSync, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { parseSample } from '../src/metrics/scope-exposition'

/** One sample of a Prometheus text exposition. */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/**
 * Parses the Prometheus text format (version 0.0.4) into samples. Throws on a line that is
 * neither a comment nor a well-formed sample, so a malformed exposition fails the test.
 */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = []
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const sample = parseSample(line)
    if (!sample) throw new Error(`not a Prometheus sample line: ${line}`)
    const { name, labels } = sample
    const value =
      sample.value === '+Inf'
        ? Number.POSITIVE_INFINITY
        : sample.value === '-Inf'
          ? Number.NEGATIVE_INFINITY
          : Number(sample.value)
    if (Number.isNaN(value) && sample.value.toLowerCase() !== 'nan')
      throw new Error(`bad sample value: ${line}`)
    samples.push({ name, labels, value })
  }
  return samples
}

/** The sum of the samples named `name` whose labels include `labels`. */
export function sampleSum(
  samples: readonly Sample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0)
}

const ensureScript = join(import.meta.dirname, '..', '..', '..', 'scripts', 'ensure-promtool.sh')

/**
 * Makes sure `promtool` is on PATH: scripts/ensure-promtool.sh installs Debian's prometheus
 * package when it is missing (a minute or two on a fresh machine; instant afterwards).
 */
export function ensurePromtool(): void {
  execFileSync('bash', [ensureScript], { stdio: ['ignore', 'ignore', 'inherit'] })
}

/** Runs `promtool check metrics` on `text` and returns its exit status and output. */
export function promtoolCheck(text: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
  if (r.error) throw new Error(`cannot run promtool: ${r.error.message}`, { cause: r.error })
  return { status: r.status, output: `${r.stdout}${r.stderr}` }
}
