import type { Percentiles } from './percentiles'
import type { BenchReport, ScenarioResult } from './result'

const fmt = (x: number): string =>
  Number.isInteger(x) ? x.toLocaleString('en-US') : x.toLocaleString('en-US', { maximumFractionDigits: 3 })

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

/** The report as markdown: one metrics table and one latency table (ms). */
export function toMarkdown(report: BenchReport): string {
  const m = report.machine
  const lines = [
    `# mq-bench ${report.startedAt}`,
    '',
    `machine: ${m.cpus} × ${m.cpuModel}, ${m.memGiB} GiB, Node ${m.node}, ${m.os}`,
    '',
  ]
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

const PERCENTILE_KEYS: readonly (keyof Percentiles)[] = ['p50', 'p99', 'max']

/**
 * Pairs every figure present in both reports (matched by scenario name and figure name):
 * metrics, and the p50/p99/max of each latency. Figures present in only one are left out.
 */
export function compareReports(old: BenchReport, current: BenchReport): Comparison[] {
  const out: Comparison[] = []
  for (const r of current.results) {
    const o = old.results.find((x) => x.scenario === r.scenario)
    if (!o) continue
    const pair = (figure: string, a: number | undefined, b: number | undefined) => {
      if (a === undefined || b === undefined) return
      out.push({ scenario: r.scenario, figure, old: a, new: b, ratio: a === 0 ? undefined : b / a })
    }
    for (const [k, v] of Object.entries(r.metrics)) pair(k, o.metrics[k], v)
    for (const [k, p] of Object.entries(r.latency)) {
      for (const q of PERCENTILE_KEYS) pair(`${k} ${q} ms`, o.latency[k]?.[q], p[q])
    }
  }
  return out
}

export function comparisonMarkdown(rows: readonly Comparison[]): string {
  return table(
    ['scenario', 'figure', 'old', 'new', 'new/old'],
    rows.map((c) => [
      c.scenario,
      c.figure,
      fmt(c.old),
      fmt(c.new),
      c.ratio === undefined ? 'n/a' : `${c.ratio.toFixed(2)}×`,
    ]),
  ).join('\n')
}
