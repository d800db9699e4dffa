import * as fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { decodeCommand, encodeCommand } from './codec'
import type { Command } from './commands'
import { QUEUE_CONFIG_DEFAULT } from './config'
import { InvalidArgumentError } from './errors'
import { decodeConfig, decodeState, encodeConfig, encodeState, PARTITION_STATE_INITIAL } from './records'

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex')
const unhex = (s: string) => Uint8Array.from(Buffer.from(s, 'hex'))

describe('command codec', () => {
  it('encodes to golden bytes', () => {
    const golden: [Command, string][] = [
      [{ type: 'tick' }, '0106'],
      [
        { type: 'lease', consumerId: 'c1', max: 100, visibilityMs: 30_000 },
        '0102' + '026331' + '64' + 'b0ea01',
      ],
      [{ type: 'ack', leaseIds: ['1.1', '12.3'] }, '0103' + '02' + '03312e31' + '0431322e33'],
      [{ type: 'nack', leaseIds: [], delayMs: 300 }, '0104' + '00' + 'ac02'],
      [{ type: 'extend', leaseIds: ['7.2'], visibilityMs: 5 }, '0105' + '01' + '03372e32' + '05'],
      [{ type: 'redriveDead', max: 10 }, '01070a'],
      [{ type: 'redriveDead', max: 10, restartTtl: true }, '01070a01'],
      [{ type: 'redriveDead', max: 10, through: 5 }, '01070a0005'],
      [{ type: 'redriveDead', max: 10, restartTtl: true, through: 5 }, '01070a0105'],
      [{ type: 'tick', ttlWaiting: true }, '010601'],
      [{ type: 'purgeDead', max: 1 }, '010801'],
      [{ type: 'purgeDead', max: 1, through: 5 }, '01080105'],
      [{ type: 'purgeDead', max: 1, through: 5, after: 2 }, '0108010502'],
      [{ type: 'purgeReady', max: 3 }, '010a03'],
      [
        {
          type: 'enqueue',
          producerId: 'p',
          producerSeq: 9,
          messages: [
            { body: Uint8Array.of(0xaa, 0xbb) },
            {
              weight: 1000,
              body: new Uint8Array(0),
              headers: { k: 'v' },
              key: 'K',
              notBeforeMs: 1,
              dedupKey: 'd',
            },
          ],
        },
        '0101' +
          '01' +
          '0170' +
          '09' +
          '02' +
          '00' +
          '02aabb' +
          '1f' +
          'e807' +
          '00' +
          '01' +
          '016b' +
          '0176' +
          '014b' +
          '01' +
          '0164',
      ],
      [
        {
          type: 'enqueue',
          producerId: 'p',
          producerSeq: 9,
          producerBase: 7,
          messages: [{ body: Uint8Array.of(1) }],
        },
        '0101' + '02' + '0170' + '09' + '07' + '01' + '00' + '0101',
      ],
      [
        { type: 'configure', config: { scheduling: 'strict', maxDeliveries: 3 } },
        '0109' + '02' + '0103' + '00'.repeat(10),
      ],
    ]
    for (const [cmd, bytes] of golden) {
      expect(hex(encodeCommand(cmd)), cmd.type).toBe(bytes)
      expect(decodeCommand(unhex(bytes))).toEqual(cmd)
    }
  })

  it('round-trips every command', () => {
    const names = fc.string({ maxLength: 8 })
    const nat = fc.nat({ max: Number.MAX_SAFE_INTEGER })
    const cmd: fc.Arbitrary<Command> = fc.oneof(
      fc.record(
        {
          type: fc.constant('enqueue' as const),
          messages: fc.array(
            fc.record(
              {
                weight: fc.integer({ min: 0, max: 5000 }),
                body: fc.uint8Array({ maxLength: 20 }),
                headers: fc.dictionary(names, names, { maxKeys: 3 }),
                key: names,
                notBeforeMs: nat,
                dedupKey: names,
              },
              { requiredKeys: ['body'] },
            ),
            { maxLength: 4 },
          ),
        },
        { requiredKeys: ['type', 'messages'] },
      ),
      fc.record({
        type: fc.constant('enqueue' as const),
        messages: fc.constant([]),
        producerId: names,
        producerSeq: nat,
      }),
      fc.record({
        type: fc.constant('enqueue' as const),
        messages: fc.constant([]),
        producerId: names,
        producerSeq: nat,
        producerBase: nat,
      }),
      fc.record({ type: fc.constant('lease' as const), consumerId: names, max: nat, visibilityMs: nat }),
      fc.record({ type: fc.constantFrom('ack' as const), leaseIds: fc.array(names) }),
      fc.record({
        type: fc.constant('nack' as const),
        leaseIds: fc.array(names),
        delayMs: fc.integer({ min: 1, max: 1e9 }),
      }),
      fc.record({ type: fc.constant('extend' as const), leaseIds: fc.array(names), visibilityMs: nat }),
      fc.constant({ type: 'tick' as const }),
      fc.constant({ type: 'tick' as const, ttlWaiting: true }),
      fc.record({
        type: fc.constantFrom('redriveDead' as const, 'purgeDead' as const, 'purgeReady' as const),
        max: nat,
      }),
      fc.record({ type: fc.constant('redriveDead' as const), max: nat, restartTtl: fc.constant(true) }),
      fc.record({ type: fc.constant('redriveDead' as const), max: nat, through: nat }),
      fc.record({
        type: fc.constant('redriveDead' as const),
        max: nat,
        restartTtl: fc.constant(true),
        through: nat,
      }),
      fc.record({ type: fc.constant('purgeDead' as const), max: nat, through: nat }),
      fc.record({ type: fc.constant('purgeDead' as const), max: nat, through: nat, after: nat }),
      fc.record({
        type: fc.constant('configure' as const),
        config: fc.record(
          {
            scheduling: fc.constantFrom('fair' as const, 'strict' as const),
            maxDeliveries: nat,
            expiryBatchMax: nat,
          },
          { requiredKeys: [] },
        ),
      }),
    )
    fc.assert(
      fc.property(cmd, (c) => {
        expect(decodeCommand(encodeCommand(c))).toEqual(c)
      }),
    )
  })

  it('rejects malformed bytes with InvalidArgumentError', () => {
    for (const bad of [
      '',
      '02',
      '0100',
      '01ff',
      '010264',
      '0106ff',
      '010600',
      '01060101',
      '01070a00',
      '01070a010100',
      '0103ffffffffffffffffff01',
      '010103',
    ]) {
      expect(() => decodeCommand(unhex(bad)), bad).toThrow(InvalidArgumentError)
    }
    expect(() => encodeCommand({ type: 'lease', consumerId: 'c', max: -1, visibilityMs: 1 })).toThrow(
      InvalidArgumentError,
    )
  })

  it('decodes a header named __proto__ as a plain header', () => {
    const bytes = encodeCommand({
      type: 'enqueue',
      messages: [{ body: new Uint8Array(0), headers: JSON.parse('{"__proto__":"x"}') }],
    })
    const cmd = decodeCommand(bytes)
    const headers = cmd.type === 'enqueue' ? cmd.messages[0]?.headers : undefined
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
    expect(Object.keys(headers ?? {})).toEqual(['__proto__'])
  })
})

