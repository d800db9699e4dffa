import type { Percentiles } from './percentiles'
import type { BenchReport, ScenarioResult } from './result'
import { type RaftTiming, timingAgainstDefault } from './timing'

/** A figure with its thousands separated and every decimal it was rounded to (up to 4: the shares). */
const fmt = (x: number): string =>
  Number.isInteger(x) ? x.toLocaleString('en-US') : x.toLocaleString('en-US', { maximumFractionDigits: 4 })

function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const esc = (s: string) => s.replaceAll('|', '\\|')
  return [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ]
}

function paramsText(r: ScenarioResult): string {
  return Object.entries(r.params)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')
}

/** The Raft timing recorded in a result's params (a local cluster's), if any. */
export function timingOf(r: ScenarioResult): RaftTiming | undefined {
  const { tickMs, electionTicks, heartbeatTicks } = r.params
  if (typeof tickMs !== 'number' || typeof electionTicks !== 'number' || typeof heartbeatTicks !== 'number')
    return undefined
  return { tickMs, electionTicks, heartbeatTicks }
}

/**
 * One line per distinct Raft timing of the report's local clusters (what the figures were taken
 * with, against mq-server's default), and one when some ran against given servers.
 */
export function clusterLines(report: BenchReport): string[] {
  const lines = new Set<string>()
  for (const r of report.results) {
    const t = timingOf(r)
    if (t) lines.add(`local clusters: ${timingAgainstDefault(t)}`)
    else if (r.params.cluster === 'given')
      lines.add('given servers (--servers): their Raft timing is their own')
  }
  return [...lines]
}

/** The report as markdown: one metrics table and one latency table (ms). */
export function toMarkdown(report: BenchReport): string {
  const m = report.machine
  const lines = [
    `# mq-bench ${report.startedAt}`,
    '',
    `machine: ${m.cpus} × ${m.cpuModel}, ${m.memGiB} GiB, Node ${m.node}, ${m.os}`,
    '',
  ]
  const clusters = clusterLines(report)
  if (clusters.length > 0) lines.push(...clusters, '')
  const metricRows = report.results.flatMap((r) =>
    Object.entries(r.metrics).map(([k, v]) => [r.scenario, k, fmt(v)]),
  )
  lines.push(...table(['scenario', 'metric', 'value'], metricRows), '')
  const latRows = report.results.flatMap((r) =>
    Object.entries(r.latency).map(([k, p]) => [
      r.scenario,
      k,
      fmt(p.count),
      fmt(p.p50),
      fmt(p.p90),
      fmt(p.p99),
      fmt(p.p999),
      fmt(p.max),
    ]),
  )
  if (latRows.length > 0) {
    lines.push('latency (ms, over the whole run):', '')
    lines.push(...table(['scenario', 'of', 'count', 'p50', 'p90', 'p99', 'p99.9', 'max'], latRows), '')
  }
  lines.push('params:', '', ...report.results.map((r) => `- ${r.scenario}: ${paramsText(r)}`), '')
  const notes = report.results.flatMap((r) => (r.notes ?? []).map((n) => `- ${r.scenario}: ${n}`))
  if (notes.length > 0) lines.push('notes:', '', ...notes, '')
  return lines.join('\n')
}

/** One compared figure: `ratio` is new / old (undefined when old is 0). */
export interface Comparison {
  readonly scenario: string
  readonly figure: string
  readonly old: number
  readonly new: number
  readonly ratio: number | undefined
}

/** A result of the new report that was not compared, and why. */
export interface Unpaired {
  readonly scenario: string
  readonly reason: string
}

/** What `compareReports` found: ratios of the results run alike, and the rest with reasons. */
export interface ReportComparison {
  readonly rows: readonly Comparison[]
  readonly unpaired: readonly Unpaired[]
  /** Compared, but a parameter is recorded in one report only (e.g. an older format). */
  readonly caveats: readonly string[]
}

const PERCENTILE_KEYS: readonly (keyof Percentiles)[] = ['p50', 'p99', 'max']

/** How two results' params differ: values that differ, and keys that only one of them records. */
export function paramsDiff(
  old: ScenarioResult['params'],
  current: ScenarioResult['params'],
): { differ: string[]; oneSided: string[] } {
  const differ: string[] = []
  const oneSided: string[] = []
  for (const k of new Set([...Object.keys(old), ...Object.keys(current)])) {
    const a = old[k]
    const b = current[k]
    if (a === undefined || b === undefined) oneSided.push(`${k} (${a === undefined ? 'new' : 'old'} only)`)
    else if (a !== b) differ.push(`${k} ${a} → ${b}`)
  }
  return { differ, oneSided }
}

/**
 * Pairs each result of `current` with one of `old` of the same scenario run with the same
 * params (a key recorded on one side only is a caveat, not a difference), each old result at
 * most once, and gives the ratio of every figure present in both: metrics, and the p50/p99/max
 * of each latency. A result with no such partner is listed in `unpaired`, saying which params
 * differ: a ratio between runs of different sizes, depths or Raft timings means nothing.
 */
export function compareReports(old: BenchReport, current: BenchReport): ReportComparison {
  const rows: Comparison[] = []
  const unpaired: Unpaired[] = []
  const caveats: string[] = []
  const used = new Set<ScenarioResult>()
  for (const r of current.results) {
    const candidates = old.results.filter((x) => x.scenario === r.scenario && !used.has(x))
    const diffs = candidates.map((x) => ({ x, d: paramsDiff(x.params, r.params) }))
    const match = diffs.find(({ d }) => d.differ.length === 0)
    if (!match) {
      const first = diffs[0]
      unpaired.push({
        scenario: r.scenario,
        reason: first
          ? `params differ: ${first.d.differ.join(', ')}`
          : `no ${r.scenario} result in the old report${old.results.some((x) => x.scenario === r.scenario) ? ' left to pair' : ''}`,
      })
      continue
    }
    const o = match.x
    used.add(o)
    if (match.d.oneSided.length > 0)
      caveats.push(`${r.scenario}: compared, but recorded in one report only: ${match.d.oneSided.join(', ')}`)
    const pair = (figure: string, a: number | undefined, b: number | undefined) => {
      if (a === undefined || b === undefined) return
      rows.push({ scenario: r.scenario, figure, old: a, new: b, ratio: a === 0 ? undefined : b / a })
    }
    for (const [k, v] of Object.entries(r.metrics)) pair(k, o.metrics[k], v)
    for (const [k, p] of Object.entries(r.latency)) {
      for (const q of PERCENTILE_KEYS) pair(`${k} ${q} ms`, o.latency[k]?.[q], p[q])
    }
  }
  return { rows, unpaired, caveats }
}

/** The ratios as a markdown table, then the results not compared and the caveats, one line each. */
export function comparisonMarkdown(c: ReportComparison): string {
  const lines =
    c.rows.length > 0
      ? table(
          ['scenario', 'figure', 'old', 'new', 'new/old'],
          c.rows.map((x) => [
            x.scenario,
            x.figure,
            fmt(x.old),
            fmt(x.new),
            x.ratio === undefined ? 'n/a' : `${x.ratio.toFixed(2)}×`,
          ]),
        )
      : ['no result of this run was run alike in the old report']
  if (c.unpaired.length > 0)
    lines.push('', 'not compared:', '', ...c.unpaired.map((u) => `- ${u.scenario}: ${u.reason}`))
  if (c.caveats.length > 0) lines.push('', 'caveats:', '', ...c.caveats.map((x) => `- ${x}`))
  return lines.join('\n')
}
