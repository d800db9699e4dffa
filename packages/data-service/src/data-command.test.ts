import { describe, expect, it } from 'vitest'
import { type DataCommand, decodeDataCommand, encodeDataCommand } from './data-command'

describe('data commands', () => {
  const cases: DataCommand[] = [
    { type: 'open', queue: 'jobs', partition: 3, config: { maxDeliveries: 4, scheduling: 'strict' } },
    { type: 'drop', queue: 'jobs', partition: 0 },
    { type: 'drop', queue: 'jobs', partition: 1, moveId: 41 },
    { type: 'drop', queue: 'jobs', partition: 2, moveId: 42, ordered: true },
    { type: 'fence', queue: 'jobs', partition: 2, moveId: 43, ordered: true },
    {
      type: 'apply',
      queue: 'émails',
      partition: 65_000,
      command: {
        type: 'enqueue',
        messages: [{ body: Uint8Array.of(1, 2), weight: 5 }],
        producerId: 'p',
        producerSeq: 9,
      },
    },
    { type: 'apply', queue: 'q', partition: 1, command: { type: 'ack', leaseIds: ['a', 'b'] } },
    { type: 'fence', queue: 'q#2', partition: 7 },
    { type: 'fence', queue: 'q#2', partition: 8, moveId: 0 },
    { type: 'retire', queue: 'q#3', partition: 1 },
    { type: 'retire', queue: 'q#3', partition: 1, final: true },
    { type: 'unfence', queue: 'q#3', partition: 2, moveId: 77 },
    {
      type: 'import',
      queue: 'q#2',
      partition: 7,
      moveId: 12,
      session: 'n1-3',
      seq: 4,
      last: false,
      config: { maxDeliveries: 2 },
      pairs: [
        [Uint8Array.of(1, 2), Uint8Array.of(3)],
        [Uint8Array.of(9), new Uint8Array(0)],
      ],
    },
    {
      type: 'import',
      queue: 'q',
      partition: 0,
      moveId: 3,
      session: 's',
      seq: 0,
      last: false,
      config: {},
      pairs: [],
      fresh: true,
    },
    {
      type: 'import',
      queue: 'q',
      partition: 0,
      moveId: 3,
      session: 's',
      seq: 1,
      last: false,
      config: {},
      pairs: [],
      fresh: true,
      ordered: true,
    },
    {
      type: 'import',
      queue: 'q',
      partition: 0,
      moveId: 4,
      session: 's',
      seq: 0,
      last: false,
      config: {},
      pairs: [],
      fresh: true,
      ordered: true,
      replaces: true,
    },
    {
      type: 'import',
      queue: 'q',
      partition: 0,
      moveId: 3,
      session: 's',
      seq: 5,
      last: true,
      config: {},
      pairs: [],
      clockMs: 1_764_000_000_000,
    },
  ]

  it.each(cases.map((c, i) => [c.type, i, c] as const))('round-trips %s (case %i)', (_, _i, c) => {
    const back = decodeDataCommand(encodeDataCommand(c))
    expect(back.type).toBe(c.type)
    expect(back.queue).toBe(c.queue)
    expect(back.partition).toBe(c.partition)
    if (c.type !== 'apply') expect(back).toEqual(c)
    if (c.type === 'apply' && back.type === 'apply') expect(back.command.type).toBe(c.command.type)
  })

  it('starts with the golden header bytes', () => {
    const bytes = encodeDataCommand({ type: 'drop', queue: 'ab', partition: 258 })
    expect(Buffer.from(bytes).toString('hex')).toBe('0102000001020002' + '6162')
  })

  it('says what is wrong with bad bytes', () => {
    expect(() => decodeDataCommand(Uint8Array.of(1, 2))).toThrow(/too short/)
    expect(() => decodeDataCommand(Uint8Array.of(9, 2, 0, 0, 0, 0, 0, 0))).toThrow(/version 9/)
    expect(() => decodeDataCommand(Uint8Array.of(1, 8, 0, 0, 0, 0, 0, 0))).toThrow(/type 8 is unknown/)
    // A retire's body is nothing or says it is final.
    expect(() => decodeDataCommand(Uint8Array.of(1, 6, 0, 0, 0, 0, 0, 0, 0x7b, 0x7d))).toThrow(
      /retire body is malformed/,
    )
    // An unfence names its move.
    expect(() => decodeDataCommand(Uint8Array.of(1, 7, 0, 0, 0, 0, 0, 0))).toThrow(/names no move/)
    expect(() => decodeDataCommand(Uint8Array.of(1, 2, 0, 0, 0, 0, 0, 9))).toThrow(/runs past its end/)
    // A drop whose body is not a move id.
    expect(() => decodeDataCommand(Uint8Array.of(1, 2, 0, 0, 0, 0, 0, 0, 0x2d, 0x31))).toThrow(/move id/)
    expect(() => decodeDataCommand(Uint8Array.of(1, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0x7b, 0x7d))).toThrow(
      /header is malformed/,
    )
    // A partition clock on a chunk that is not the last, or not a time.
    const importOf = (header: object) => {
      const json = new TextEncoder().encode(JSON.stringify(header))
      const body = new Uint8Array(4 + json.length)
      new DataView(body.buffer).setUint32(0, json.length)
      body.set(json, 4)
      return Uint8Array.of(1, 5, 0, 0, 0, 0, 0, 0, ...body)
    }
    const header = { moveId: 1, session: 's', seq: 2, last: true, config: {} }
    expect(decodeDataCommand(importOf({ ...header, clockMs: 5 }))).toMatchObject({ clockMs: 5 })
    for (const bad of [{ last: false, clockMs: 5 }, { clockMs: -1 }, { clockMs: 1.5 }, { clockMs: '5' }])
      expect(() => decodeDataCommand(importOf({ ...header, ...bad }))).toThrow(/header is malformed/)
    expect(() => decodeDataCommand(importOf({ ...header, ordered: false }))).toThrow(/header is malformed/)
    expect(() => decodeDataCommand(importOf({ ...header, replaces: 1 }))).toThrow(/header is malformed/)
    // An ordered drop's body must name a move and say `ordered`.
    const dropOf = (body: string) => Uint8Array.of(1, 2, 0, 0, 0, 0, 0, 0, ...new TextEncoder().encode(body))
    expect(decodeDataCommand(dropOf('{"moveId":7,"ordered":true}'))).toEqual({
      type: 'drop',
      queue: '',
      partition: 0,
      moveId: 7,
      ordered: true,
    })
    for (const bad of ['{"moveId":7}', '{"moveId":-1,"ordered":true}', '{"ordered":true}', '{}'])
      expect(() => decodeDataCommand(dropOf(bad))).toThrow(/ordered drop body is malformed/)
    expect(() => decodeDataCommand(dropOf('{'))).toThrow()
  })
})
