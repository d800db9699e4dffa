import { ErrorCode, TOKEN_TTL_MS_MAX } from '@mq/protocol'
import type { MetaResult } from './meta-state'
import { parseRole, ROLES_PER_TOKEN_MAX, TOKEN_SHA256_PATTERN, tokenNameProblem } from './token-roles'

/** A client token as the meta group keeps it: never the secret, only its SHA-256. */
export interface TokenRecord {
  readonly name: string
  readonly sha256: string
  readonly roles: readonly string[]
  readonly createdAtMs: number
  /** When it expires (ms since the epoch, the group's clock at creation + its TTL); 0 = never. */
  readonly expiresAtMs: number
}

/** The longest lifetime a token may be given: 10 years (0 = it never expires; @mq/protocol). */
export { TOKEN_TTL_MS_MAX }

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

  /**
   * Adds a token made at `nowMs` (the entry's time) valid for `ttlMs` (0 = for ever). An
   * expired token is kept (listed as such, refused by the servers) until it is deleted.
   */
  put(
    name: unknown,
    sha256: unknown,
    roles: unknown,
    nowMs: number,
    ttlMs: unknown = 0,
  ): MetaResult<TokenRecord> {
    if (typeof name !== 'string' || tokenNameProblem(name)) return fail(tokenNameProblem(name) as string)
    if (this.#tokens.has(name)) return fail(`a token named ${name} exists; delete it first`)
    if (typeof sha256 !== 'string' || !TOKEN_SHA256_PATTERN.test(sha256)) {
      return fail('a token is stored as the 64 hex digits of its SHA-256')
    }
    if (!Array.isArray(roles) || roles.length === 0 || roles.length > ROLES_PER_TOKEN_MAX) {
      return fail(`a token needs 1-${ROLES_PER_TOKEN_MAX} roles`)
    }
    const bad = roles.find((r) => parseRole(r) === undefined)
    if (bad !== undefined) {
      return fail(
        `role ${JSON.stringify(bad)} is not admin, producer:PATTERN, consumer:PATTERN or viewer:PATTERN`,
      )
    }
    if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 0 || ttlMs > TOKEN_TTL_MS_MAX) {
      return fail(
        `a token's lifetime must be 0 (it never expires) or 1-${TOKEN_TTL_MS_MAX} ms (10 years), not ${String(ttlMs)}`,
      )
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
    const record: TokenRecord = {
      name,
      sha256,
      roles: [...(roles as string[])],
      createdAtMs: nowMs,
      expiresAtMs: ttlMs === 0 ? 0 : nowMs + ttlMs,
    }
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
    // (Images of versions before token lifetimes have no expiresAtMs: those never expire.)
    for (const r of records) this.#tokens.set(r.name, { ...r, expiresAtMs: r.expiresAtMs ?? 0 })
    this.#version++
  }
}

function fail(message: string): MetaResult<never> {
  return { ok: false, code: ErrorCode.InvalidArgument, message }
}
