import { round } from '../histogram'

/** The servers' CPU time a phase must take for its per-message figure (±10 ms per process). */
export const SERVER_CPU_MIN_MS = 1_000
/**
 * Quiet: the servers together use less than this share of one core over QUIET_WINDOW_MS. An
 * idle 3-node cluster at the bench's 20 ms tick uses 0.12-0.24 of one (ticks, heartbeats);
 * right after a produce, ~1. (At 0.1 until 2026-12-06, an audit: never quiet, so every
 * startSettled waited its whole bound.)
 */
const QUIET_SHARE = 0.3
const QUIET_WINDOW_MS = 250
/** The longest startSettled waits for the servers to go quiet. */
const SETTLE_MAX_MS = 5_000

/**
 * CPU time per message of a measured phase: the servers' (every node's process, user + system,
 * when the bench knows their PIDs; their idle work over the phase — ticks, heartbeats — too)
 * and this client's. On a shared machine a rate swings with
 * the neighbours' load while the CPU a message costs hardly moves, so comparing two builds by
 * it takes fewer runs than by msgs/s.
 */
export class CpuMeter {
  readonly #serverCpuMs: (() => number | undefined) | undefined
  readonly #serverStartMs: number | undefined
  readonly #clientStart: NodeJS.CpuUsage

  private constructor(serverCpuMs: (() => number | undefined) | undefined) {
    this.#serverCpuMs = serverCpuMs
    this.#serverStartMs = serverCpuMs?.()
    this.#clientStart = process.cpuUsage()
  }

  /** Starts measuring; `serverCpuMs` reads the servers' CPU time so far (BenchCluster.serverCpuMs). */
  static start(serverCpuMs?: () => number | undefined): CpuMeter {
    return new CpuMeter(serverCpuMs)
  }

  /**
   * Starts measuring once the servers have gone quiet (less than QUIET_SHARE of one core over
   * QUIET_WINDOW_MS), at most SETTLE_MAX_MS after the call: what the phase before left them
   * (a produce's replication and applies, LevelDB's compactions) is not counted against the
   * phase measured. At once when the servers cannot be read.
   */
  static async startSettled(serverCpuMs?: () => number | undefined): Promise<CpuMeter> {
    const deadline = performance.now() + SETTLE_MAX_MS
    let last = serverCpuMs?.()
    while (last !== undefined && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, QUIET_WINDOW_MS))
      const now = serverCpuMs?.()
      if (now === undefined || now - last < QUIET_WINDOW_MS * QUIET_SHARE) break
      last = now
    }
    return new CpuMeter(serverCpuMs)
  }

  /**
   * `clientCpuUsPerMsg` and, when the servers' CPU could be read at both ends,
   * `serverCpuUsPerMsg`, over `messages` (none when 0).
   */
  perMessage(messages: number): Record<string, number> {
    if (messages <= 0) return {}
    const client = process.cpuUsage(this.#clientStart)
    const metrics: Record<string, number> = {
      clientCpuUsPerMsg: round((client.user + client.system) / messages, 1),
    }
    const end = this.#serverCpuMs?.()
    // /proc counts in 10 ms ticks per process: below SERVER_CPU_MIN_MS the figure would be
    // mostly rounding (the suite's 300 one-at-a-time sends), so it is left out.
    if (
      this.#serverStartMs !== undefined &&
      end !== undefined &&
      end - this.#serverStartMs >= SERVER_CPU_MIN_MS
    ) {
      metrics.serverCpuUsPerMsg = round(((end - this.#serverStartMs) * 1000) / messages, 1)
    }
    return metrics
  }
}
