import { cpus, platform, release, totalmem } from 'node:os'
import type { TimelinePoint } from './histogram'
import type { Percentiles } from './percentiles'

/** Achieved shares of each weight at one moment of a fairness run. */
export interface SharePoint {
  /** Leases so far when the sample was taken. */
  readonly leases: number
  /** Achieved share per weight over the last window, in the order of `weights`. */
  readonly shares: readonly number[]
}

export interface FairnessSeries {
  readonly weights: readonly number[]
  readonly targets: readonly number[]
  readonly samples: readonly SharePoint[]
}

/** The outcome of one scenario: flat metrics, whole-run percentiles, series for charts. */
export interface ScenarioResult {
  readonly scenario: string
  readonly params: Readonly<Record<string, string | number | boolean>>
  /** Named figures; names carry their unit last (msgsPerS, stallMsMax, lost). */
  readonly metrics: Readonly<Record<string, number>>
  /** Whole-run latency percentiles in ms, by what was measured (ack, e2e). */
  readonly latency: Readonly<Record<string, Percentiles>>
  readonly timeline?: readonly TimelinePoint[]
  readonly fairness?: FairnessSeries
  readonly notes?: readonly string[]
}

export interface Machine {
  readonly cpus: number
  readonly cpuModel: string
  readonly memGiB: number
  readonly node: string
  readonly os: string
}

export interface BenchReport {
  readonly format: 'mq-bench/1'
  readonly startedAt: string
  readonly machine: Machine
  readonly results: readonly ScenarioResult[]
}

export function machine(): Machine {
  const c = cpus()
  return {
    cpus: c.length,
    cpuModel: c[0]?.model.trim() ?? 'unknown',
    memGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: `${platform()} ${release()}`,
  }
}

export function newReport(results: readonly ScenarioResult[], startedAt = new Date()): BenchReport {
  return { format: 'mq-bench/1', startedAt: startedAt.toISOString(), machine: machine(), results }
}

/** Parses a report written by `--out`; throws an Error that names the problem. */
export function parseReport(text: string, source = 'report'): BenchReport {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    throw new Error(`${source}: not JSON (${(error as Error).message})`, { cause: error })
  }
  const r = value as Partial<BenchReport>
  if (r?.format !== 'mq-bench/1' || !Array.isArray(r.results)) {
    throw new Error(`${source}: not an mq-bench report (expected "format": "mq-bench/1" and "results")`)
  }
  return r as BenchReport
}
