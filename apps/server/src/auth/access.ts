import { timingSafeEqual } from 'node:crypto'
import { Metadata } from '@grpc/grpc-js'
import { formatRole, QUEUE_NAME_LENGTH_MAX, type QueueScope, queueNameProblem } from '@mq/meta-service'
import { PermissionDeniedError, UnauthenticatedError } from '@mq/protocol'
import { isMetadataValue } from '../metadata-value'
import { PEER_TOKEN_KEY } from '../peer-transport'
import { type Role, type TokenEntry, tokenDigest } from './token-file'

/** The metadata key of a client's token: `authorization: Bearer <token>`. */
export const AUTHORIZATION_KEY = 'authorization'

/** Who is calling: a cluster member (it has the peer secret), a client token, or nobody known. */
export type Principal =
  | { readonly kind: 'peer' }
  | { readonly kind: 'token'; readonly name: string; readonly roles: readonly Role[] }
  | { readonly kind: 'anonymous' }

/**
 * What a method needs. `produce`/`consume`/`read` are checked against the request's queues
 * (`queuesOf`); `read` is allowed to a producer, a consumer or a viewer of the queue.
 */
type Need = 'none' | 'peer' | 'client' | 'admin' | 'produce' | 'consume' | 'read'

/** Every served method's need. A method not listed here (added later) needs admin: closed by default. */
const NEEDS: Readonly<Record<string, Need>> = {
  'grpc.health.v1.Health/Check': 'none',
  'grpc.health.v1.Health/Watch': 'none',
  'mq.v1.Peer/Raft': 'peer',
  'mq.v1.Peer/Heartbeat': 'peer',
  'mq.v1.Peer/MovePartition': 'peer',
  'mq.v1.Peer/ImportPartition': 'peer',
  'mq.v1.Peer/ChangeReplicas': 'peer',
  'mq.v1.Peer/FetchImage': 'peer',
  'mq.v1.Peer/FencePartitions': 'peer',
  'mq.v1.Peer/Probe': 'peer',
  // Each queue named; an unnamed GetRoutes and ListQueues answer only the caller's queues
  // (queueScope, applied by the Meta handlers).
  'mq.v1.Meta/GetRoutes': 'read',
  'mq.v1.Meta/ListQueues': 'client',
  'mq.v1.Meta/DescribeQueue': 'read',
  'mq.v1.Meta/ClusterStatus': 'client',
  'mq.v1.Queue/Produce': 'produce',
  'mq.v1.Queue/Lease': 'consume',
  'mq.v1.Queue/Ack': 'consume',
  'mq.v1.Queue/Nack': 'consume',
  'mq.v1.Queue/Extend': 'consume',
  'mq.v1.Queue/ListDead': 'consume',
  'mq.v1.Queue/ListReady': 'consume',
  'mq.v1.Queue/Stats': 'read',
  'mq.v1.Meta/CreateToken': 'admin',
  'mq.v1.Meta/DeleteToken': 'admin',
  'mq.v1.Meta/ListTokens': 'admin',
}

/**
 * The queues a queue-scoped call names: a Queue method's target, a DescribeQueue's name, each
 * of a GetRoutes's names. Of the Meta methods, only names a queue could have: the others
 * match no queue (the SDK's connect asks for the routes of '' to reach the meta group), and
 * the handler answers them as it would anyone.
 */
function queuesOf(method: string, request: unknown): string[] {
  const r = request as { target?: { queue?: unknown }; name?: unknown; queues?: unknown } | undefined
  const possible = (names: unknown[]): string[] =>
    names.filter((n): n is string => typeof n === 'string' && queueNameProblem(n) === undefined)
  if (method === 'mq.v1.Meta/DescribeQueue') return possible([r?.name])
  if (method === 'mq.v1.Meta/GetRoutes') return possible(Array.isArray(r?.queues) ? r.queues : [])
  const queue = r?.target?.queue
  return [typeof queue === 'string' ? queue : '']
}

/** The scope of a caller who may see no queue. */
const NO_QUEUES: QueueScope = { sees: () => false, prefixes: [] }

/** The token administration methods: refused on a node that checks no tokens (authorize). */
const TOKEN_METHODS: ReadonlySet<string> = new Set([
  'mq.v1.Meta/CreateToken',
  'mq.v1.Meta/DeleteToken',
  'mq.v1.Meta/ListTokens',
])

