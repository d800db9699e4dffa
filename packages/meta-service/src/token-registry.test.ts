import { describe, expect, it } from 'vitest'
import { decodeMetaCommand, encodeMetaCommand } from './meta-commands'
import { MetaState } from './meta-state'
import { tokenDigest } from './token-handlers'
import { TOKEN_TTL_MS_MAX } from './token-registry'
import { globMatches, parseRole } from './token-roles'

const digest = tokenDigest('mq_secret')

describe('tokens in the meta state', () => {
  it('stores a token by name with its digest and roles, lists it, and removes it', () => {
    const s = new MetaState()
    const put = s.apply(
      { type: 'putToken', name: 'app', sha256: digest, roles: ['producer:orders.*'] },
      1_000,
    )
    expect(put).toEqual({
      ok: true,
      value: {
        name: 'app',
        sha256: digest,
        roles: ['producer:orders.*'],
        createdAtMs: 1_000,
        expiresAtMs: 0,
      },
    })
    expect(s.tokens.list().map((t) => t.name)).toEqual(['app'])
    const version = s.tokens.version
    expect(s.apply({ type: 'deleteToken', name: 'app' }, 2_000)).toEqual({ ok: true, value: null })
    expect(s.tokens.list()).toEqual([])
    expect(s.tokens.version).toBeGreaterThan(version)
  })

  it.each([
    [{ name: 'bad name', sha256: digest, roles: ['admin'] }, /token name "bad name"/],
    [{ name: 'app', sha256: 'xyz', roles: ['admin'] }, /64 hex digits/],
    [{ name: 'app', sha256: digest, roles: [] }, /needs 1-100 roles/],
    [{ name: 'app', sha256: digest, roles: ['root'] }, /role "root" is not admin/],
    [{ name: 'app', sha256: digest, roles: ['admin'], ttlMs: -1 }, /lifetime must be 0 .* not -1/],
    [{ name: 'app', sha256: digest, roles: ['admin'], ttlMs: 1.5 }, /lifetime must be 0/],
    [{ name: 'app', sha256: digest, roles: ['admin'], ttlMs: TOKEN_TTL_MS_MAX + 1 }, /10 years/],
  ])('refuses %j and changes nothing', (fields, message) => {
    const s = new MetaState()
    const before = s.snapshot()
    const r = s.apply({ type: 'putToken', ...fields }, 1)
    expect(r).toMatchObject({ ok: false, code: 'INVALID_ARGUMENT', message: expect.stringMatching(message) })
    expect(s.snapshot()).toEqual(before)
  })

  it('gives a token with a lifetime its expiry from the entry time; 0 or none never expires', () => {
    const s = new MetaState()
    const r = s.apply(
      { type: 'putToken', name: 'ci', sha256: digest, roles: ['admin'], ttlMs: 60_000 },
      1_000,
    )
    expect(r).toMatchObject({ ok: true, value: { createdAtMs: 1_000, expiresAtMs: 61_000 } })
    s.apply({ type: 'putToken', name: 'z', sha256: tokenDigest('z'), roles: ['admin'], ttlMs: 0 }, 1_000)
    s.apply(
      { type: 'putToken', name: 'max', sha256: tokenDigest('m'), roles: ['admin'], ttlMs: TOKEN_TTL_MS_MAX },
      0,
    )
    expect(s.tokens.list().map((t) => [t.name, t.expiresAtMs])).toEqual([
      ['ci', 61_000],
      ['max', TOKEN_TTL_MS_MAX],
      ['z', 0],
    ])
  })

  it('refuses a second token of one name or one secret, and deleting one that does not exist', () => {
    const s = new MetaState()
    s.apply({ type: 'putToken', name: 'a', sha256: digest, roles: ['admin'] }, 1)
    expect(
      s.apply({ type: 'putToken', name: 'a', sha256: tokenDigest('other'), roles: ['admin'] }, 1),
    ).toMatchObject({
      ok: false,
      message: expect.stringMatching(/named a exists/),
    })
    expect(s.apply({ type: 'putToken', name: 'b', sha256: digest, roles: ['admin'] }, 1)).toMatchObject({
      ok: false,
      message: expect.stringMatching(/secret is in use/),
    })
    expect(s.apply({ type: 'deleteToken', name: 'zz' }, 1)).toMatchObject({
      ok: false,
      code: 'INVALID_ARGUMENT',
    })
  })

  it('keeps tokens through snapshot and restore, and restores images without tokens', () => {
    const a = new MetaState()
    a.apply({ type: 'putToken', name: 'ops', sha256: digest, roles: ['admin'] }, 5)
    const b = new MetaState()
    b.restore(a.snapshot())
    expect(b.tokens.list()).toEqual(a.tokens.list())
    const old = JSON.parse(new TextDecoder().decode(a.snapshot())) as Record<string, unknown>
    // An image of a version before token lifetimes: its tokens never expire.
    const before = {
      ...old,
      tokens: (old.tokens as object[]).map(({ expiresAtMs: _, ...t }: { expiresAtMs?: number }) => t),
    }
    b.restore(new TextEncoder().encode(JSON.stringify(before)))
    expect(b.tokens.list()).toEqual(a.tokens.list())
    expect(b.tokens.list()[0]?.expiresAtMs).toBe(0)
    delete old.tokens
    b.restore(new TextEncoder().encode(JSON.stringify(old)))
    expect(b.tokens.list()).toEqual([])
  })

  it('encodes token commands as entries', () => {
    const command = {
      type: 'putToken',
      name: 'x',
      sha256: digest,
      roles: ['consumer:jobs'],
      ttlMs: 5,
    } as const
    expect(decodeMetaCommand(encodeMetaCommand(command))).toEqual(command)
  })
})

describe('token roles', () => {
  it('parses admin, producer:PATTERN, consumer:PATTERN and viewer:PATTERN only', () => {
    expect(parseRole('admin')).toEqual({ role: 'admin' })
    expect(parseRole('consumer:jobs')).toMatchObject({ role: 'consumer', pattern: 'jobs' })
    expect(parseRole('viewer:jobs*')).toMatchObject({ role: 'viewer', pattern: 'jobs*' })
    for (const bad of ['root', 'producer:', 'producer', 'viewer:', 'reader:jobs', 42, undefined])
      expect(parseRole(bad)).toBeUndefined()
  })

  it.each([
    ['*', 'anything', true],
    ['*', '', true],
    ['orders.*', 'orders.eu', true],
    ['orders.*', 'orders', false],
    ['orders.*', 'ordersXeu', false],
    ['*-dlq', 'jobs-dlq', true],
    ['a*b*c', 'aXbYc', true],
    ['a*b*c', 'aXcYb', false],
    ['jobs', 'jobs', true],
    ['jobs', 'jobs2', false],
  ])('pattern %s on %s: %s', (pattern, text, expected) => {
    expect(globMatches(pattern, text)).toBe(expected)
  })

  it('matches a pathological pattern quickly (no regular expression backtracking)', () => {
    const start = performance.now()
    expect(globMatches(`${'*a'.repeat(100)}b`, 'a'.repeat(250))).toBe(false)
    expect(performance.now() - start).toBeLessThan(1_000)
  })
})