describe('config versions', () => {
  it('round-trips a configure with a configVersion and reads one without it', () => {
    const versioned: Command = { type: 'configure', config: { maxDeliveries: 3, configVersion: 42 } }
    expect(decodeCommand(encodeCommand(versioned))).toEqual(versioned)
    const plain: Command = { type: 'configure', config: { maxDeliveries: 3 } }
    expect(decodeCommand(encodeCommand(plain))).toEqual(plain)
  })

  it('decodes a stored config written before configVersion existed as version 0', () => {
    const current = encodeConfig(QUEUE_CONFIG_DEFAULT)
    // The old format is the current one without its last varint (configVersion 0 is one byte).
    const old = current.subarray(0, current.length - 1)
    expect(decodeConfig(old)).toEqual({ ...QUEUE_CONFIG_DEFAULT, configVersion: 0 })
    expect(decodeConfig(encodeConfig({ ...QUEUE_CONFIG_DEFAULT, configVersion: 7 })).configVersion).toBe(7)
  })

  it('writes messageTtlMs only when set: without it, configs and configures are the bytes of before', () => {
    const plain: Command = { type: 'configure', config: { maxDeliveries: 3, configVersion: 42 } }
    const ttl: Command = {
      type: 'configure',
      config: { maxDeliveries: 3, configVersion: 42, messageTtlMs: 60_000 },
    }
    const ttlOnly: Command = { type: 'configure', config: { messageTtlMs: 5_000 } }
    for (const c of [ttl, ttlOnly]) expect(decodeCommand(encodeCommand(c))).toEqual(c)
    // The bytes of a configure without it end as they did (one more field means more bytes).
    expect(encodeCommand(ttl).length).toBeGreaterThan(encodeCommand(plain).length)
    expect(encodeCommand(ttl).subarray(0, encodeCommand(plain).length)).toEqual(encodeCommand(plain))
    const stored = encodeConfig({ ...QUEUE_CONFIG_DEFAULT, configVersion: 7 })
    const withTtl = encodeConfig({ ...QUEUE_CONFIG_DEFAULT, configVersion: 7, messageTtlMs: 90_000 })
    expect(withTtl.subarray(0, stored.length)).toEqual(stored)
    expect(decodeConfig(stored).messageTtlMs).toBe(0)
    expect(decodeConfig(withTtl).messageTtlMs).toBe(90_000)
  })

  it('writes the retry backoff only when set: without it, configs and configures are the bytes of before', () => {
    const plain: Command = { type: 'configure', config: { configVersion: 42, orderedKeys: 1 } }
    const backoff: Command = {
      type: 'configure',
      config: { configVersion: 42, orderedKeys: 1, retryBackoffMinMs: 1_000, retryBackoffMaxMs: 60_000 },
    }
    const minOnly: Command = { type: 'configure', config: { retryBackoffMinMs: 500 } }
    for (const c of [backoff, minOnly]) expect(decodeCommand(encodeCommand(c))).toEqual(c)
    expect(encodeCommand(backoff).length).toBeGreaterThan(encodeCommand(plain).length)
    expect(encodeCommand(backoff).subarray(0, encodeCommand(plain).length)).toEqual(encodeCommand(plain))
    const stored = encodeConfig({ ...QUEUE_CONFIG_DEFAULT, configVersion: 7, orderedKeys: 1 })
    const withBackoff = encodeConfig({
      ...QUEUE_CONFIG_DEFAULT,
      configVersion: 7,
      orderedKeys: 1,
      retryBackoffMinMs: 1_000,
      retryBackoffMaxMs: 60_000,
    })
    expect(withBackoff.subarray(0, stored.length)).toEqual(stored)
    expect(decodeConfig(stored)).toMatchObject({ retryBackoffMinMs: 0, retryBackoffMaxMs: 0 })
    expect(decodeConfig(withBackoff)).toMatchObject({ retryBackoffMinMs: 1_000, retryBackoffMaxMs: 60_000 })
  })

  it("writes a lease's byte budget only when set: without it, a lease is the bytes of before", () => {
    const plain: Command = { type: 'lease', consumerId: 'c', max: 10, visibilityMs: 500 }
    const budget: Command = { ...plain, bytesMax: 16 * 1024 * 1024 }
    for (const c of [plain, budget]) expect(decodeCommand(encodeCommand(c))).toEqual(c)
    expect(encodeCommand(budget).subarray(0, encodeCommand(plain).length)).toEqual(encodeCommand(plain))
    expect(encodeCommand(budget).length).toBeGreaterThan(encodeCommand(plain).length)
  })

  it("writes a lease's attempt only when set, after its byte budget or a 0 in its place", () => {
    const plain: Command = { type: 'lease', consumerId: 'c', max: 10, visibilityMs: 500 }
    const attempt: Command = { ...plain, attempt: 'a1b2c3' }
    const both: Command = { ...plain, bytesMax: 4_096, attempt: 'a1b2c3', repeat: true }
    const zero: Command = { ...plain, bytesMax: 0 } // level 16's form: refused at apply, as before
    for (const c of [attempt, both, zero]) expect(decodeCommand(encodeCommand(c))).toEqual(c)
    expect(encodeCommand(attempt).subarray(0, encodeCommand(plain).length)).toEqual(encodeCommand(plain))
    expect(encodeCommand(both).subarray(0, encodeCommand({ ...plain, bytesMax: 4_096 }).length)).toEqual(
      encodeCommand({ ...plain, bytesMax: 4_096 }),
    )
  })

  it('writes a repeat-only lease as repeat flag 2, which needs its attempt; a flag past 2 is malformed', () => {
    const repeat: Command = {
      type: 'lease',
      consumerId: 'c',
      max: 10,
      visibilityMs: 500,
      attempt: 'a1',
      repeat: true,
    }
    const only: Command = { ...repeat, repeatOnly: true }
    expect(decodeCommand(encodeCommand(only))).toEqual(only)
    expect(encodeCommand(only).subarray(0, -1)).toEqual(encodeCommand(repeat).subarray(0, -1))
    expect(encodeCommand(only).at(-1)).toBe(2)
    // Repeat-only is a repeat, whatever `repeat` says.
    expect(decodeCommand(encodeCommand({ ...only, repeat: undefined }))).toEqual(only)
    expect(() => encodeCommand({ ...only, attempt: undefined })).toThrow(
      /repeat-only lease needs the attempt/,
    )
    const bad = encodeCommand(only)
    bad[bad.length - 1] = 3
    expect(() => decodeCommand(bad)).toThrow(/malformed lease: repeat flag/)
  })

  it('writes a release flag only when set: without it, a nack is the bytes of before', () => {
    const plain: Command = { type: 'nack', leaseIds: ['1.1'], delayMs: 5 }
    const release: Command = { ...plain, release: true }
    for (const c of [plain, release]) expect(decodeCommand(encodeCommand(c))).toEqual(c)
    expect(encodeCommand(release).subarray(0, encodeCommand(plain).length)).toEqual(encodeCommand(plain))
    const bad = encodeCommand(release)
    bad[bad.length - 1] = 2
    expect(() => decodeCommand(bad)).toThrow(/malformed nack: release flag/)
    bad[bad.length - 1] = 0 // a 0 flag only ahead of an attempt
    expect(() => decodeCommand(bad)).toThrow(/malformed nack: release flag/)
    // A give-back of an attempt's answer: after the flag (0 or 1).
    for (const c of [
      { ...plain, attempt: 'a1' },
      { ...release, attempt: 'a1' },
    ] as Command[]) {
      expect(decodeCommand(encodeCommand(c))).toEqual(c)
      expect(encodeCommand(c).subarray(0, encodeCommand(plain).length)).toEqual(encodeCommand(plain))
    }
  })

  it("writes a give-back's lapses flag only when set, after its attempt, which it needs", () => {
    const given: Command = { type: 'nack', leaseIds: ['1.1'], release: true, attempt: 'a1' }
    const lapses: Command = { ...given, lapses: true }
    expect(decodeCommand(encodeCommand(lapses))).toEqual(lapses)
    // Without it, the bytes of before (format level 26); with it, one byte more.
    expect(encodeCommand(lapses).subarray(0, encodeCommand(given).length)).toEqual(encodeCommand(given))
    expect(encodeCommand(lapses).length).toBe(encodeCommand(given).length + 1)
    expect(() => encodeCommand({ ...lapses, attempt: undefined })).toThrow(/lapses needs its attempt/)
    const bad = encodeCommand(lapses)
    bad[bad.length - 1] = 0 // a 0 flag is never written
    expect(() => decodeCommand(bad)).toThrow(/malformed nack: lapses flag/)
  })

  it('rejects a configure field whose presence byte is neither 0 nor 1', () => {
    const empty = encodeCommand({ type: 'configure', config: {} })
    expect(decodeCommand(empty)).toEqual({ type: 'configure', config: {} })
    const bad = empty.slice()
    bad[3] = 2 // maxDeliveries: neither absent (0) nor present (1)
    expect(() => decodeCommand(bad)).toThrow(/malformed configure/)
    const set = encodeCommand({ type: 'configure', config: { maxDeliveries: 3 } })
    const bad2 = set.slice()
    bad2[3] = 0x81
    expect(() => decodeCommand(bad2)).toThrow(InvalidArgumentError)
  })

  it('refuses to encode a command its decoded bytes would apply otherwise (producer fields apart, a lease bytesMax 0)', () => {
    const messages = [{ body: new Uint8Array(1) }]
    // Each is refused by the partition as it is; encoded, it would decode to one it accepts.
    expect(() => encodeCommand({ type: 'enqueue', messages, producerId: 'p' })).toThrow(InvalidArgumentError)
    expect(() => encodeCommand({ type: 'enqueue', messages, producerSeq: 3 })).toThrow(InvalidArgumentError)
    expect(() => encodeCommand({ type: 'enqueue', messages, producerBase: 1 })).toThrow(InvalidArgumentError)
    expect(() =>
      encodeCommand({ type: 'lease', consumerId: 'c', max: 1, visibilityMs: 1, bytesMax: 0, attempt: 'a' }),
    ).toThrow(InvalidArgumentError)
    // A bytesMax 0 without an attempt is written as it is (and refused on apply, as before).
    const zero: Command = { type: 'lease', consumerId: 'c', max: 1, visibilityMs: 1, bytesMax: 0 }
    expect(decodeCommand(encodeCommand(zero))).toEqual(zero)
  })

  it('writes a redrive flag byte only when the TTL restarts or a span is given; 0 needs the span', () => {
    expect(() => decodeCommand(Uint8Array.from([1, 7, 10, 0]))).toThrow(
      /malformed redriveDead: restartTtl flag/,
    )
    expect(() => decodeCommand(Uint8Array.from([1, 7, 10, 2, 5]))).toThrow(
      /malformed redriveDead: restartTtl flag/,
    )
  })

  it('writes the discarded counter of the state record only once nonzero: before, the bytes of before', () => {
    const before = encodeState(PARTITION_STATE_INITIAL)
    const after = encodeState({ ...PARTITION_STATE_INITIAL, discarded: 7 })
    expect(after.subarray(0, before.length)).toEqual(before)
    expect(decodeState(before).discarded).toBe(0)
    expect(decodeState(after).discarded).toBe(7)
  })
})
