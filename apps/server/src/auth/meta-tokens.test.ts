import { createHash } from 'node:crypto'
import { TokenRegistry, tokenDigest } from '@mq/meta-service'
import { describe, expect, it } from 'vitest'
import { MetaTokenTable } from './meta-tokens'

describe('the meta-group token table', () => {
  it('sends the tokens with a heartbeat answer only to a node whose fingerprint differs', () => {
    const registry = new TokenRegistry()
    registry.put('app', tokenDigest('s1'), ['producer:orders.*'], 1)
    const leader = new MetaTokenTable()
    const node = new MetaTokenTable()
    expect(node.fingerprint).toBe('')
    const first = leader.forHeartbeat(registry, node.fingerprint)
    expect(first.tokens).toEqual([
      { name: 'app', sha256: tokenDigest('s1'), roles: ['producer:orders.*'], expiresAtMs: 0 },
    ])
    node.fromHeartbeat(first.tokens, first.tokensFingerprint)
    expect(node.fingerprint).toBe(first.tokensFingerprint)
    expect(node.current().get(tokenDigest('s1'))).toMatchObject({
      name: 'app',
      roles: [{ role: 'producer' }],
    })
    // Unchanged: nothing more is sent, and the node keeps its table.
    const again = leader.forHeartbeat(registry, node.fingerprint)
    expect(again.tokens).toEqual([])
    node.fromHeartbeat(again.tokens, again.tokensFingerprint)
    expect(node.current().size).toBe(1)
    // A deletion changes the fingerprint: the (empty) list is sent and replaces the table.
    registry.remove('app')
    const after = leader.forHeartbeat(registry, node.fingerprint)
    expect(after.tokensFingerprint).not.toBe(first.tokensFingerprint)
    node.fromHeartbeat(after.tokens, after.tokensFingerprint)
    expect(node.current().size).toBe(0)
  })

  it("carries each token's expiry to the nodes, and an expiry is part of the fingerprint", () => {
    const registry = new TokenRegistry()
    registry.put('temp', tokenDigest('s'), ['admin'], 1_000, 60_000)
    const leader = new MetaTokenTable()
    const node = new MetaTokenTable()
    const sent = leader.forHeartbeat(registry, node.fingerprint)
    node.fromHeartbeat(sent.tokens, sent.tokensFingerprint)
    expect(node.current().get(tokenDigest('s'))?.expiresAtMs).toBe(61_000)
    const lasting = new TokenRegistry()
    lasting.put('temp', tokenDigest('s'), ['admin'], 1_000)
    expect(new MetaTokenTable().forHeartbeat(lasting, '').tokensFingerprint).not.toBe(sent.tokensFingerprint)
  })

  it('fingerprints tokens without an expiry as versions before lifetimes did (rolling upgrades agree)', () => {
    const registry = new TokenRegistry()
    registry.put('app', tokenDigest('s1'), ['producer:orders.*', 'consumer:jobs'], 1)
    const before = createHash('sha256')
      .update(`app\0${tokenDigest('s1')}\0producer:orders.*\0consumer:jobs\n`)
      .digest('hex')
    expect(new MetaTokenTable().forHeartbeat(registry, '').tokensFingerprint).toBe(before)
  })

  it('gives the same fingerprint for the same tokens on any replica', () => {
    const a = new TokenRegistry()
    const b = new TokenRegistry()
    a.put('x', tokenDigest('1'), ['admin'], 1)
    a.put('y', tokenDigest('2'), ['consumer:jobs'], 2)
    b.put('y', tokenDigest('2'), ['consumer:jobs'], 7)
    b.put('x', tokenDigest('1'), ['admin'], 9)
    const ta = new MetaTokenTable()
    const tb = new MetaTokenTable()
    ta.fromRegistry(a)
    tb.fromRegistry(b)
    expect(ta.fingerprint).toBe(tb.fingerprint)
    expect(ta.fingerprint).toMatch(/^[0-9a-f]{64}$/)
  })

  it("reads a new replica's registry, though its version is the one last read from the replica before", () => {
    // A node that left the meta group and hosts a new replica of it: that replica's registry
    // counts its versions from 0 again.
    const old = new TokenRegistry()
    old.put('leaked', tokenDigest('s1'), ['admin'], 1)
    const table = new MetaTokenTable()
    expect(table.fromRegistry(old).has(tokenDigest('s1'))).toBe(true)
    const fresh = new TokenRegistry()
    fresh.put('app', tokenDigest('s2'), ['consumer:jobs'], 2)
    expect(fresh.version).toBe(old.version)
    const now = table.fromRegistry(fresh)
    expect(now.has(tokenDigest('s1'))).toBe(false)
    expect(now.has(tokenDigest('s2'))).toBe(true)
  })
})
