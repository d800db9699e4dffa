import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError } from '../config'
import { loadTokenFile, parseTokenFile, tokenDigest } from './token-file'

const ok = (roles: unknown[] = ['admin']) => ({ name: 'ops', token: 'a-long-enough-secret', roles })

describe('token file', () => {
  it('reads tokens given as secrets or as their SHA-256, with their roles', () => {
    const [a, b] = parseTokenFile(
      {
        tokens: [
          ok(),
          {
            name: 'app',
            sha256: tokenDigest('another-long-secret'),
            roles: ['producer:orders.*', 'consumer:jobs', 'viewer:*'],
          },
        ],
      },
      'f',
    )
    expect(a).toMatchObject({
      name: 'ops',
      sha256: tokenDigest('a-long-enough-secret'),
      roles: [{ role: 'admin' }],
    })
    expect(b?.roles.map((r) => r.role)).toEqual(['producer', 'consumer', 'viewer'])
    const producer = b?.roles[0]
    expect(producer?.role === 'producer' && producer.matches('orders.eu')).toBe(true)
    expect(producer?.role === 'producer' && producer.matches('billing')).toBe(false)
  })

  it('reads an expiry as an ISO 8601 date (a day alone is midnight UTC); none = never', () => {
    const [day, zoned, never] = parseTokenFile(
      {
        tokens: [
          { ...ok(), expiresAt: '2027-06-30' },
          {
            name: 'b',
            token: 'b-long-enough-secret',
            roles: ['admin'],
            expiresAt: '2027-06-30T12:00:00+02:00',
          },
          { name: 'c', token: 'c-long-enough-secret', roles: ['admin'] },
        ],
      },
      'f',
    )
    expect(day?.expiresAtMs).toBe(Date.UTC(2027, 5, 30))
    expect(zoned?.expiresAtMs).toBe(Date.UTC(2027, 5, 30, 10))
    expect(never?.expiresAtMs).toBe(0)
  })

  it.each([
    [{}, /expected \{ "tokens"/],
    [{ tokens: [{ ...ok(), name: 'bad name' }] }, /"name" must be/],
    [{ tokens: [ok(), { ...ok(), token: 'other-long-secret-x' }] }, /name "ops" is used twice/],
    [{ tokens: [ok(), { ...ok(), name: 'ops2' }] }, /same secret is used twice/],
    [{ tokens: [{ ...ok(), token: 'short' }] }, /at least 16 characters/],
    [{ tokens: [{ ...ok(), sha256: 'ABC' }] }, /exactly one of "token" or "sha256"/],
    [{ tokens: [{ name: 'x', sha256: 'zz', roles: ['admin'] }] }, /64 lowercase hex/],
    [{ tokens: [ok([])] }, /"roles" must list/],
    [{ tokens: [ok(['root'])] }, /role "root" is not admin, producer:PATTERN/],
    [{ tokens: [ok(['producer:'])] }, /role "producer:" is not/],
    [
      { tokens: [{ ...ok(), expiresAt: 'next week' }] },
      /"expiresAt" must be an ISO 8601 date .* not "next week"/,
    ],
    [{ tokens: [{ ...ok(), expiresAt: '2027-02-30' }] }, /"expiresAt" must be/],
    [{ tokens: [{ ...ok(), expiresAt: 1_800_000_000_000 }] }, /"expiresAt" must be/],
    [{ tokens: [{ ...ok(), expiresAt: '2027-06-30T10:00' }] }, /"expiresAt" must be/],
    // A misspelt expiry made a token that never expires.
    [{ tokens: [{ ...ok(), expires_at: '2020-01-01' }] }, /token 1 \("ops"\): unknown key "expires_at"/],
  ])('refuses %j naming the problem', (raw, message) => {
    expect(() => parseTokenFile(raw, 'tokens.json')).toThrow(ConfigError)
    expect(() => parseTokenFile(raw, 'tokens.json')).toThrow(message)
  })

  it('refuses a token no client can send (a space, a character past ASCII), without quoting it', () => {
    // Taken before: the console authenticated it, then every view answered 502 (the SDK refuses
    // it), and mq refused it; one past ASCII could not be sent at all.
    for (const token of ['correct horse battery staple', 'p\u00e4ssw\u00f6rd-0123456789']) {
      const raw = { tokens: [{ ...ok(), token }] }
      expect(() => parseTokenFile(raw, 'tokens.json')).toThrow(ConfigError)
      expect(() => parseTokenFile(raw, 'tokens.json')).toThrow(
        /token 1 \("ops"\): a token must be printable ASCII without spaces/,
      )
      expect(() => parseTokenFile(raw, 'tokens.json')).not.toThrow(token)
    }
  })

  it('says where a file is not valid JSON without quoting it (its text may hold a token)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mq-tokens-'))
    try {
      const unquoted = join(dir, 'unquoted.json')
      writeFileSync(unquoted, '{"tokens":[{"name":"ops","token":TOPSECRET-0123456789,"roles":["admin"]}]}')
      expect(() => loadTokenFile(unquoted)).toThrow(ConfigError)
      expect(() => loadTokenFile(unquoted)).toThrow(
        /is not valid JSON: Unexpected token at line 1, column 34$/,
      )
      expect(() => loadTokenFile(unquoted)).not.toThrow(/TOPSECRET/)
      const cut = join(dir, 'cut.json')
      writeFileSync(cut, '{"tokens": [\n  {"name": "ops", "token": "s3cret-0123456789abcdef" "roles": []}]}')
      expect(() => loadTokenFile(cut)).toThrow(/is not valid JSON: .* at line 2, column \d+$/)
      expect(() => loadTokenFile(cut)).not.toThrow(/s3cret/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