export interface AccessOptions {
  /** The cluster secret peers present ('' = peer calls are not checked: loopback development only). */
  readonly peerToken: string
  /** The client tokens, or undefined when clients are not authenticated (no `--auth-file`). */
  readonly tokens: readonly TokenEntry[] | undefined
  /** The tokens kept in the meta group, by digest (looked up after the file's). */
  readonly metaTokens?: () => ReadonlyMap<string, TokenEntry>
  /** The clock tokens' expiry is checked against (ms since the epoch; Date.now by default). */
  readonly now?: () => number
  /** `--tls-peer-ids`: peer calls must carry a certificate naming the node they speak for. */
  readonly peerIds?: boolean
}

/**
 * Authentication and authorization of every gRPC call, in one place. Peers authenticate with
 * the cluster secret; clients with a bearer token whose roles decide what they may do.
 * Health checks are open. Failures are typed: UnauthenticatedError (no credentials, or
 * unknown ones) and PermissionDeniedError (known, but not allowed); either is raised before
 * the handler runs, so nothing changes.
 */
export class AccessControl {
  readonly #peerDigest: Buffer | undefined
  #tokens: Map<string, TokenEntry> | undefined
  readonly #metaTokens: () => ReadonlyMap<string, TokenEntry>
  readonly #now: () => number
  /** Whether peer calls must carry a certificate naming the node they speak for (peer-identity.ts). */
  readonly peerIds: boolean

  constructor(options: AccessOptions) {
    this.#now = options.now ?? Date.now
    this.peerIds = options.peerIds ?? false
    this.#peerDigest = options.peerToken ? Buffer.from(tokenDigest(options.peerToken), 'hex') : undefined
    this.#tokens = options.tokens ? new Map(options.tokens.map((t) => [t.sha256, t])) : undefined
    this.#metaTokens = options.metaTokens ?? (() => new Map())
  }

