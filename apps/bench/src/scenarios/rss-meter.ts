import { round } from '../histogram'

/** Samples kept at most: past it every other one goes and the interval doubles. */
export const RSS_SAMPLES_MAX = 2_048
const MB = 1024 * 1024

/** A sample: ms since the meter started, and the largest server's resident set in bytes. */
interface Sample {
  readonly atMs: number
  readonly bytes: number
}

/**
 * The largest server's resident set over a run, sampled at an interval: where it stands a
 * third of the way in (past the warm-up: heaps grown, caches filled), its peak (of the samples
 * kept) and at the end. A plateau has the end near the third; a leak keeps climbing after it.
 * Bounded: at most RSS_SAMPLES_MAX samples, thinned (every other one kept, the interval
 * doubled) as a long run fills them.
 */
export class RssMeter {
  readonly #read: () => number | undefined
  readonly #samples: Sample[] = []
  readonly #startMs = performance.now()
  #intervalMs: number
  #timer: ReturnType<typeof setTimeout> | undefined
  #unknown = false
  /** What stop() returned: a later call (a run's `finally`) reads and samples nothing more. */
  #figures: Record<string, number> | undefined

  private constructor(read: () => number | undefined, intervalMs: number) {
    this.#read = read
    this.#intervalMs = intervalMs
  }

  /** Starts sampling `read` (BenchCluster.serverRssBytes) now and every `intervalMs`; none without it. */
  static start(read: (() => number | undefined) | undefined, intervalMs = 1_000): RssMeter | undefined {
    if (read === undefined || read() === undefined) return undefined
    const meter = new RssMeter(read, intervalMs)
    meter.#sample()
    return meter
  }

  /** Takes the last sample, stops, and returns the figures (none when a read failed); once. */
  stop(): Record<string, number> {
    this.#figures ??= this.#finish()
    return this.#figures
  }

  #finish(): Record<string, number> {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#take()
    const s = this.#samples
    if (this.#unknown || s.length === 0) return {}
    const end = s[s.length - 1] as Sample
    const third = end.atMs / 3
    let atThird = s[0] as Sample
    for (const x of s) if (Math.abs(x.atMs - third) < Math.abs(atThird.atMs - third)) atThird = x
    return {
      serverRssMbAtThird: round(atThird.bytes / MB, 1),
      serverRssMbPeak: round(Math.max(...s.map((x) => x.bytes)) / MB, 1),
      serverRssMbEnd: round(end.bytes / MB, 1),
    }
  }

  #sample(): void {
    this.#take()
    if (this.#unknown) return
    this.#timer = setTimeout(() => this.#sample(), this.#intervalMs)
    this.#timer.unref()
  }

  #take(): void {
    if (this.#unknown) return
    const bytes = this.#read()
    if (bytes === undefined) {
      // A node gone (killed, crashed): the figures would not be of the same processes.
      this.#unknown = true
      return
    }
    if (this.#samples.length >= RSS_SAMPLES_MAX) {
      const kept = this.#samples.filter((_, i) => i % 2 === 0)
      this.#samples.splice(0, this.#samples.length, ...kept)
      this.#intervalMs *= 2
    }
    this.#samples.push({ atMs: performance.now() - this.#startMs, bytes })
  }
}
