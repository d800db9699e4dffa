/** How a client waits between retries: exponential growth with full jitter, capped. */
export interface BackoffPolicy {
  /** The first retry waits up to this long. */
  readonly initialMs: number
  /** No wait is longer than this. */
  readonly maxMs: number
  /** Each retry's ceiling is the previous one times this. */
  readonly multiplier: number
}

export const DEFAULT_BACKOFF: BackoffPolicy = { initialMs: 25, maxMs: 1_000, multiplier: 2 }

/**
 * Returns the wait before retry number `attempt` (0 = the first retry): a uniform draw from
 * [0, min(maxMs, initialMs · multiplier^attempt)] ("full jitter"), so that many clients that
 * failed together do not retry together. `random` returns a float in [0, 1).
 */
export function backoffMs(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.initialMs * policy.multiplier ** Math.max(0, attempt))
  return Math.floor(random() * ceiling)
}

/** Resolves after `ms`, or at once when one of `signals` aborts. */
export function delay(ms: number, ...signals: readonly (AbortSignal | undefined)[]): Promise<void> {
  return new Promise((resolve) => {
    if (signals.some((s) => s?.aborted) || ms <= 0) {
      resolve()
      return
    }
    const timer = setTimeout(done, ms)
    function done(): void {
      clearTimeout(timer)
      for (const s of signals) s?.removeEventListener('abort', done)
      resolve()
    }
    for (const s of signals) s?.addEventListener('abort', done, { once: true })
  })
}
