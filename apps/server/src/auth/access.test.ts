import { Metadata } from '@grpc/grpc-js'
import { ErrorCode, type MqError, PeerService, QUEUE_NAME_LENGTH_MAX } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { PEER_TOKEN_KEY } from '../peer-transport'
import { AccessControl, AUTHORIZATION_KEY, type Principal } from './access'
import { parseTokenFile, tokenDigest } from './token-file'

const tokens = parseTokenFile(
  {
    tokens: [
      { name: 'ops', token: 'admin-secret-0123456789', roles: ['admin'] },
      { name: 'app', token: 'app-secret-0123456789', roles: ['producer:orders.*', 'consumer:jobs'] },
      { name: 'dash', token: 'dash-secret-0123456789', roles: ['viewer:orders.*'] },
    ],
  },
  'test',
)
const secured = new AccessControl({ peerToken: 'peer-secret', tokens })
const open = new AccessControl({ peerToken: '', tokens: undefined })

function md(headers: Record<string, string>): Metadata {
  const m = new Metadata()
  for (const [k, v] of Object.entries(headers)) m.set(k, v)
  return m
}

/** The error code `fn` throws, or 'OK'. */
function outcome(fn: () => unknown): string {
  try {
    fn()
    return 'OK'
  } catch (error) {
    return (error as MqError).code
  }
}

const app = secured.authenticate(md({ [AUTHORIZATION_KEY]: 'Bearer app-secret-0123456789' }))
const ops = secured.authenticate(md({ [AUTHORIZATION_KEY]: 'Bearer admin-secret-0123456789' }))
const anonymous: Principal = { kind: 'anonymous' }
const peer = secured.authenticate(md({ [PEER_TOKEN_KEY]: 'peer-secret' }))
const target = (queue: string) => ({ target: { queue, partition: 0, routeEpoch: 1 } })