  /** Whether the token file (--auth-file, as last loaded) has a token named `name`. */
  hasFileToken(name: string): boolean {
    for (const t of this.#tokens?.values() ?? []) if (t.name === name) return true
    return false
  }

  /** Whether clients must present a token. */
  get clientAuth(): boolean {
    return this.#tokens !== undefined
  }

  /**
   * Replaces the tokens of the token file (a reload): calls from now on are checked against
   * `tokens`. Only when clients are authenticated already: a reload does not turn it on or off.
   */
  replaceTokens(tokens: readonly TokenEntry[]): void {
    if (this.#tokens === undefined)
      throw new Error('clients are not authenticated: there are no file tokens to replace')
    this.#tokens = new Map(tokens.map((t) => [t.sha256, t]))
  }

  /**
   * Identifies the caller from the call's metadata. Throws UnauthenticatedError for a wrong
   * secret, an unknown token or an expired one.
   */
  authenticate(metadata: Metadata): Principal {
    const peer = metadata.get(PEER_TOKEN_KEY)[0]
    if (typeof peer === 'string' && this.#peerDigest) {
      if (timingSafeEqual(Buffer.from(tokenDigest(peer), 'hex'), this.#peerDigest)) return { kind: 'peer' }
      throw new UnauthenticatedError('the peer token is wrong')
    }
    const header = metadata.get(AUTHORIZATION_KEY)[0]
    if (typeof header === 'string' && this.#tokens) {
      // The scheme is case-insensitive (RFC 7235 §2.1): `bearer <token>` (grpcurl, curl) is taken.
      const match = /^Bearer (.+)$/i.exec(header)
      // A header without the scheme is told as such: "not recognised" sent the holder of a valid
      // token to check the token.
      if (!match)
        throw new UnauthenticatedError(
          'the authorization header must be "Bearer <token>"; check --token or MQ_TOKEN',
        )
      const digest = tokenDigest(match[1] as string)
      const entry = this.#tokens.get(digest) ?? this.#metaTokens().get(digest)
      if (!entry) throw new UnauthenticatedError('the token is not recognised; check --token or MQ_TOKEN')
      if (entry.expiresAtMs > 0 && this.#now() >= entry.expiresAtMs) {
        throw new UnauthenticatedError(
          `the token ${entry.name} expired at ${new Date(entry.expiresAtMs).toISOString()}; an admin can make a new one (mq token create)`,
        )
      }
      return { kind: 'token', name: entry.name, roles: entry.roles }
    }
    return { kind: 'anonymous' }
  }

  /**
   * Whether calls of `method` are administrative (they need the admin role: changes to queues,
   * the cluster and tokens, and the listing of tokens), so each leaves an audit line.
   */
  audits(method: string): boolean {
    return (NEEDS[method] ?? 'admin') === 'admin'
  }

  /** Whether `authorize` for `method` needs the request message (a queue-scoped method). */
  needsRequest(method: string): boolean {
    const need = NEEDS[method] ?? 'admin'
    return (need === 'produce' || need === 'consume' || need === 'read') && this.#tokens !== undefined
  }

  /**
   * Throws unless `principal` may call `method` (`service/Method`) with `request` (required
   * when needsRequest says so): UnauthenticatedError when the call needs credentials it does
   * not carry, PermissionDeniedError when its roles do not allow it.
   */
  authorize(principal: Principal, method: string, request?: unknown): void {
    const need = NEEDS[method] ?? 'admin'
    if (need === 'none') return
    if (need === 'peer') {
      if (this.#peerDigest && principal.kind !== 'peer') {
        throw new UnauthenticatedError(`${method} is for cluster members: the peer token is missing`)
      }
      return
    }
    if (this.#tokens === undefined && TOKEN_METHODS.has(method)) {
      // A token made here would be kept by the meta group and honoured as soon as auth is on
      // anywhere: on a node that checks no tokens anyone could mint admin tokens (the security
      // audit: minted on an open node, then a working admin token once --auth-file was added).
      throw new PermissionDeniedError(
        `${method}: this node checks no client tokens (started without --auth-file), so it does not manage them; use a node started with --auth-file and an admin token`,
      )
    }
    if (principal.kind === 'peer' || this.#tokens === undefined) return
    if (principal.kind === 'anonymous') {
      throw new UnauthenticatedError(`this cluster requires a token for ${method}; pass --token or MQ_TOKEN`)
    }
    if (principal.roles.some((r) => r.role === 'admin') || need === 'client') return
    if (need === 'admin')
      throw new PermissionDeniedError(`token "${principal.name}" may not call ${method}: needs admin`)
    const role = need === 'produce' ? 'producer' : need === 'consume' ? 'consumer' : undefined
    for (const name of queuesOf(method, request)) {
      // A name longer than any queue's is granted by no role, and not matched (a 64 MiB request
      // carries a name of 64 M characters: each pattern took a fraction of a second over it).
      if (
        name.length <= QUEUE_NAME_LENGTH_MAX &&
        principal.roles.some((r) => r.role !== 'admin' && (!role || r.role === role) && r.matches(name))
      )
        continue
      const held = principal.roles.map(formatRole).join(', ')
      throw new PermissionDeniedError(
        `token "${principal.name}" may not ${need} queue "${name}" (${method}); its roles: ${held}`,
      )
    }
  }

  /**
   * Identifies the caller of an HTTP request (the console's API, `/metrics`) from its
   * `Authorization` header, as `authenticate` does a gRPC call's: UnauthenticatedError for a
   * header with characters a token never has (printable ASCII only), an unknown token or an
   * expired one; anonymous without a header.
   */
  authenticateHttp(header: string | undefined): Principal {
    // Checked here: grpc-js's Metadata would throw for it (a message that echoed the header).
    if (header !== undefined && !isMetadataValue(header)) {
      throw new UnauthenticatedError(
        'the Authorization header holds characters a token never has: send "Bearer <token>" in printable ASCII',
      )
    }
    const metadata = new Metadata()
    if (header) metadata.set(AUTHORIZATION_KEY, header)
    return this.authenticate(metadata)
  }

  /**
   * The queues the caller of a call with `metadata` may see (a token's producer, consumer and
   * viewer patterns), for the answers that list queues; undefined when it may see all of them (admin,
   * a peer, or clients not authenticated). A caller this cannot authenticate sees none (the
   * interceptor refused its call before any handler anyway).
   */
  queueScope(metadata: Metadata): QueueScope | undefined {
    if (this.#tokens === undefined) return undefined
    let principal: Principal
    try {
      principal = this.authenticate(metadata)
    } catch {
      return NO_QUEUES
    }
    return this.scopeOf(principal)
  }

  /** The queues `principal` may see (see queueScope); undefined when it may see all of them. */
  scopeOf(principal: Principal): QueueScope | undefined {
    if (this.#tokens === undefined || principal.kind === 'peer') return undefined
    if (principal.kind === 'anonymous') return NO_QUEUES
    if (principal.roles.some((r) => r.role === 'admin')) return undefined
    const patterns = principal.roles.flatMap((r) => (r.role === 'admin' ? [] : [r]))
    return {
      sees: (queue) => queue.length <= QUEUE_NAME_LENGTH_MAX && patterns.some((r) => r.matches(queue)),
      // What a pattern's names start with: its text before the first `*`.
      prefixes: patterns.map((r) => r.pattern.split('*')[0] as string),
    }
  }
}
