import { clusterLines } from './report'
import type { BenchReport, ScenarioResult } from './result'

/** One line of a chart. */
export interface Series {
  readonly name: string
  readonly points: readonly (readonly [x: number, y: number])[]
  /** Drawn dashed (e.g. a target). */
  readonly dashed?: boolean
  /** A CSS colour; default: the palette by position. */
  readonly color?: string
}

/** A vertical line across the plot at `x`, labelled (e.g. the moment of a kill). */
export interface Marker {
  readonly x: number
  readonly label: string
}

export interface ChartSpec {
  readonly title: string
  readonly xLabel: string
  readonly yLabel: string
  readonly series: readonly Series[]
  readonly markers?: readonly Marker[]
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2']
const W = 640
const H = 300
const PAD = { left: 64, right: 140, top: 28, bottom: 40 }

export function escapeXml(s: string): string {
  return s
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;')
}

const num = (x: number): string =>
  Math.abs(x) >= 100 ? Math.round(x).toLocaleString('en-US') : String(Math.round(x * 1000) / 1000)

/** The smallest of 1, 2, 2.5, 5 × 10^k that is ≥ x (axis tops on round numbers). */
export function niceCeil(x: number): number {
  if (!(x > 0)) return 1
  const p = 10 ** Math.floor(Math.log10(x))
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x * (1 - 1e-12)) return m * p
  return 10 * p
}

/** A standalone inline SVG line chart (axes, 5 ticks each, legend); no external assets. */
export function lineChart(spec: ChartSpec): string {
  const all = spec.series.flatMap((s) => s.points)
  const xs = [...all.map((p) => p[0]), ...(spec.markers ?? []).map((m) => m.x)]
  const ys = all.map((p) => p[1])
  // Folded, not spread into Math.min/max: an argument per point overflowed the stack past
  // ~125,000 points (a fairness run of 260,000 leases in windows of 10), and --html failed.
  const xMin = xs.length ? xs.reduce((a, b) => Math.min(a, b)) : 0
  const xMax = xs.length ? xs.reduce((a, b) => Math.max(a, b), xMin + 1e-9) : 1
  const yMax = niceCeil(ys.length ? ys.reduce((a, b) => Math.max(a, b)) : 1)
  const pw = W - PAD.left - PAD.right
  const ph = H - PAD.top - PAD.bottom
  const sx = (x: number) => PAD.left + ((x - xMin) / (xMax - xMin || 1)) * pw
  const sy = (y: number) => PAD.top + ph - (y / yMax) * ph
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeXml(spec.title)}">`,
    `<text x="${W / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">${escapeXml(spec.title)}</text>`,
    `<line x1="${PAD.left}" y1="${PAD.top + ph}" x2="${PAD.left + pw}" y2="${PAD.top + ph}" stroke="#333"/>`,
    `<line x1="${PAD.left}" y1="${PAD.top}" x2="${PAD.left}" y2="${PAD.top + ph}" stroke="#333"/>`,
  ]
  for (let i = 0; i <= 4; i++) {
    const yv = (yMax * i) / 4
    const xv = xMin + ((xMax - xMin) * i) / 4
    parts.push(
      `<line x1="${PAD.left}" y1="${sy(yv).toFixed(1)}" x2="${PAD.left + pw}" y2="${sy(yv).toFixed(1)}" stroke="#eee"/>`,
      `<text x="${PAD.left - 4}" y="${(sy(yv) + 4).toFixed(1)}" text-anchor="end" font-size="10">${num(yv)}</text>`,
      `<text x="${sx(xv).toFixed(1)}" y="${PAD.top + ph + 14}" text-anchor="middle" font-size="10">${num(xv)}</text>`,
    )
  }
  parts.push(
    `<text x="${PAD.left + pw / 2}" y="${H - 6}" text-anchor="middle" font-size="11">${escapeXml(spec.xLabel)}</text>`,
    `<text x="12" y="${PAD.top + ph / 2}" text-anchor="middle" font-size="11" transform="rotate(-90 12 ${PAD.top + ph / 2})">${escapeXml(spec.yLabel)}</text>`,
  )
  spec.series.forEach((s, i) => {
    const color = s.color ?? COLORS[i % COLORS.length]
    const d = s.points.map((p) => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(' ')
    if (s.points.length > 0) {
      parts.push(
        `<polyline fill="none" stroke="${color}" stroke-width="1.5"${s.dashed ? ' stroke-dasharray="5 4"' : ''} points="${d}"/>`,
      )
    }
    const ly = PAD.top + 12 + i * 16
    parts.push(
      `<line x1="${W - PAD.right + 10}" y1="${ly - 4}" x2="${W - PAD.right + 28}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="4 3"' : ''}/>`,
      `<text x="${W - PAD.right + 32}" y="${ly}" font-size="10">${escapeXml(s.name)}</text>`,
    )
  })
  for (const m of spec.markers ?? []) {
    const x = sx(m.x).toFixed(1)
    parts.push(
      `<line x1="${x}" y1="${PAD.top}" x2="${x}" y2="${PAD.top + ph}" stroke="#000" stroke-dasharray="2 3"/>`,
      `<text x="${x}" y="${PAD.top - 3}" text-anchor="middle" font-size="10">${escapeXml(m.label)}</text>`,
    )
  }
  parts.push('</svg>')
  return parts.join('\n')
}

