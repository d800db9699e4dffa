import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ConfigError } from '../config'

/** What a token may do. `admin` may do everything; the others only on queues matching `pattern`. */
export type Role =
  | { readonly role: 'admin' }
  | {
      readonly role: 'producer' | 'consumer'
      readonly pattern: string
      readonly matches: (queue: string) => boolean
    }

/** One client token: a name for logs, the SHA-256 of its secret, and its roles. */
export interface TokenEntry {
  readonly name: string
  readonly sha256: string
  readonly roles: readonly Role[]
}

/** A plain token shorter than this is refused (guessable). */
export const TOKEN_CHARS_MIN = 16
/** Bounds on the file: tokens, and roles per token. */
export const TOKENS_MAX = 10_000
export const ROLES_PER_TOKEN_MAX = 100

/** The SHA-256 of a token, in hex: how tokens are stored and looked up. */
export function tokenDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex')
}

/**
 * Reads the token file (`--auth-file`):
 *
 * ```json
 * { "tokens": [
 *   { "name": "ops", "sha256": "<hex of sha256(token)>", "roles": ["admin"] },
 *   { "name": "orders-app", "token": "<secret>", "roles": ["producer:orders.*", "consumer:orders.*"] }
 * ] }
 * ```
 *
 * Each entry gives its secret as `sha256` (preferred: the file then holds no secret) or as
 * `token`. Roles: `admin`, `producer:PATTERN`, `consumer:PATTERN`, where PATTERN is a queue
 * name in which `*` matches any run of characters. Throws ConfigError naming the first
 * problem (the server then exits 2).
 */
export function loadTokenFile(path: string): TokenEntry[] {
  let raw: unknown
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'))
  } catch (error) {
    throw new ConfigError(`auth file ${path}: ${(error as Error).message}`, { cause: error })
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
    const entry = t as { name?: unknown; token?: unknown; sha256?: unknown; roles?: unknown }
    if (typeof entry?.name !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(entry.name)) {
      throw new ConfigError(`${at}: "name" must be 1-64 letters, digits, '.', '_' or '-'`)
    }
    if (names.has(entry.name)) throw new ConfigError(`${at}: the name "${entry.name}" is used twice`)
    names.add(entry.name)
    let sha256: string
    if (typeof entry.sha256 === 'string' && entry.token === undefined) {
      if (!/^[0-9a-f]{64}$/.test(entry.sha256))
        throw new ConfigError(`${at}: "sha256" must be 64 lowercase hex digits`)
      sha256 = entry.sha256
    } else if (typeof entry.token === 'string' && entry.sha256 === undefined) {
      if (entry.token.length < TOKEN_CHARS_MIN) {
        throw new ConfigError(`${at}: a token must have at least ${TOKEN_CHARS_MIN} characters`)
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
      roles: entry.roles.map((r) => parseRole(r, `${at} ("${entry.name}")`)),
    }
  })
}

/** Parses `admin`, `producer:PATTERN` or `consumer:PATTERN`. */
export function parseRole(text: unknown, at: string): Role {
  if (text === 'admin') return { role: 'admin' }
  const match = typeof text === 'string' ? /^(producer|consumer):(.{1,256})$/.exec(text) : null
  if (!match) {
    throw new ConfigError(
      `${at}: role ${JSON.stringify(text)} is not admin, producer:PATTERN or consumer:PATTERN`,
    )
  }
  const pattern = match[2] as string
  return {
    role: match[1] as 'producer' | 'consumer',
    pattern,
    matches: (queue) => globMatches(pattern, queue),
  }
}

/**
 * Whether `text` matches `pattern`, where `*` matches any run of characters (none too) and
 * every other character itself. O(pattern × text) at worst: no regular expression, so no
 * pattern can make a match slow.
 */
export function globMatches(pattern: string, text: string): boolean {
  let p = 0
  let t = 0
  let star = -1
  let resume = 0
  while (t < text.length) {
    if (p < pattern.length && pattern[p] !== '*' && pattern[p] === text[t]) {
      p++
      t++
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++
      resume = t
    } else if (star >= 0) {
      p = star + 1
      t = ++resume
    } else {
      return false
    }
  }
  while (p < pattern.length && pattern[p] === '*') p++
  return p === pattern.length
}
