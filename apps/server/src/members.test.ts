import { describe, expect, it } from 'vitest'
import { isWildcardHost, parseAddress, parseMembers } from './members'

describe('parseMembers', () => {
  it('parses a three-node list', () => {
    expect(parseMembers('n1=127.0.0.1:7001,n2=127.0.0.1:7002, n3=localhost:7003')).toEqual([
      { nodeId: 'n1', address: '127.0.0.1:7001' },
      { nodeId: 'n2', address: '127.0.0.1:7002' },
      { nodeId: 'n3', address: 'localhost:7003' },
    ])
  })
  it('says what is wrong', () => {
    expect(() => parseMembers('')).toThrow(/empty/)
    expect(() => parseMembers('n1')).toThrow(/not id=host:port/)
    expect(() => parseMembers('n1=127.0.0.1:70000')).toThrow(/port from 1 to 65535/)
    // Naming which (it said only "a node id twice").
    expect(() => parseMembers('n0=c:3,n1=a:1,n1=b:2')).toThrow('--initial-meta names node id n1 twice')
    expect(() => parseMembers('n1=a:1,n2=a:1')).toThrow('--initial-meta names address a:1 twice')
    expect(() => parseMembers('bad id=a:1')).toThrow(/node id/)
    expect(() => parseMembers('_n1=a:1')).toThrow(/starting with a letter or digit/)
  })
  it('accepts IPv6 literals', () => {
    expect(parseAddress('[::1]:7001')).toBe('[::1]:7001')
    // One spelling per address: a port's leading zeros and a host name's capitals go.
    expect(parseAddress('127.0.0.1:07001')).toBe('127.0.0.1:7001')
    expect(parseAddress('MQ-1.Example:7001')).toBe('mq-1.example:7001')
    expect(parseAddress('[::FFFF:7f00:1]:00080')).toBe('[::ffff:7f00:1]:80')
  })
})

describe('isWildcardHost', () => {
  it('knows every spelling of a wildcard that parseAddress admits, and no other host', () => {
    // Dialing any of them reaches the dialer's own port, as 0.0.0.0 and [::] do.
    for (const host of [
      '0.0.0.0',
      '[::]',
      '[0:0:0:0:0:0:0:0]',
      '[::0]',
      '[0::]',
      '[0:0::0]',
      '0',
      '0.0',
      '00.0.0.0',
      '0x0',
    ])
      expect(isWildcardHost(host), host).toBe(true)
    for (const host of ['127.0.0.1', '10.0.0.0', '[::1]', '[1::]', 'localhost', 'o', '0.0.0.0.0', '0a'])
      expect(isWildcardHost(host), host).toBe(false)
  })
})