/**
 * The moments of a failover's fault on its time axis: the kill (`kill -9`), or the SIGSTOP and
 * the SIGCONT of a pause (`params.fault`).
 */
export function faultMarkers(r: ScenarioResult): Marker[] {
  const { killAtS, resumeAtS } = r.metrics
  if (killAtS === undefined) return []
  if (r.params.fault !== 'pause') return [{ x: killAtS, label: 'kill -9' }]
  return [
    { x: killAtS, label: 'SIGSTOP' },
    ...(resumeAtS !== undefined && resumeAtS > 0 ? [{ x: resumeAtS, label: 'SIGCONT' }] : []),
  ]
}

/** The charts of one scenario: throughput and latency over time; fairness shares. */
export function scenarioCharts(r: ScenarioResult): string[] {
  const charts: string[] = []
  const markers = faultMarkers(r)
  if (r.timeline && r.timeline.length > 0) {
    // Buckets without a completion have no latency: they are left out of the latency chart.
    const withLatency = r.timeline.filter((p) => p.perS > 0)
    charts.push(
      lineChart({
        title: `${r.scenario}: throughput`,
        xLabel: 'time (s)',
        yLabel: 'msgs/s',
        series: [{ name: 'msgs/s', points: r.timeline.map((p) => [p.tS, p.perS]) }],
        markers,
      }),
    )
    if (r.timeline.some((p) => p.p99Ms > 0)) {
      charts.push(
        lineChart({
          title: `${r.scenario}: latency`,
          xLabel: 'time (s)',
          yLabel: 'ms',
          series: [
            { name: 'p50', points: withLatency.map((p) => [p.tS, p.p50Ms]) },
            { name: 'p99', points: withLatency.map((p) => [p.tS, p.p99Ms]) },
          ],
          markers,
        }),
      )
    }
  }
  const f = r.fairness
  if (f && f.samples.length > 0) {
    const xs = f.samples.map((s) => s.leases)
    const first = xs[0] ?? 0
    const last = xs[xs.length - 1] ?? 0
    charts.push(
      lineChart({
        title: `${r.scenario}: share of leases per weight`,
        xLabel: 'leases',
        yLabel: 'share',
        series: f.weights.flatMap((w, i) => [
          {
            name: `w${w} achieved`,
            color: COLORS[i % COLORS.length],
            points: f.samples.map((s) => [s.leases, s.shares[i] ?? 0] as const),
          },
          {
            name: `w${w} target`,
            dashed: true,
            color: COLORS[i % COLORS.length],
            points: [
              [first, f.targets[i] ?? 0],
              [last, f.targets[i] ?? 0],
            ] as const,
          },
        ]),
      }),
    )
  }
  return charts
}

/** A self-contained HTML page: machine, tables and inline SVG charts; no scripts, no CDN. */
export function toHtml(report: BenchReport, markdownTable: string): string {
  const m = report.machine
  const sections = report.results.map((r) => {
    const params = Object.entries(r.params)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ')
    const metrics = Object.entries(r.metrics)
      .map(([k, v]) => `<tr><td>${escapeXml(k)}</td><td>${v}</td></tr>`)
      .join('')
    const lat = Object.entries(r.latency)
      .map(
        ([k, p]) =>
          `<tr><td>${escapeXml(k)}</td><td>${p.count}</td><td>${p.p50}</td><td>${p.p90}</td><td>${p.p99}</td><td>${p.p999}</td><td>${p.max}</td></tr>`,
      )
      .join('')
    return [
      `<section><h2>${escapeXml(r.scenario)}</h2><p><code>${escapeXml(params)}</code></p>`,
      `<table><tr><th>metric</th><th>value</th></tr>${metrics}</table>`,
      lat
        ? `<table><tr><th>latency (ms)</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>${lat}</table>`
        : '',
      ...(r.notes ?? []).map((n) => `<p class="note">${escapeXml(n)}</p>`),
      `<div class="charts">${scenarioCharts(r).join('\n')}</div></section>`,
    ].join('\n')
  })
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mq-bench ${escapeXml(report.startedAt)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; }
td, th { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.charts svg { margin: 0.5em 1em 0.5em 0; border: 1px solid #eee; }
.note { color: #555; font-style: italic; }
pre { background: #f6f6f6; padding: 1em; overflow-x: auto; }
</style>
</head>
<body>
<h1>mq-bench</h1>
<p>${escapeXml(report.startedAt)} — ${m.cpus} × ${escapeXml(m.cpuModel)}, ${m.memGiB} GiB, Node ${escapeXml(m.node)}, ${escapeXml(m.os)}</p>
${clusterLines(report)
  .map((l) => `<p>${escapeXml(l)}</p>`)
  .join('\n')}
${sections.join('\n')}
<details><summary>markdown</summary><pre>${escapeXml(markdownTable)}</pre></details>
</body>
</html>
`
}
