import type { OutputStream } from './io'

/** What one progress line shows. */
export interface ProgressState {
  readonly label: string
  readonly done: number
  /** Unknown (a stream of stdin lines, `consume --follow`): a counter instead of a bar. */
  readonly total: number | undefined
  readonly elapsedMs: number
}

const BAR_WIDTH = 30

/** Renders one progress line (no newline): a bar when the total is known, else a counter. */
export function renderProgress(s: ProgressState): string {
  const rate = s.elapsedMs > 0 ? `  ${formatRate((s.done * 1000) / s.elapsedMs)} msg/s` : ''
  if (s.total === undefined || s.total <= 0) return `${s.label} ${s.done}${rate}`
  const fraction = Math.min(1, s.done / s.total)
  const filled = Math.round(fraction * BAR_WIDTH)
  const bar = `${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}`
  return `${s.label} [${bar}] ${String(Math.floor(fraction * 100)).padStart(3)}%  ${s.done}/${s.total}${rate}`
}

function formatRate(perSecond: number): string {
  if (perSecond >= 1_000_000) return `${(perSecond / 1_000_000).toFixed(1)}M`
  if (perSecond >= 1_000) return `${(perSecond / 1_000).toFixed(1)}k`
  return perSecond.toFixed(perSecond < 10 ? 1 : 0)
}

/**
 * A progress line on stderr, redrawn in place (carriage return) at most every `intervalMs`,
 * and only when the stream is a TTY: piped or redirected stderr gets nothing.
 */
export class Progress {
  readonly #stream: OutputStream
  readonly #now: () => number
  readonly #label: string
  readonly #total: number | undefined
  readonly #intervalMs: number
  readonly #startedAt: number
  #drawnAt = Number.NEGATIVE_INFINITY
  #done = 0
  #visible = false

  constructor(stream: OutputStream, now: () => number, label: string, total?: number, intervalMs = 100) {
    this.#stream = stream
    this.#now = now
    this.#label = label
    this.#total = total
    this.#intervalMs = intervalMs
    this.#startedAt = now()
  }

  get enabled(): boolean {
    return this.#stream.isTTY === true
  }

  /** Records `done` items so far; redraws when the last draw is older than the interval. */
  update(done: number): void {
    this.#done = done
    if (!this.enabled) return
    const now = this.#now()
    if (now - this.#drawnAt < this.#intervalMs) return
    this.#draw(now)
  }

  /** Erases the line (before something else is written to the same terminal). */
  clear(): void {
    if (!this.#visible) return
    this.#stream.write('\r\u001b[2K')
    this.#visible = false
    this.#drawnAt = Number.NEGATIVE_INFINITY
  }

  /** Draws the final state and ends the line. */
  finish(): void {
    if (!this.enabled) return
    this.#draw(this.#now())
    this.#stream.write('\n')
    this.#visible = false
  }

  #draw(now: number): void {
    const line = renderProgress({
      label: this.#label,
      done: this.#done,
      total: this.#total,
      elapsedMs: now - this.#startedAt,
    })
    const columns = this.#stream.columns ?? 0
    this.#stream.write(`\r\u001b[2K${columns > 0 ? line.slice(0, columns - 1) : line}`)
    this.#drawnAt = now
    this.#visible = true
  }
}
