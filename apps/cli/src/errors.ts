/**
 * The command line was wrong in a way commander cannot see: a flag value out of range, two
 * flags that exclude each other, nothing to do. Exits with ExitCode.Usage.
 */
export class UsageError extends Error {
  override readonly name = 'UsageError'
  readonly code = 'USAGE'
  readonly retriable = false
}

/**
 * A failure with what the command had done before it, e.g. "produced 10 of 12 messages".
 * Carries the `code` and `retriable` flag of its cause, so it exits as the cause would.
 */
export class CommandError extends Error {
  override readonly name = 'CommandError'
  readonly code: string | undefined
  readonly retriable: boolean

  constructor(message: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause)
    super(`${message}: ${why}`, { cause })
    const c = cause as { code?: unknown; retriable?: unknown } | undefined
    this.code = typeof c?.code === 'string' ? c.code : undefined
    this.retriable = c?.retriable === true
  }
}

/**
 * A command stopped by Ctrl-C, a signal or stdout's reader gone before its end, with what it
 * had done: exits with the interrupt's code (130 for Ctrl-C, 0 for EPIPE).
 */
export class InterruptedError extends Error {
  override readonly name = 'InterruptedError'
  readonly code = 'INTERRUPTED'
  readonly retriable = false

  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message)
  }
}