describe('access control', () => {
  it('identifies peers, tokens and nobody; refuses a wrong secret or token', () => {
    expect(peer).toEqual({ kind: 'peer' })
    expect(app).toMatchObject({ kind: 'token', name: 'app' })
    expect(secured.authenticate(md({}))).toEqual(anonymous)
    expect(outcome(() => secured.authenticate(md({ [PEER_TOKEN_KEY]: 'guess' })))).toBe(
      ErrorCode.Unauthenticated,
    )
    expect(outcome(() => secured.authenticate(md({ [AUTHORIZATION_KEY]: 'Bearer guess' })))).toBe(
      ErrorCode.Unauthenticated,
    )
    expect(outcome(() => secured.authenticate(md({ [AUTHORIZATION_KEY]: 'app-secret-0123456789' })))).toBe(
      ErrorCode.Unauthenticated,
    )
  })

  it('takes the Bearer scheme in any case, and says so when a header lacks it', () => {
    // RFC 7235 §2.1: the scheme is case-insensitive (grpcurl -H 'authorization: bearer …').
    expect(secured.authenticate(md({ [AUTHORIZATION_KEY]: 'bearer app-secret-0123456789' }))).toMatchObject({
      kind: 'token',
      name: 'app',
    })
    // A valid token without the scheme: not "not recognised", which sends its holder to check it.
    expect(() => secured.authenticate(md({ [AUTHORIZATION_KEY]: 'app-secret-0123456789' }))).toThrow(
      /authorization header must be "Bearer <token>"/,
    )
  })

  it('refuses an expired token, file or meta, saying so; takes it until then', () => {
    let now = Date.UTC(2027, 0, 1)
    const [file] = parseTokenFile(
      {
        tokens: [
          { name: 'temp', token: 'temp-secret-0123456789', roles: ['admin'], expiresAt: '2027-01-02' },
        ],
      },
      'test',
    )
    const meta = new Map([
      [
        tokenDigest('meta-secret'),
        { name: 'm', sha256: tokenDigest('meta-secret'), roles: [], expiresAtMs: now + 1 },
      ],
    ])
    const access = new AccessControl({
      peerToken: '',
      tokens: file ? [file] : [],
      metaTokens: () => meta,
      now: () => now,
    })
    const temp = md({ [AUTHORIZATION_KEY]: 'Bearer temp-secret-0123456789' })
    const m = md({ [AUTHORIZATION_KEY]: 'Bearer meta-secret' })
    expect(access.authenticate(temp)).toMatchObject({ kind: 'token', name: 'temp' })
    expect(access.authenticate(m)).toMatchObject({ kind: 'token', name: 'm' })
    now += 1
    expect(access.authenticate(temp)).toMatchObject({ kind: 'token', name: 'temp' })
    expect(() => access.authenticate(m)).toThrow(
      /^the token m expired at 2027-01-01T00:00:00.001Z; an admin can make a new one/,
    )
    now = Date.UTC(2027, 0, 2)
    expect(outcome(() => access.authenticate(temp))).toBe(ErrorCode.Unauthenticated)
    expect(() => access.authenticate(temp)).toThrow(/token temp expired at 2027-01-02T00:00:00.000Z/)
  })

  it.each([
    ['mq.v1.Queue/Produce', 'orders.eu', 'OK'],
    ['mq.v1.Queue/Produce', 'jobs', ErrorCode.PermissionDenied],
    ['mq.v1.Queue/Lease', 'jobs', 'OK'],
    ['mq.v1.Queue/Ack', 'orders.eu', ErrorCode.PermissionDenied],
    ['mq.v1.Queue/Stats', 'orders.eu', 'OK'],
    ['mq.v1.Queue/Stats', 'jobs', 'OK'],
    ['mq.v1.Queue/Stats', 'billing', ErrorCode.PermissionDenied],
    ['mq.v1.Queue/Purge', 'orders.eu', ErrorCode.PermissionDenied],
    ['mq.v1.Queue/Redrive', 'jobs', ErrorCode.PermissionDenied],
    ['mq.v1.Meta/GetRoutes', '', 'OK'],
    ['mq.v1.Meta/CreateQueue', '', ErrorCode.PermissionDenied],
    ['mq.v1.Meta/SomethingNew', '', ErrorCode.PermissionDenied],
    ['mq.v1.Peer/Heartbeat', '', ErrorCode.Unauthenticated],
    ['grpc.health.v1.Health/Check', '', 'OK'],
  ])('a producer of orders.* and consumer of jobs calling %s on "%s": %s', (method, queue, expected) => {
    expect(outcome(() => secured.authorize(app, method, target(queue)))).toBe(expected)
  })

  it("keeps a scoped token to its queues' routes and descriptions, and lists only its queues", () => {
    const routes = (...queues: string[]) => secured.authorize(app, 'mq.v1.Meta/GetRoutes', { queues })
    expect(outcome(() => routes('orders.eu', 'jobs'))).toBe('OK')
    expect(outcome(() => routes('orders.eu', 'billing'))).toBe(ErrorCode.PermissionDenied)
    // No name, or names no queue can have (the SDK's connect asks for ''): the handler answers.
    expect(outcome(() => routes())).toBe('OK')
    expect(outcome(() => routes('', 'not a name'))).toBe('OK')
    const describe = (name: string) => secured.authorize(app, 'mq.v1.Meta/DescribeQueue', { name })
    expect(outcome(() => describe('jobs'))).toBe('OK')
    expect(() => describe('billing')).toThrow(
      /token "app" may not read queue "billing" \(mq.v1.Meta\/DescribeQueue\)/,
    )
    expect(outcome(() => secured.authorize(ops, 'mq.v1.Meta/DescribeQueue', { name: 'billing' }))).toBe('OK')
    expect(secured.needsRequest('mq.v1.Meta/GetRoutes')).toBe(true)
    expect(secured.needsRequest('mq.v1.Meta/ListQueues')).toBe(false)

    const scope = secured.queueScope(md({ [AUTHORIZATION_KEY]: 'Bearer app-secret-0123456789' }))
    expect(['orders.eu', 'jobs', 'billing', 'jobs2'].filter((q) => scope?.sees(q))).toEqual([
      'orders.eu',
      'jobs',
    ])
    expect(scope?.prefixes).toEqual(['orders.', 'jobs'])
    // Every queue: admin, a peer, a node that checks no tokens.
    expect(secured.queueScope(md({ [AUTHORIZATION_KEY]: 'Bearer admin-secret-0123456789' }))).toBeUndefined()
    expect(secured.queueScope(md({ [PEER_TOKEN_KEY]: 'peer-secret' }))).toBeUndefined()
    expect(open.queueScope(md({}))).toBeUndefined()
    // None: a caller it cannot authenticate.
    expect(secured.queueScope(md({}))).toEqual({ sees: expect.any(Function), prefixes: [] })
    expect(secured.queueScope(md({ [AUTHORIZATION_KEY]: 'Bearer nope' }))?.sees('jobs')).toBe(false)
  })

  it('lets a viewer see its queues (list, describe, routes, stats) and neither send nor take', () => {
    const dash = secured.authenticate(md({ [AUTHORIZATION_KEY]: 'Bearer dash-secret-0123456789' }))
    const can = (method: string, request: unknown) => outcome(() => secured.authorize(dash, method, request))
    expect(can('mq.v1.Queue/Stats', target('orders.eu'))).toBe('OK')
    expect(can('mq.v1.Meta/DescribeQueue', { name: 'orders.eu' })).toBe('OK')
    expect(can('mq.v1.Meta/GetRoutes', { queues: ['orders.eu'] })).toBe('OK')
    expect(can('mq.v1.Meta/ListQueues', {})).toBe('OK')
    for (const method of [
      'Produce',
      'Lease',
      'Ack',
      'Nack',
      'Extend',
      'ListDead',
      'ListReady',
      'Purge',
      'Redrive',
    ])
      expect(can(`mq.v1.Queue/${method}`, target('orders.eu'))).toBe(ErrorCode.PermissionDenied)
    expect(can('mq.v1.Queue/Stats', target('billing'))).toBe(ErrorCode.PermissionDenied)
    expect(() => secured.authorize(dash, 'mq.v1.Queue/Produce', target('orders.eu'))).toThrow(
      /token "dash" may not produce queue "orders.eu" \(mq.v1.Queue\/Produce\); its roles: viewer:orders.\*/,
    )
    const scope = secured.queueScope(md({ [AUTHORIZATION_KEY]: 'Bearer dash-secret-0123456789' }))
    expect(['orders.eu', 'billing'].filter((q) => scope?.sees(q))).toEqual(['orders.eu'])
  })

  it('lets admin do every client call, peers everything, and nobody only health checks', () => {
    for (const method of ['mq.v1.Queue/Purge', 'mq.v1.Meta/CreateQueue', 'mq.v1.Meta/SomethingNew']) {
      expect(outcome(() => secured.authorize(ops, method, target('x')))).toBe('OK')
      expect(outcome(() => secured.authorize(peer, method, target('x')))).toBe('OK')
      expect(outcome(() => secured.authorize(anonymous, method, target('x')))).toBe(ErrorCode.Unauthenticated)
    }
    expect(outcome(() => secured.authorize(ops, 'mq.v1.Peer/Raft'))).toBe(ErrorCode.Unauthenticated)
    expect(outcome(() => secured.authorize(peer, 'mq.v1.Peer/Raft'))).toBe('OK')
    expect(outcome(() => secured.authorize(anonymous, 'grpc.health.v1.Health/Check'))).toBe('OK')
  })

  it('audits the administrative calls only: the admin methods, and any method added later', () => {
    const audited = ['mq.v1.Meta/CreateQueue', 'mq.v1.Queue/Purge', 'mq.v1.Meta/ListTokens', 'mq.v1.Meta/New']
    const not = [
      'mq.v1.Queue/Produce',
      'mq.v1.Meta/ListQueues',
      'mq.v1.Peer/Raft',
      'grpc.health.v1.Health/Check',
    ]
    expect([...audited, ...not].filter((m) => secured.audits(m))).toEqual(audited)
  })

  it('keeps every Peer method to peers: an admin token cannot call one', () => {
    for (const { path } of Object.values(PeerService)) {
      const method = path.slice(1)
      expect(outcome(() => secured.authorize(peer, method))).toBe('OK')
      expect(outcome(() => secured.authorize(ops, method))).toBe(ErrorCode.Unauthenticated)
    }
  })

  it('without --auth-file and --peer-token lets every call through (loopback development)', () => {
    expect(open.clientAuth).toBe(false)
    expect(open.needsRequest('mq.v1.Queue/Produce')).toBe(false)
    for (const method of ['mq.v1.Queue/Produce', 'mq.v1.Meta/CreateQueue', 'mq.v1.Peer/Heartbeat']) {
      expect(outcome(() => open.authorize(anonymous, method, target('x')))).toBe('OK')
    }
  })

  it('manages no tokens without --auth-file: one minted there would be an admin token once auth is on', () => {
    for (const method of ['mq.v1.Meta/CreateToken', 'mq.v1.Meta/DeleteToken', 'mq.v1.Meta/ListTokens']) {
      expect(outcome(() => open.authorize(anonymous, method))).toBe(ErrorCode.PermissionDenied)
      expect(() => open.authorize(anonymous, method)).toThrow(/started without --auth-file/)
      expect(outcome(() => secured.authorize(ops, method))).toBe('OK')
    }
  })

  it('refuses a queue name longer than any queue can have, and sees none, without matching it to each pattern', () => {
    // A 64 MiB message may carry a name of 64 M characters: each pattern took a fraction of a
    // second over it, the node's event loop (its Raft ticks) held meanwhile. Such a name is
    // granted by no pattern, even one it matches, and none is tried on it.
    const many = new AccessControl({
      peerToken: 'peer-secret',
      tokens: parseTokenFile(
        {
          tokens: [
            {
              name: 'regions',
              token: 'regions-secret-0123456789',
              roles: [...Array.from({ length: 10 }, (_, i) => `producer:*.region-${i}`), 'producer:orders.*'],
            },
          ],
        },
        'test',
      ),
    })
    const regions = many.authenticate(md({ [AUTHORIZATION_KEY]: 'Bearer regions-secret-0123456789' }))
    expect(outcome(() => many.authorize(regions, 'mq.v1.Queue/Produce', target('orders.region-3')))).toBe(
      'OK',
    )
    const huge = `orders.${'x'.repeat(QUEUE_NAME_LENGTH_MAX)}`
    expect(outcome(() => many.authorize(regions, 'mq.v1.Queue/Produce', target(huge)))).toBe(
      ErrorCode.PermissionDenied,
    )
    // Nor does the scope the Meta handlers filter by (GetRoutes, DescribeQueue: names no queue
    // can have reach them unrefused) match one.
    const scope = many.scopeOf(regions)
    expect(scope?.sees('orders.region-3')).toBe(true)
    expect(scope?.sees(`orders.${'x'.repeat(QUEUE_NAME_LENGTH_MAX - 7)}`)).toBe(true)
    expect(scope?.sees(huge)).toBe(false)
  })
})
