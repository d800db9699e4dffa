import { InvalidArgumentError } from 'commander'
import { describe, expect, it } from 'vitest'
import {
  durationArg,
  durationOption,
  headerArg,
  integerArg,
  parseServers,
  settingDurationArg,
} from './options'

describe('flag readers', () => {
  it('reads durations and reports bad ones as commander argument errors', () => {
    expect(durationArg('2m')).toBe(120_000)
    expect(() => durationArg('2')).toThrow(InvalidArgumentError)
    expect(() => durationArg('2')).toThrow(/no unit/)
    // A timer's maximum (~24.8 days) bounds what the CLI waits for, not a setting it sends:
    // a 30-day message TTL is the server's to judge (it allows a year).
    expect(() => durationArg('30d')).toThrow(/longer than the maximum/)
    expect(settingDurationArg('30d')).toBe(30 * 86_400_000)
    expect(() => settingDurationArg('30')).toThrow(/no unit/)
  })

  it('shows a duration default as a duration and parses given values', () => {
    const o = durationOption('--wait <duration>', 'how long', 5_000)
    expect(o.defaultValue).toBe(5_000)
    expect(o.defaultValueDescription).toBe('5s')
    expect(o.parseArg?.('2m', undefined)).toBe(120_000)
  })

  it('reads integers within bounds', () => {
    const weight = integerArg(1, 1000)
    expect(weight('5')).toBe(5)
    expect(() => weight('0')).toThrow(/from 1 to 1000/)
    expect(() => weight('1001')).toThrow(/out of range/)
    expect(() => weight('1.5')).toThrow(/not an integer/)
    expect(() => weight('five')).toThrow(/not an integer/)
    expect(() => integerArg(0)('-1')).toThrow(/at least 0/)
  })

  it('collects headers, keeping = inside values', () => {
    expect(headerArg('b=x=y', headerArg('a=1', undefined))).toEqual({ a: '1', b: 'x=y' })
    expect(() => headerArg('novalue', undefined)).toThrow(/key=value/)
    expect(() => headerArg('=v', undefined)).toThrow(/key=value/)
    expect(() => headerArg('a=2', headerArg('a=1', undefined))).toThrow(/header "a" is given twice/)
  })

  it('parses server lists and names a bad entry', () => {
    expect(parseServers('a:1, b:7001,')).toEqual(['a:1', 'b:7001'])
    expect(parseServers('[::1]:7001')).toEqual(['[::1]:7001'])
    expect(() => parseServers('a:1,nohost')).toThrow(/"nohost" is not a server address/)
    expect(() => parseServers('a:99999')).toThrow(/not a server address/)
    expect(() => parseServers(' , ')).toThrow(/no server given/)
  })

  // These were taken as hosts: the command then waited its whole deadline for a name that
  // cannot resolve ("Name resolution failed for target dns:http://127.0.0.1:7001") and exited
  // 3 instead of 1 at once.
  it('refuses a URL, or a host with a space or a colon outside brackets, as a server address', () => {
    for (const bad of ['http://127.0.0.1:7001', 'grpc://a:7001', 'a b:7001', '::1:7001', 'a:b:7001'])
      expect(() => parseServers(bad)).toThrow(/not a server address/)
    expect(parseServers('mq-1.example.com:7001,10.0.0.2:7001,[fe80::1%eth0]:1')).toHaveLength(3)
  })

  // Brackets hold an IPv6 address: grpc-js cannot parse another ("Failed to parse DNS address
  // dns:[foo]:7001"), and mq waited out its whole deadline, then exited 3, "did not answer".
  it('refuses brackets around anything but an IPv6 address', () => {
    for (const bad of ['[foo]:7001', '[1.2.3.4]:7001', '[::1::2]:7001', '[]:7001'])
      expect(() => parseServers(bad)).toThrow(/not a server address/)
    expect(parseServers('[::ffff:10.0.0.2]:7001,[2001:db8::1]:7001')).toHaveLength(2)
  })
})
