import { CommanderError } from 'commander'
import { formatDuration } from './durations'
import { InterruptedError, UsageError } from './errors'

/** The exit status of `mq`: what scripts can branch on. */
export const ExitCode = {
  Ok: 0,
  /** The command line was wrong (unknown flag, bad value, missing argument). */
  Usage: 1,
  /** The named thing does not exist: a queue, a node, a Raft group, a token. */
  NotFound: 2,
  /** The cluster did not answer before the deadline, or kept failing with retriable errors. */
  Unavailable: 3,
  /** Anything else: the server refused the request, an internal error, a lost lease. */
  Other: 4,
  /** A queue or token of that name exists already (shares 4 with Other: scripts had it as such). */
  AlreadyExists: 4,
  /** No token, a wrong token, or a token whose roles do not allow the command. */
  Denied: 5,
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/** What `mq` reports for a failure: its exit code and a one-line message for stderr. */
export interface Failure {
  /** An ExitCode, or an interrupt's (128 + signal number, InterruptedError). */
  readonly exitCode: number
  readonly message: string
}

/** Where the failing command was pointed, to name in messages about an unreachable cluster. */
export interface FailureContext {
  readonly servers: readonly string[]
  readonly timeoutMs: number
  /** Whether the command spoke TLS (--tls-ca or a client certificate), to hint at a mismatch. */
  readonly tls?: boolean
}

/**
 * The servers' INVALID_ARGUMENT refusals that name something missing or already there (the
 * SDK has no typed error for nodes, groups and tokens, only for queues). Phrased as
 * packages/meta-service (meta-state.ts, token-registry.ts) and apps/server (controller.ts) word them.
 */
const NOT_FOUND_MESSAGES = [
  /\bnode \S+ is not registered\b/,
  /\bdata group \d+ does not exist\b/,
  /\bno token is named\b/,
]
const EXISTS_MESSAGES = [
  /\ba token named \S+ exists\b/,
  // A name a token of the serving node's --auth-file has (apps/server node.ts): taken too.
  /\btoken name \S+ is taken\b/,
]

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
  if (error instanceof InterruptedError) return { exitCode: error.exitCode, message: oneLine(error.message) }
  const code = typeof (error as { code?: unknown })?.code === 'string' ? (error as { code: string }).code : ''
  const message = oneLine(error instanceof Error ? error.message : String(error))
  // A command's failure caused by bad input it read (a stdin line too long, say).
  if (code === 'USAGE') return { exitCode: ExitCode.Usage, message }
  if (code === 'QUEUE_NOT_FOUND') return { exitCode: ExitCode.NotFound, message }
  if (code === 'QUEUE_EXISTS') return { exitCode: ExitCode.AlreadyExists, message }
  if (code === 'UNAUTHENTICATED' || code === 'PERMISSION_DENIED')
    return { exitCode: ExitCode.Denied, message }
  if (code === 'INVALID_ARGUMENT') {
    if (NOT_FOUND_MESSAGES.some((p) => p.test(message))) return { exitCode: ExitCode.NotFound, message }
    if (EXISTS_MESSAGES.some((p) => p.test(message))) return { exitCode: ExitCode.AlreadyExists, message }
    // The server rejected a value given on the command line (a bound of the queue config).
    return { exitCode: ExitCode.Usage, message }
  }
  const retriable = (error as { retriable?: unknown })?.retriable === true
  // A limit that held until the SDK gave up (a full queue): the cluster answered.
  if (code === 'LIMIT_EXCEEDED') return { exitCode: ExitCode.Unavailable, message }
  if ((error as { connectionRefused?: unknown })?.connectionRefused === true) {
    const where = context ? ` at ${context.servers.join(',')}` : ''
    const why = connectionCause(message).replace(/ \((\d+ attempts); [^)]*\?\)/, ' ($1)')
    if (/Protocol error$/i.test(why))
      return {
        exitCode: ExitCode.Unavailable,
        message: `no gRPC server${where}: ${why} (${NOT_GRPC_HINT})`,
      }
    return {
      exitCode: ExitCode.Unavailable,
      message: `nothing listens${where}: ${why} (is the cluster started? check --servers or MQ_SERVERS; --timeout waits that long for it)`,
    }
  }
  if (code === 'UNAVAILABLE' || retriable) {
    const why = connectionCause(message)
    const tlsHint = context ? tlsMismatchHint(why, context.tls === true) : undefined
    const text = context
      ? `the cluster at ${context.servers.join(',')} did not answer within ${formatDuration(context.timeoutMs)}: ${why} (${tlsHint ?? 'check --servers or MQ_SERVERS, or raise --timeout'})`
      : `the cluster is unavailable: ${why}`
    return { exitCode: ExitCode.Unavailable, message: text }
  }
  return { exitCode: ExitCode.Other, message }
}

/** What an answer that is not HTTP/2 at all ("Protocol error") most likely means. */
const NOT_GRPC_HINT =
  "the server does not speak gRPC: is --servers a node's gRPC address (mq-server --listen), not its HTTP port (--http-listen)?"

/**
 * The cause of a connection failure without the wrapping of the SDK and grpc-js around it:
 * "gave up after N attempts in M ms: ", "No connection established. Last error: Error: ",
 * grpc-js's trailing "Resolution note:" and timestamps, OpenSSL's error-stack prefix.
 */
export function connectionCause(message: string): string {
  return message
    .replace(/^gave up after \d+ attempts in \d+ ms: /, '')
    .replace(/\s*Resolution note:\s*$/, '')
    .replace(/No connection established\. Last error: (?:Error: )?/g, '')
    .replace(/ \(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g, '')
    .replace(/\b[0-9A-F]+:error:[0-9A-F]+:SSL routines:[^:]*:([^:]+):\S*/g, 'TLS: $1')
    .replace(/[\s.]+$/, '')
}

/**
 * What a connection failure says of settings that do not match the server's: a TLS client's
 * handshake answered in plaintext ("wrong version number"), a plaintext client whose HTTP/2
 * connection the server dropped ("Failed to connect": it waited for a handshake), or an answer
 * that is not HTTP/2 at all ("Protocol error": a node's HTTP port given as a server).
 */
function tlsMismatchHint(why: string, tls: boolean): string | undefined {
  if (tls && /wrong version number|packet length too long|http request/i.test(why)) {
    return "the server answered in plaintext: your TLS settings probably do not match the server's; leave out --tls-ca and MQ_TLS_CA for a cluster without TLS"
  }
  if (!tls && /Failed to connect/.test(why)) {
    return "the server closed the connection: if it speaks TLS, your TLS settings probably do not match the server's; give its CA with --tls-ca or MQ_TLS_CA"
  }
  // grpc-js's word for an answer that is not HTTP/2 (an HTTP/1.1 server: a node's HTTP port).
  if (/^Protocol error$/i.test(why)) return NOT_GRPC_HINT
  return undefined
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
