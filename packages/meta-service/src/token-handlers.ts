import { createHash, randomBytes } from 'node:crypto'
import {
  FORMAT_LEVEL_TOKEN_TTL,
  FORMAT_LEVEL_VIEWER_ROLE,
  InvalidArgumentError,
  type MetaServer,
  mqError,
  unaryHandler as unary,
} from '@mq/protocol'
import { requireFormatLevel } from './format-gate'
import type { MetaGroupPort } from './meta-handlers'
import type { TokenRecord } from './token-registry'
import { parseRole, ROLES_BYTES_MAX, tokenNameProblem } from './token-roles'

/** Random bytes of a new token's secret (192 bits), sent as `mq_` + base64url. */
const SECRET_BYTES = 24

/** The hex SHA-256 of a token's secret: how tokens are stored and looked up. */
export function tokenDigest(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex')
}

/**
 * The Meta service's token RPCs. CreateToken makes the secret here (on the meta leader,
 * outside the deterministic state machine), proposes only its SHA-256, and returns the
 * secret once. Who may call them (admin) is the server's access control's business.
 */
export function tokenHandlers(
  meta: MetaGroupPort,
  nameTaken: (name: string) => string | undefined = () => undefined,
): Pick<MetaServer, 'createToken' | 'deleteToken' | 'listTokens'> {
  /** A token's name, checked before its command is proposed (not replicated when it is no name). */
  const checkName = (name: string): void => {
    const problem = tokenNameProblem(name)
    if (problem) throw new InvalidArgumentError(problem)
  }
  return {
    createToken: unary(async (req) => {
      checkName(req.name)
      const taken = nameTaken(req.name)
      if (taken) throw new InvalidArgumentError(taken)
      const rolesBytes = req.roles.reduce((n, r) => n + Buffer.byteLength(r), 0)
      if (rolesBytes > ROLES_BYTES_MAX) {
        throw new InvalidArgumentError(
          `the token's roles take ${rolesBytes} bytes, over the ${ROLES_BYTES_MAX} a token may have: give fewer or shorter patterns (a pattern's * matches many queues)`,
        )
      }
      const viewer = req.roles.some((r) => parseRole(r)?.role === 'viewer')
      if (req.ttlMs > 0 || viewer) {
        const state = await meta.read()
        // A meta replica of an earlier version would keep the token for ever (format-level.ts).
        if (req.ttlMs > 0) requireFormatLevel(state, 'a token can expire', FORMAT_LEVEL_TOKEN_TTL)
        // One of an earlier version would refuse the entry that the others apply.
        if (viewer) requireFormatLevel(state, 'a token can have a viewer role', FORMAT_LEVEL_VIEWER_ROLE)
      }
      const token = `mq_${randomBytes(SECRET_BYTES).toString('base64url')}`
      const r = await meta.propose({
        type: 'putToken',
        name: req.name,
        sha256: tokenDigest(token),
        roles: req.roles,
        ttlMs: req.ttlMs,
      })
      if (!r.ok) throw mqError(r.code, r.message)
      const record = r.value as TokenRecord
      return { name: record.name, token, expiresAtMs: record.expiresAtMs }
    }),
    deleteToken: unary(async (req) => {
      checkName(req.name)
      const r = await meta.propose({ type: 'deleteToken', name: req.name })
      if (!r.ok) throw mqError(r.code, r.message)
      return {}
    }),
    listTokens: unary(async () => {
      const state = await meta.read()
      return {
        tokens: state.tokens.list().map((t) => ({
          name: t.name,
          roles: [...t.roles],
          createdAtMs: t.createdAtMs,
          expiresAtMs: t.expiresAtMs,
        })),
      }
    }),
  }
}
