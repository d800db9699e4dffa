import { BinaryWriter } from '@bufbuild/protobuf/wire'
import { describe, expect, it } from 'vitest'
import { RaftBatch } from './generated/mq/v1/peer'
import {
  QueueService as GeneratedQueueService,
  LeaseResponse,
  PartitionStats,
  ProduceRequest,
} from './generated/mq/v1/queue'
import { seededRandom as prng } from './seeded-random'
import { encodeWire, QueueService } from './services'
import { WireWriter } from './wire-writer'

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex')

/** Lengths on both sides of every varint size boundary a nested message can cross. */
const EDGE_LENGTHS = [0, 1, 126, 127, 128, 129, 16_381, 16_382, 16_383, 16_384, 16_385, 2_097_151, 2_097_152]

type Op = (w: WireWriter | BinaryWriter) => void

/** A random sequence of writer calls (nested messages up to `depth` deep). */
function randomOps(rand: () => number, depth: number): Op[] {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T
  const ops: Op[] = []
  const n = 1 + Math.floor(rand() * 8)
  for (let i = 0; i < n; i++) {
    const kind = Math.floor(rand() * 8)
    if (kind === 0) {
      const v = pick([
        0,
        1,
        127,
        128,
        16_383,
        16_384,
        2 ** 31 - 1,
        2 ** 31,
        2 ** 32 - 1,
        Math.floor(rand() * 2 ** 32),
      ])
      ops.push((w) => w.uint32(v))
    } else if (kind === 1) {
      const v = pick([0, 1, -1, -128, 2 ** 31 - 1, -(2 ** 31), Math.floor(rand() * 2 ** 32) - 2 ** 31])
      ops.push((w) => w.int32(v))
    } else if (kind === 2) {
      const v = pick([
        0,
        127,
        128,
        2 ** 32 - 1,
        2 ** 32,
        2 ** 35 + 3,
        2 ** 40 + 7,
        2 ** 53 - 1,
        Math.floor(rand() * 2 ** 53),
      ])
      const form = pick(['number', 'bigint', 'string'] as const)
      const value = form === 'number' ? v : form === 'bigint' ? BigInt(v) : String(v)
      ops.push((w) => w.uint64(value))
    } else if (kind === 3) {
      const v = rand() < 0.5
      ops.push((w) => w.bool(v))
    } else if (kind === 4) {
      const v = pick([0, -0, 1.5, -2.25, Number.MAX_VALUE, Number.MIN_VALUE, Infinity, rand() * 1e9])
      ops.push((w) => w.double(v))
    } else if (kind === 5) {
      const len = rand() < 0.2 ? pick(EDGE_LENGTHS.slice(0, -2)) : Math.floor(rand() * 300)
      const bytes = Uint8Array.from({ length: len }, (_, j) => (j * 31 + len) & 0xff)
      ops.push((w) => w.bytes(bytes))
    } else if (kind === 6) {
      const len = Math.floor(rand() * 200)
      const alphabet = ['a', 'Z', '0', '.', '-', 'é', 'ß', '中', '😀', '\u0000', '\u007f', '\u0080']
      const ascii = rand() < 0.5
      let s = ''
      for (let j = 0; j < len; j++)
        s += ascii ? String.fromCharCode(32 + Math.floor(rand() * 95)) : pick(alphabet)
      ops.push((w) => w.string(s))
    } else if (depth > 0) {
      const inner = randomOps(rand, depth - 1)
      ops.push((w) => {
        w.fork()
        for (const op of inner) op(w)
        w.join()
      })
    }
  }
  return ops
}

