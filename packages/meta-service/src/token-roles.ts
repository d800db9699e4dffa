/**
 * The grammar of client-token roles, shared by the servers' token file and the tokens the
 * meta group keeps: `admin` may do everything; `producer:PATTERN` and `consumer:PATTERN`
 * only on queues whose names match PATTERN, where `*` matches any run of characters;
 * `viewer:PATTERN` only sees those queues (lists, describes and reads their stats: a
 * dashboard's or a monitor's token, which neither sends nor takes messages).
 */
export type Role =
  | { readonly role: 'admin' }
  | {
      readonly role: 'producer' | 'consumer' | 'viewer'
      readonly pattern: string
      readonly matches: (queue: string) => boolean
    }

/** Names of tokens: 1-64 letters, digits, '.', '_' or '-'. */
export const TOKEN_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/

/** Undefined when `name` is a valid token name, else a sentence saying what is wrong with it. */
export function tokenNameProblem(name: unknown): string | undefined {
  if (typeof name === 'string' && TOKEN_NAME_PATTERN.test(name)) return undefined
  return `token name ${JSON.stringify(name)} must be 1-64 letters, digits, '.', '_' or '-'`
}
/** A stored token's secret: the hex SHA-256 of it. */
export const TOKEN_SHA256_PATTERN = /^[0-9a-f]{64}$/
/** Roles of one token, at most. */
export const ROLES_PER_TOKEN_MAX = 100

/**
 * UTF-8 bytes of one token's roles together, at most (checked by CreateToken before it
 * proposes): 10,000 tokens of 100 roles of 256-character patterns made a 256-MiB token list,
 * past what a ListTokens answer, a heartbeat's or the meta image carry (an audit).
 */
export const ROLES_BYTES_MAX = 4_096

/**
 * Parses one role (`admin`, `producer:PATTERN`, `consumer:PATTERN`, `viewer:PATTERN`);
 * undefined when it is none of them.
 */
export function parseRole(text: unknown): Role | undefined {
  if (text === 'admin') return { role: 'admin' }
  const match = typeof text === 'string' ? /^(producer|consumer|viewer):(.{1,256})$/s.exec(text) : null
  if (!match) return undefined
  const pattern = match[2] as string
  return {
    role: match[1] as 'producer' | 'consumer' | 'viewer',
    pattern,
    matches: (queue) => globMatches(pattern, queue),
  }
}

/** The role as written (`admin`, `producer:orders.*`). */
export function formatRole(role: Role): string {
  return role.role === 'admin' ? 'admin' : `${role.role}:${role.pattern}`
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
