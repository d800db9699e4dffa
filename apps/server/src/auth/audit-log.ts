import { status } from '@grpc/grpc-js'
import { boundedText } from '@mq/protocol'
import type { Logger } from '../log'
import type { Principal } from './access'

/**
 * The request fields an audit line keeps: what an administrative call was about. None holds a
 * secret (a token's secret is made by the server and only in its answer) or a message body.
 */
const AUDITED_FIELDS = [
  'name',
  'config',
  'update',
  'groups',
  'groupId',
  'toNodeId',
  'nodeId',
  'voters',
  'factor',
  'roles',
  'ttlMs',
  'max',
  'throughPlace',
  'placeOnly',
] as const

/**
 * Characters of JSON one field of an audit line keeps at most: the request is read before
 * its caller's role is checked, and a line must not grow with what a caller sends (a name of
 * 100 KB once made a line of 100 KB).
 */
export const AUDIT_FIELD_CHARS_MAX = 512

/** `value`, or the start of its JSON (cut, with `…` and its length) when that is too long. */
function bounded(value: unknown): unknown {
  const json = JSON.stringify(value) ?? ''
  return json.length <= AUDIT_FIELD_CHARS_MAX ? value : boundedText(json, AUDIT_FIELD_CHARS_MAX)
}

/** What an audit line says of the request: its queue and partition, and the fields above that it has. */
export function auditedRequest(request: unknown): Record<string, unknown> {
  const r = (typeof request === 'object' && request !== null ? request : {}) as Record<string, unknown>
  const out: Record<string, unknown> = {}
  const target = r.target as { queue?: unknown; partition?: unknown } | undefined
  if (target && typeof target === 'object') {
    out.queue = bounded(target.queue)
    out.partition = bounded(target.partition)
  }
  for (const field of AUDITED_FIELDS) if (r[field] !== undefined) out[field] = bounded(r[field])
  return out
}

/** Who called, as an audit line names it: `token:NAME`, `peer` or `anonymous`. */
export function principalName(p: Principal): string {
  return p.kind === 'token' ? `token:${p.name}` : p.kind
}

/**
 * How long after its caller went away a handler may still answer into its call's audit line;
 * past it the line is written without the outcome (a handler that never answers left none).
 */
export const AUDIT_ANSWER_WAIT_MS = 60_000

/**
 * One administrative call's audit line, written once when the call ends (answered, refused or
 * failed): `{"audit":{"method","principal","peer","code","ms",…request fields}}` at info level,
 * with the message `audit: METHOD by PRINCIPAL: CODE`; `"cancelled":true` when the caller had
 * gone (cancelled, or past its deadline) before the handler answered — then the handler's
 * answer still ends the line, or, `answerWaitMs` later without one, the line is written as
 * CANCELLED saying the outcome is unknown (its `ms` then counts the wait). Operators keep them
 * with the node's log (`jq 'select(.audit)'`).
 */
export class AuditRecord {
  readonly #log: Logger
  readonly #method: string
  readonly #peer: string
  readonly #startMs = performance.now()
  #principal = 'anonymous'
  #request: Record<string, unknown> = {}
  #ended = false
  #cancelled = false
  #answered = false
  readonly #answerWaitMs: number
  #noAnswer: ReturnType<typeof setTimeout> | undefined

  constructor(log: Logger, method: string, peer: string, answerWaitMs = AUDIT_ANSWER_WAIT_MS) {
    this.#log = log
    this.#method = method
    this.#peer = peer
    this.#answerWaitMs = answerWaitMs
  }

  by(principal: Principal): void {
    this.#principal = principalName(principal)
  }

  request(message: unknown): void {
    this.#request = auditedRequest(message)
  }

  /**
   * The caller went away while the handler had the request. grpc-js then drops the handler's
   * answer without a status: its answer message (`answered`) ends the line as OK.
   */
  cancelled(): void {
    if (this.#ended) return
    this.#cancelled = true
    if (this.#answered) {
      this.end(status.OK, 'OK')
      return
    }
    this.#noAnswer ??= setTimeout(
      () =>
        this.end(
          status.CANCELLED,
          `the caller went away and the handler had not answered ${Math.round(this.#answerWaitMs / 1000)} s later: the outcome is unknown`,
        ),
      this.#answerWaitMs,
    )
    this.#noAnswer.unref?.()
  }

  /** The handler of a unary call answered: the call succeeded, whether or not its caller is still there. */
  answered(): void {
    this.#answered = true
    if (this.#cancelled) this.end(status.OK, 'OK')
  }

  /** Writes the line (only the first time): `code` is the call's gRPC status code. */
  end(code: number, details: string): void {
    if (this.#ended) return
    this.#ended = true
    clearTimeout(this.#noAnswer)
    const codeName = status[code] ?? String(code)
    this.#log.info(
      {
        audit: {
          method: this.#method,
          principal: this.#principal,
          peer: this.#peer,
          code: codeName,
          ...(code === status.OK ? {} : { details: bounded(details) }),
          ...(this.#cancelled ? { cancelled: true } : {}),
          ms: Math.round(performance.now() - this.#startMs),
          ...this.#request,
        },
      },
      `audit: ${this.#method} by ${this.#principal}: ${codeName}`,
    )
  }
}