describe('WireWriter', () => {
  it('writes the bytes BinaryWriter writes, for 2,000 random sequences of calls (nested 3 deep)', () => {
    const rand = prng(20261130)
    for (let round = 0; round < 2_000; round++) {
      const ops = randomOps(rand, 3)
      const ours = new WireWriter()
      const theirs = new BinaryWriter()
      for (const op of ops) {
        op(ours)
        op(theirs)
      }
      const a = ours.finish()
      const b = theirs.finish()
      if (hex(a) !== hex(b)) expect({ round, ours: hex(a) }).toEqual({ round, ours: hex(b) })
    }
  })

  it('writes a nested message of every length across the varint boundaries exactly', () => {
    for (const len of EDGE_LENGTHS) {
      const body = new Uint8Array(len).fill(7)
      const write = (w: WireWriter | BinaryWriter) => {
        w.uint32(10).fork().uint32(18).fork().bytes(body).join().join().uint32(24).uint32(len)
        return w.finish()
      }
      expect(hex(write(new WireWriter()))).toBe(hex(write(new BinaryWriter())))
    }
  })

  it('encodes the hot messages as the generated code does, and they decode back', () => {
    const body = new Uint8Array(128).fill(65)
    const produce: ProduceRequest = {
      target: { queue: 'jobs', partition: 3, routeEpoch: 2 ** 33 },
      producerId: 'p-1',
      sequence: 2 ** 40 + 7,
      messages: [
        {
          body,
          weight: 1000,
          headers: { trace: 'ab', naïve: '中文😀' },
          key: 'k',
          delayMs: 5,
          dedupKey: 'd',
        },
        { body: new Uint8Array(0), weight: 1, headers: {}, key: '', delayMs: 0, dedupKey: '' },
        {
          body: new Uint8Array(70_000).fill(3),
          weight: 2,
          headers: {},
          key: 'ключ',
          delayMs: 0,
          dedupKey: '',
        },
      ],
    }
    const lease: LeaseResponse = {
      messages: Array.from({ length: 512 }, (_, i) => ({
        id: 2 ** 32 + i,
        leaseId: `${2 ** 32 + i}.1`,
        body,
        weight: 1 + (i % 1000),
        headers: (i % 7 === 0 ? { h: String(i) } : {}) as Record<string, string>,
        key: i % 3 === 0 ? `key-${i}` : '',
        deliveryCount: 1,
        deadlineMs: 1_796_072_684_764,
        enqueuedAtMs: 1_796_072_684_000,
      })),
      ackResults: Array.from({ length: 300 }, (_, i) => ({
        leaseId: `7.0.${2 ** 33 + i}.1`,
        outcome: 1 + (i % 3),
        deadlineMs: 0,
      })),
    }
    const raft: RaftBatch = {
      fromNode: 'n1',
      messages: [0, 1, 200, 20_000, 70_000].map((size, i) => ({
        groupId: i,
        type: 3,
        from: 'n1',
        to: 'n2',
        term: 5,
        logTerm: 5,
        index: 1000 + i,
        commit: 999,
        reject: i === 1,
        rejectHint: 0,
        context: 0,
        requestCtx: i === 2 ? 'read-1' : '',
        leaderTimeMs: i === 3 ? 1_796_072_684_999 : 0,
        entries: [
          {
            index: 1001 + i,
            term: 5,
            type: 0,
            timestampMs: 1_796_072_684_764,
            data: new Uint8Array(size).fill(i),
          },
        ],
      })),
    }
    const stats: PartitionStats = PartitionStats.fromPartial({
      weights: [{ weight: 3, ready: 10, targetShare: 0.25, achievedShare: 1 / 3 }],
    })
    for (const [codec, message] of [
      [ProduceRequest, produce],
      [ProduceRequest, { ...produce, sequenceBase: 2 ** 40 + 3 }],
      [ProduceRequest, { ...produce, sequenceBase: 0 }],
      [LeaseResponse, lease],
      [RaftBatch, raft],
      [PartitionStats, stats],
    ] as const) {
      const ours = encodeWire(codec as typeof ProduceRequest, message as ProduceRequest)
      expect(hex(ours)).toBe(hex((codec as typeof ProduceRequest).encode(message as ProduceRequest).finish()))
      expect((codec as typeof ProduceRequest).decode(new Uint8Array(ours))).toEqual(message)
    }
    expect(hex(QueueService.lease.responseSerialize(lease))).toBe(
      hex(GeneratedQueueService.lease.responseSerialize(lease)),
    )
  })

  it("decodes a response's strings as sent: a leading U+FEFF kept (the generated decoder drops it)", () => {
    const bom = '\uFEFF'
    const response = LeaseResponse.fromPartial({
      messages: [
        {
          id: 1,
          leaseId: '1.1',
          key: `${bom}k`,
          headers: { [`${bom}h`]: `${bom}v` },
          body: Uint8Array.of(1),
        },
      ],
    })
    const method = QueueService.lease
    const back = method.responseDeserialize(method.responseSerialize(response))
    expect(back.messages[0]).toMatchObject({ key: `${bom}k`, headers: { [`${bom}h`]: `${bom}v` } })
    // What the generated decoder alone makes of the same bytes.
    expect(
      GeneratedQueueService.lease.responseDeserialize(method.responseSerialize(response)).messages[0]?.key,
    ).toBe('k')
  })

  it("decodes a leased message's header named __proto__ as a header (the server stores and answers it)", () => {
    // As data-service answers a stored one: an own property (weighted-queue's codec, spread).
    const stored = { ...(JSON.parse('{"a":"1","__proto__":"x"}') as Record<string, string>) }
    const leased = (id: number, headers: Record<string, string>, body = Uint8Array.of(1)) => ({
      id,
      leaseId: `1.${id}`,
      body,
      weight: 1,
      headers,
      key: '',
      deliveryCount: 1,
      deadlineMs: 5,
      enqueuedAtMs: 1,
    })
    const response: LeaseResponse = {
      // The name in a body (or a key, a value) is no header.
      messages: [leased(1, { b: '__proto__' }, Buffer.from('__proto__')), leased(2, stored)],
      ackResults: [],
    }
    for (const method of [QueueService.lease, QueueService.listDead, QueueService.listReady]) {
      const back = method.responseDeserialize(method.responseSerialize(response))
      expect(back.messages[0]?.headers).toEqual({ b: '__proto__' })
      const headers = back.messages[1]?.headers ?? {}
      expect(Object.keys(headers).sort()).toEqual(['__proto__', 'a'])
      expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toBe('x')
      expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
    }
    // Bytes the generated decoder takes (an ack result's length short of its lease id, which
    // it reads past) decode as they did.
    const odd = Buffer.from('12020a095f5f70726f746f5f5f', 'hex')
    expect(QueueService.lease.responseDeserialize(odd)).toEqual(LeaseResponse.decode(odd))
  })

  it('hands out results of their own: later writers, at once or after, and a failed encode leave them intact', () => {
    const first = new WireWriter()
    const second = new WireWriter() // the scratch is taken: a buffer of its own
    first.string('first').bytes(new Uint8Array(5000).fill(1))
    second.string('second').bytes(new Uint8Array(70_000).fill(2))
    const a = first.finish()
    const b = second.finish()
    const aHex = hex(a)
    expect(() => encodeWire(ProduceRequest, { producerId: 'p', sequence: -1 } as ProduceRequest)).toThrow(
      'invalid uint64',
    )
    const c = encodeWire(ProduceRequest, { producerId: 'again', sequence: 1, messages: [] })
    expect(hex(a)).toBe(aHex)
    expect(hex(b)).toBe(
      hex(new BinaryWriter().string('second').bytes(new Uint8Array(70_000).fill(2)).finish()),
    )
    expect(ProduceRequest.decode(new Uint8Array(c))).toEqual(
      ProduceRequest.fromPartial({ producerId: 'again', sequence: 1 }),
    )
  })

  it('refuses values its field types cannot hold, and unbalanced nesting, with a clear error', () => {
    const w = new WireWriter()
    expect(() => w.uint32(-1)).toThrow('invalid uint32: -1')
    expect(() => w.uint32(2 ** 32)).toThrow('invalid uint32')
    expect(() => w.uint32(1.5)).toThrow('invalid uint32')
    expect(() => w.int32(2 ** 31)).toThrow('invalid int32')
    expect(() => w.uint64(-1)).toThrow('invalid uint64: -1')
    expect(() => w.uint64(2 ** 64)).toThrow('invalid uint64')
    expect(() => w.uint64('x')).toThrow('invalid uint64: x')
    expect(() => w.uint64(-1n)).toThrow('invalid uint64')
    expect(() => new WireWriter().join()).toThrow('fork stack empty')
    expect(() => new WireWriter().fork().finish()).toThrow('was not joined')
  })
})
