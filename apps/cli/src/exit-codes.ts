import { CommanderError } from 'commander'
import { formatDuration } from './durations'
import { UsageError } from './errors'

/** The exit status of `mq`: what scripts can branch on. */
export const ExitCode = {
  Ok: 0,
  /** The command line was wrong (unknown flag, bad value, missing argument). */
  Usage: 1,
  /** The queue (or other named thing) does not exist. */
  NotFound: 2,
  /** The cluster did not answer before the deadline, or kept failing with retriable errors. */
  Unavailable: 3,
  /** Anything else: the server refused the request, an internal error, a lost lease. */
  Other: 4,
  /** No token, a wrong token, or a token whose roles do not allow the command. */
  Denied: 5,
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/** What `mq` reports for a failure: its exit code and a one-line message for stderr. */
export interface Failure {
  readonly exitCode: ExitCode
  readonly message: string
}

/** Where the failing command was pointed, to name in messages about an unreachable cluster. */
export interface FailureContext {
  readonly servers: readonly string[]
  readonly timeoutMs: number
}

/**
 * Classifies an error thrown by a command into an exit code and a one-line message. Errors of
 * the SDK are recognised by their stable `code` (not by class identity), so that errors from
 * another copy of the SDK classify the same.
 */
export function classify(error: unknown, context?: FailureContext): Failure {
  if (error instanceof CommanderError) {
    return { exitCode: error.exitCode === 0 ? ExitCode.Ok : ExitCode.Usage, message: oneLine(error.message) }
  }
  if (error instanceof UsageError) return { exitCode: ExitCode.Usage, message: oneLine(error.message) }
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : ''
  const message = oneLine(error instanceof Error ? error.message : String(error))
  if (code === 'QUEUE_NOT_FOUND') return { exitCode: ExitCode.NotFound, message }
  if (code === 'UNAUTHENTICATED' || code === 'PERMISSION_DENIED')
    return { exitCode: ExitCode.Denied, message }
  // The server rejected a value given on the command line (a bound of the queue config).
  if (code === 'INVALID_ARGUMENT') return { exitCode: ExitCode.Usage, message }
  const retriable = (error as { retriable?: unknown })?.retriable === true
  // A limit that held until the SDK gave up (a full queue): the cluster answered.
  if (code === 'LIMIT_EXCEEDED') return { exitCode: ExitCode.Unavailable, message }
  if ((error as { connectionRefused?: unknown })?.connectionRefused === true) {
    const where = context ? ` at ${context.servers.join(',')}` : ''
    return {
      exitCode: ExitCode.Unavailable,
      message: `nothing listens${where}: ${message} (is the cluster started? check --servers or MQ_SERVERS; --timeout waits that long for it)`,
    }
  }
  if (code === 'UNAVAILABLE' || retriable) {
    const why = message
      .replace(/^gave up after \d+ attempts in \d+ ms: /, '')
      .replace(/ Resolution note:\s*$/, '')
    const text = context
      ? `the cluster at ${context.servers.join(',')} did not answer within ${formatDuration(context.timeoutMs)}: ${why} (check --servers or MQ_SERVERS, or raise --timeout)`
      : `the cluster is unavailable: ${why}`
    return { exitCode: ExitCode.Unavailable, message: text }
  }
  return { exitCode: ExitCode.Other, message }
}

/** Collapses a multi-line message into one line. */
export function oneLine(text: string): string {
  return text
    .split(/\r?\n/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .join(' ')
    .replace(/^error: /, '')
}
