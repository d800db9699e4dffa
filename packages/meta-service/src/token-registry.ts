import { ErrorCode } from '@mq/protocol'
import type { MetaResult } from './meta-state'
import { parseRole, ROLES_PER_TOKEN_MAX, TOKEN_NAME_PATTERN, TOKEN_SHA256_PATTERN } from './token-roles'

/** A client token as the meta group keeps it: never the secret, only its SHA-256. */
export interface TokenRecord {
  readonly name: string
  readonly sha256: string
  readonly roles: readonly string[]
  readonly createdAtMs: number
}

/** Tokens the meta group keeps, at most. */
export const TOKENS_MAX = 10_000

/**
 * The client tokens of the meta state machine. Deterministic, like the rest of MetaState:
 * changes only through `put`/`remove` (applied commands); a bad one returns an error result
 * and changes nothing. `version` grows with every change (for caches of the lookup table).
 */
export class TokenRegistry {
  readonly #tokens = new Map<string, TokenRecord>()
  #version = 0

  get version(): number {
    return this.#version
  }

  list(): TokenRecord[] {
    return [...this.#tokens.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  }

  put(name: unknown, sha256: unknown, roles: unknown, nowMs: number): MetaResult<TokenRecord> {
    if (typeof name !== 'string' || !TOKEN_NAME_PATTERN.test(name)) {
      return fail(`token name ${JSON.stringify(name)} must be 1-64 letters, digits, '.', '_' or '-'`)
    }
    if (this.#tokens.has(name)) return fail(`a token named ${name} exists; delete it first`)
    if (typeof sha256 !== 'string' || !TOKEN_SHA256_PATTERN.test(sha256)) {
      return fail('a token is stored as the 64 hex digits of its SHA-256')
    }
    if (!Array.isArray(roles) || roles.length === 0 || roles.length > ROLES_PER_TOKEN_MAX) {
      return fail(`a token needs 1-${ROLES_PER_TOKEN_MAX} roles`)
    }
    const bad = roles.find((r) => parseRole(r) === undefined)
    if (bad !== undefined) {
      return fail(`role ${JSON.stringify(bad)} is not admin, producer:PATTERN or consumer:PATTERN`)
    }
    if ([...this.#tokens.values()].some((t) => t.sha256 === sha256))
      return fail('that secret is in use by another token')
    if (this.#tokens.size >= TOKENS_MAX) {
      return {
        ok: false,
        code: ErrorCode.LimitExceeded,
        message: `the cluster already has ${TOKENS_MAX} tokens`,
      }
    }
    const record: TokenRecord = { name, sha256, roles: [...(roles as string[])], createdAtMs: nowMs }
    this.#tokens.set(name, record)
    this.#version++
    return { ok: true, value: record }
  }

  remove(name: unknown): MetaResult<null> {
    if (typeof name !== 'string' || !this.#tokens.delete(name))
      return fail(`no token is named ${String(name)}`)
    this.#version++
    return { ok: true, value: null }
  }

  /** Replaces every token (restoring a snapshot). */
  replace(records: readonly TokenRecord[]): void {
    this.#tokens.clear()
    for (const r of records) this.#tokens.set(r.name, r)
    this.#version++
  }
}

function fail(message: string): MetaResult<never> {
  return { ok: false, code: ErrorCode.InvalidArgument, message }
}
