import { round } from '../histogram'

/**
 * CPU time per message of a measured phase: the servers' (every node's process, user + system,
 * when the bench knows their PIDs) and this client's. On a shared machine a rate swings with
 * the neighbours' load while the CPU a message costs hardly moves, so comparing two builds by
 * it takes fewer runs than by msgs/s.
 */
export class CpuMeter {
  readonly #serverStartMs: number | undefined
  readonly #clientStart: NodeJS.CpuUsage

  private constructor(readonly serverCpuMs: (() => number | undefined) | undefined) {
    this.#serverStartMs = serverCpuMs?.()
    this.#clientStart = process.cpuUsage()
  }

  /** Starts measuring; `serverCpuMs` reads the servers' CPU time so far (BenchCluster.serverCpuMs). */
  static start(serverCpuMs?: () => number | undefined): CpuMeter {
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
    const end = this.serverCpuMs?.()
    if (this.#serverStartMs !== undefined && end !== undefined) {
      metrics.serverCpuUsPerMsg = round(((end - this.#serverStartMs) * 1000) / messages, 1)
    }
    return metrics
  }
}
