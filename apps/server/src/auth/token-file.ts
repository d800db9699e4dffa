import { readFileSync } from 'node:fs'
import {
  parseRole,
  ROLES_PER_TOKEN_MAX,
  type Role,
  TOKEN_NAME_PATTERN,
  TOKEN_SHA256_PATTERN,
  tokenDigest,
} from '@mq/meta-service'
import { ConfigError, jsonSyntaxProblem, TOKEN_CHARS_MIN } from '../config'

export type { Role }
export { TOKEN_CHARS_MIN, tokenDigest }

/** One client token: a name for logs, the SHA-256 of its secret, its roles and expiry. */
export interface TokenEntry {
  readonly name: string
  readonly sha256: string
  readonly roles: readonly Role[]
  /** When calls with it start to be refused (ms since the epoch); 0 = never. */
  readonly expiresAtMs: number
}

/** How a token file gives an expiry: an ISO 8601 date, with a time and zone or a day (UTC). */
const EXPIRES_AT_PATTERN = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/

/** Tokens in the file, at most. */
export const TOKENS_MAX = 10_000

/** The keys a token of the file may have (any other is refused, as the config file's are). */
const TOKEN_ENTRY_KEYS: ReadonlySet<string> = new Set(['name', 'token', 'sha256', 'roles', 'expiresAt'])

/**
 * Reads the token file (`--auth-file`):
 *
 * ```json
 * { "tokens": [
 *   { "name": "ops", "sha256": "<hex of sha256(token)>", "roles": ["admin"] },
 *   { "name": "orders-app", "token": "<secret>", "roles": ["producer:orders.*", "consumer:orders.*"],
 *     "expiresAt": "2027-06-30T00:00:00Z" }
 * ] }
 * ```
 *
 * Each entry gives its secret as `sha256` (preferred: the file then holds no secret) or as
 * `token`. Roles: `admin`, `producer:PATTERN`, `consumer:PATTERN`, `viewer:PATTERN`, where PATTERN is a queue
 * name in which `*` matches any run of characters. `expiresAt` (optional; none = never): from
 * then on calls with the token are refused. Throws ConfigError naming the first
 * problem (the server then exits 2).
 */
export function loadTokenFile(path: string): TokenEntry[] {
  let text: string
  try {
    // A byte order mark (as the config file's) is dropped.
    text = readFileSync(path, 'utf8').replace(/^\uFEFF/, '')
  } catch (error) {
    throw new ConfigError(`auth file ${path}: ${(error as Error).message}`, { cause: error })
  }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (error) {
    // Not the parser's message as is: it quotes the file, whose text may hold a token.
    throw new ConfigError(`auth file ${path} is not valid JSON: ${jsonSyntaxProblem(error, text)}`)
  }
  return parseTokenFile(raw, path)
}

/** Validates a parsed token file (see loadTokenFile); `where` names it in errors. */
export function parseTokenFile(raw: unknown, where: string): TokenEntry[] {
  const tokens = (raw as { tokens?: unknown } | null)?.tokens
  if (!Array.isArray(tokens)) throw new ConfigError(`auth file ${where}: expected { "tokens": [ … ] }`)
  if (tokens.length > TOKENS_MAX) throw new ConfigError(`auth file ${where}: more than ${TOKENS_MAX} tokens`)
  const names = new Set<string>()
  const digests = new Set<string>()
  return tokens.map((t: unknown, i) => {
    const at = `auth file ${where}, token ${i + 1}`
    const entry = t as {
      name?: unknown
      token?: unknown
      sha256?: unknown
      roles?: unknown
      expiresAt?: unknown
    }
    if (typeof entry?.name !== 'string' || !TOKEN_NAME_PATTERN.test(entry.name)) {
      throw new ConfigError(`${at}: "name" must be 1-64 letters, digits, '.', '_' or '-'`)
    }
    // A misspelt key was ignored: `"expires_at"` made a token that never expires, without a word.
    const unknown = Object.keys(entry).find((k) => !TOKEN_ENTRY_KEYS.has(k))
    if (unknown !== undefined)
      throw new ConfigError(
        `${at} ("${entry.name}"): unknown key ${JSON.stringify(unknown)}; a token has "name", "token" or "sha256", "roles" and "expiresAt"`,
      )
    if (names.has(entry.name)) throw new ConfigError(`${at}: the name "${entry.name}" is used twice`)
    names.add(entry.name)
    let sha256: string
    if (typeof entry.sha256 === 'string' && entry.token === undefined) {
      if (!TOKEN_SHA256_PATTERN.test(entry.sha256))
        throw new ConfigError(`${at}: "sha256" must be 64 lowercase hex digits`)
      sha256 = entry.sha256
    } else if (typeof entry.token === 'string' && entry.sha256 === undefined) {
      if (entry.token.length < TOKEN_CHARS_MIN) {
        throw new ConfigError(`${at}: a token must have at least ${TOKEN_CHARS_MIN} characters`)
      }
      // Clients send it in a header: the SDK, mq and the console refuse any other (not quoted).
      if (!/^[\x21-\x7e]+$/.test(entry.token)) {
        throw new ConfigError(
          `${at} ("${entry.name}"): a token must be printable ASCII without spaces (clients send it in a header; the SDK, mq and the web console refuse any other)`,
        )
      }
      sha256 = tokenDigest(entry.token)
    } else {
      throw new ConfigError(`${at} ("${entry.name}"): give exactly one of "token" or "sha256"`)
    }
    if (digests.has(sha256)) throw new ConfigError(`${at} ("${entry.name}"): the same secret is used twice`)
    digests.add(sha256)
    if (!Array.isArray(entry.roles) || entry.roles.length === 0 || entry.roles.length > ROLES_PER_TOKEN_MAX) {
      throw new ConfigError(`${at} ("${entry.name}"): "roles" must list 1-${ROLES_PER_TOKEN_MAX} roles`)
    }
    return {
      name: entry.name,
      sha256,
      roles: entry.roles.map((r) => roleOf(r, `${at} ("${entry.name}")`)),
      expiresAtMs: expiryOf(entry.expiresAt, `${at} ("${entry.name}")`),
    }
  })
}

/** The ms since the epoch of a token's `expiresAt` (0 when absent); throws ConfigError naming `at`. */
function expiryOf(text: unknown, at: string): number {
  if (text === undefined) return 0
  const ms = typeof text === 'string' && EXPIRES_AT_PATTERN.test(text) ? Date.parse(text) : Number.NaN
  if (!Number.isFinite(ms) || ms <= 0 || !isCalendarDay((text as string).slice(0, 10))) {
    throw new ConfigError(
      `${at}: "expiresAt" must be an ISO 8601 date such as "2027-06-30T00:00:00Z" or "2027-06-30" (UTC), not ${JSON.stringify(text)}`,
    )
  }
  return ms
}

/** Parses a role of the token file; throws ConfigError naming `at` when it is not one. */
function roleOf(text: unknown, at: string): Role {
  const role = parseRole(text)
  if (!role)
    throw new ConfigError(
      `${at}: role ${JSON.stringify(text)} is not admin, producer:PATTERN, consumer:PATTERN or viewer:PATTERN`,
    )
  return role
}

/** Whether `yyyy-mm-dd` is a day of the calendar (Date.parse takes 2027-02-30 as March 2). */
function isCalendarDay(day: string): boolean {
  const [y, m, d] = day.split('-').map(Number) as [number, number, number]
  const date = new Date(Date.UTC(y, m - 1, d))
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d
}
