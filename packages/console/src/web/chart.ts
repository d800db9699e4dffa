import type { QueueSample } from '../api-types'

/** One line of the share chart: a weight's target or achieved share over time. */
export interface ShareLine {
  readonly weight: number
  readonly kind: 'target' | 'achieved'
  /** SVG polyline points, `x,y` pairs in the chart's box. */
  readonly points: string
}

export interface ChartBox {
  readonly width: number
  readonly height: number
  /** The time span shown, ending at `endMs`. */
  readonly spanMs: number
  readonly endMs: number
}

/**
 * The target and achieved share lines of every weight in `samples` (oldest first), scaled
 * into `box`: x = time (the right edge is `box.endMs`), y = share from 0 (bottom) to 1 (top).
 * Samples older than the span are left out; a weight missing from a sample breaks nothing
 * (its line just has no point there). Lines come sorted by weight, target before achieved.
 */
export function shareLines(samples: readonly QueueSample[], box: ChartBox): ShareLine[] {
  const startMs = box.endMs - box.spanMs
  const points = new Map<string, string[]>()
  for (const sample of samples) {
    if (sample.atMs < startMs || sample.atMs > box.endMs) continue
    const x = round(((sample.atMs - startMs) / box.spanMs) * box.width)
    for (const w of sample.weights) {
      for (const kind of ['target', 'achieved'] as const) {
        const share = Math.min(1, Math.max(0, kind === 'target' ? w.targetShare : w.achievedShare))
        const key = `${w.weight}/${kind}`
        let list = points.get(key)
        if (!list) {
          list = []
          points.set(key, list)
        }
        list.push(`${x},${round((1 - share) * box.height)}`)
      }
    }
  }
  return [...points.entries()]
    .map(([key, list]) => {
      const [weight, kind] = key.split('/') as [string, 'target' | 'achieved']
      return { weight: Number(weight), kind, points: list.join(' ') }
    })
    .sort((a, b) => a.weight - b.weight || (a.kind === 'target' ? -1 : 1))
}

/** A colour per weight, stable across redraws (the same weight always gets the same one). */
export function weightColour(weight: number): string {
  const palette = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777']
  return palette[weight % palette.length] as string
}

function round(n: number): number {
  return Math.round(n * 10) / 10
}
