import { status } from '@grpc/grpc-js'
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
  'roles',
  'ttlMs',
  'max',
] as const

/** What an audit line says of the request: its queue and partition, and the fields above that it has. */
export function auditedRequest(request: unknown): Record<string, unknown> {
  const r = (typeof request === 'object' && request !== null ? request : {}) as Record<string, unknown>
  const out: Record<string, unknown> = {}
  const target = r.target as { queue?: unknown; partition?: unknown } | undefined
  if (target && typeof target === 'object') {
    out.queue = target.queue
    out.partition = target.partition
  }
  for (const field of AUDITED_FIELDS) if (r[field] !== undefined) out[field] = r[field]
  return out
}

/** Who called, as an audit line names it: `token:NAME`, `peer` or `anonymous`. */
export function principalName(p: Principal): string {
  return p.kind === 'token' ? `token:${p.name}` : p.kind
}

/**
 * One administrative call's audit line, written once when the call ends (answered, refused or
 * failed): `{"audit":{"method","principal","peer","code","ms",…request fields}}` at info level,
 * with the message `audit: METHOD by PRINCIPAL: CODE`. Operators keep them with the node's log
 * (`jq 'select(.audit)'`).
 */
export class AuditRecord {
  readonly #log: Logger
  readonly #method: string
  readonly #peer: string
  readonly #startMs = performance.now()
  #principal = 'anonymous'
  #request: Record<string, unknown> = {}
  #ended = false

  constructor(log: Logger, method: string, peer: string) {
    this.#log = log
    this.#method = method
    this.#peer = peer
  }

  by(principal: Principal): void {
    this.#principal = principalName(principal)
  }

  request(message: unknown): void {
    this.#request = auditedRequest(message)
  }

  /** Writes the line (only the first time): `code` is the call's gRPC status code. */
  end(code: number, details: string): void {
    if (this.#ended) return
    this.#ended = true
    const codeName = status[code] ?? String(code)
    this.#log.info(
      {
        audit: {
          method: this.#method,
          principal: this.#principal,
          peer: this.#peer,
          code: codeName,
          ...(code === status.OK ? {} : { details }),
          ms: Math.round(performance.now() - this.#startMs),
          ...this.#request,
        },
      },
      `audit: ${this.#method} by ${this.#principal}: ${codeName}`,
    )
  }
}
