import { UnauthenticatedError } from '@mq/protocol'
import type { AccessControl } from '../auth/access'

/**
 * Who may scrape `/metrics`, and what of it: given the request's `Authorization` header, the
 * queues the caller sees (undefined: all of them), or an UnauthenticatedError. On a node that
 * authenticates clients (`--auth-file`) a scrape needs a token: an admin one reads everything,
 * any other the series of its own queues and those that name no queue. `open`
 * (`--metrics-open`), or a node that checks no tokens, lets anyone read everything.
 */
export function metricsReader(
  access: AccessControl,
  open: boolean,
): (authorization: string | undefined) => ((queue: string) => boolean) | undefined {
  return (authorization) => {
    if (open || !access.clientAuth) return undefined
    const principal = access.authenticateHttp(authorization)
    if (principal.kind === 'anonymous') {
      throw new UnauthenticatedError(
        'this node requires a token for /metrics: send "Authorization: Bearer <token>" (Prometheus: the scrape config\'s authorization.credentials_file), or start it with --metrics-open',
      )
    }
    return access.scopeOf(principal)?.sees
  }
}
