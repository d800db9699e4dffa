import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire'
import { describe, expect, it } from 'vitest'
import {
  ClusterStatusRequest,
  CreateQueueRequest,
  CreateTokenRequest,
  MetaService as GeneratedMetaService,
  GetRoutesRequest,
  ListQueuesRequest,
  TransferLeaderRequest,
  UpdateQueueRequest,
} from './generated/mq/v1/meta'
import {
  AckRequest,
  ExtendRequest,
  QueueService as GeneratedQueueService,
  LeaseRequest,
  ListDeadRequest,
  ListReadyRequest,
  NackRequest,
  type PartitionTarget,
  ProduceMessage,
  ProduceRequest,
  PurgeRequest,
  RedriveRequest,
  StatsRequest,
} from './generated/mq/v1/queue'
import { InvalidArgumentError } from './mq-error'
import { isRefusedRequest, type RefusedRequest } from './request-guard'
import {
  HEADERS_PER_MESSAGE_MAX,
  LEASE_IDS_MAX,
  PRODUCE_MESSAGES_MAX,
  REQUEST_FIELDS_MAX,
} from './request-limits'
import { HealthService, MetaService, PeerService, QueueService } from './services'

const produce = (bytes: Uint8Array): unknown => QueueService.produce.requestDeserialize(Buffer.from(bytes))
/** What the generated deserializer (no guard) made of `bytes`. */
const produceBefore = (bytes: Uint8Array): ProduceRequest =>
  GeneratedQueueService.produce.requestDeserialize(Buffer.from(bytes))

/** `value` as a RefusedRequest (fails the test when it is a decoded request). */
function refused(value: unknown): RefusedRequest {
  expect(isRefusedRequest(value), `expected a refusal, got ${JSON.stringify(value)?.slice(0, 200)}`).toBe(
    true,
  )
  const r = value as RefusedRequest
  expect(r.error).toBeInstanceOf(InvalidArgumentError)
  return r
}

/** `n` copies of `bytes`. */
function repeat(bytes: readonly number[], n: number): Buffer {
  const out = Buffer.alloc(bytes.length * n)
  for (let i = 0; i < n; i++) out.set(bytes, i * bytes.length)
  return out
}

const TARGET: PartitionTarget = { queue: 'orders', partition: 3, routeEpoch: 17 }

const message = (over: Partial<ProduceMessage> = {}): ProduceMessage => ({
  body: Uint8Array.of(1, 2, 3),
  weight: 0,
  headers: {},
  key: '',
  delayMs: 0,
  dedupKey: '',
  ...over,
})

const produceRequest = (messages: ProduceMessage[]): ProduceRequest => ({
  target: TARGET,
  producerId: 'p-1',
  sequence: 7,
  messages,
})

/** A ProduceRequest whose message `index` (of `count`) has the raw field written by `field`. */
function produceWithRawField(count: number, index: number, field: (w: BinaryWriter) => void): Uint8Array {
  const w = new BinaryWriter()
  w.tag(1, WireType.LengthDelimited).fork()
  w.tag(1, WireType.LengthDelimited).string(TARGET.queue)
  w.join()
  for (let i = 0; i < count; i++) {
    w.tag(4, WireType.LengthDelimited).fork()
    w.tag(1, WireType.LengthDelimited).bytes(Uint8Array.of(i))
    if (i === index) field(w)
    w.join()
  }
  return w.finish()
}

describe('request guard: bounds on repeated fields', () => {
  it('refuses 2,000,000 empty messages (4 MB) before decoding: INVALID_ARGUMENT, heap growth under 50 MB', () => {
    // `22 00`: field 4 (messages), length 0. Decoded, each was an object (~336 B): 33 M of them
    // in a 64 MiB request took ~10 GiB and the process down.
    const bytes = repeat([0x22, 0x00], 2_000_000)
    const before = process.memoryUsage().heapUsed
    const started = performance.now()
    const result = produce(bytes)
    const elapsedMs = performance.now() - started
    const grownBytes = process.memoryUsage().heapUsed - before
    const r = refused(result)
    expect(r.error.message).toBe(
      `ProduceRequest.messages has more than ${PRODUCE_MESSAGES_MAX} messages, the most one ProduceRequest may carry: send smaller batches`,
    )
    expect(r.error.retriable).toBe(false)
    expect(grownBytes).toBeLessThan(50 * 1024 * 1024)
    // It stops at the first message over the bound instead of walking 4 MB.
    expect(elapsedMs).toBeLessThan(500)
  })

  it('the heap measure sees decoded messages (control: 200,000 through the generated decoder)', () => {
    const bytes = repeat([0x22, 0x00], 200_000)
    const before = process.memoryUsage().heapUsed
    const decoded = ProduceRequest.decode(bytes)
    const grownBytes = process.memoryUsage().heapUsed - before
    expect(decoded.messages).toHaveLength(200_000)
    expect(grownBytes).toBeGreaterThan(20 * 1024 * 1024)
  })

  it(`takes ${PRODUCE_MESSAGES_MAX} messages and refuses one more`, () => {
    const at = produce(
      ProduceRequest.encode(
        produceRequest(Array.from({ length: PRODUCE_MESSAGES_MAX }, () => message())),
      ).finish(),
    )
    expect(isRefusedRequest(at)).toBe(false)
    expect((at as ProduceRequest).messages).toHaveLength(PRODUCE_MESSAGES_MAX)
    const over = produceRequest(Array.from({ length: PRODUCE_MESSAGES_MAX + 1 }, () => message()))
    const r = refused(produce(ProduceRequest.encode(over).finish()))
    expect(r.error.message).toContain(
      `ProduceRequest.messages has more than ${PRODUCE_MESSAGES_MAX} messages`,
    )
    // The refusal came after the target: it carries it (an auth check by queue sees the queue).
    expect(r.target).toEqual(TARGET)
  })

  it.each([
    ['ack', 'AckRequest'],
    ['nack', 'NackRequest'],
    ['extend', 'ExtendRequest'],
  ] as const)(`%s takes ${LEASE_IDS_MAX} lease ids and refuses one more`, (method, name) => {
    const deserialize = QueueService[method].requestDeserialize
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `lease-${i}`)
    // The three share fields 1 (target) and 2 (lease_ids).
    const encode = (n: number) =>
      Buffer.from(AckRequest.encode({ target: TARGET, leaseIds: ids(n) }).finish())
    expect((deserialize(encode(LEASE_IDS_MAX)) as AckRequest).leaseIds).toEqual(ids(LEASE_IDS_MAX))
    const r = refused(deserialize(encode(LEASE_IDS_MAX + 1)))
    expect(r.error.message).toBe(
      `${name}.lease_ids has more than ${LEASE_IDS_MAX} lease ids, the most one ${name} may carry: settle in smaller batches`,
    )
    // Empty lease ids (`12 00`) cost a string each: bounded the same way.
    const empties = Buffer.concat([Buffer.from([0x0a, 0x00]), repeat([0x12, 0x00], 1_000_000)])
    expect(refused(deserialize(empties)).error.message).toContain(
      `${name}.lease_ids has more than ${LEASE_IDS_MAX}`,
    )
  })

  it(`takes ${HEADERS_PER_MESSAGE_MAX} headers a message and refuses one more, naming the message`, () => {
    const headers = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`h${i}`, `v${i}`]))
    const at = produce(
      ProduceRequest.encode(
        produceRequest([message({ headers: headers(HEADERS_PER_MESSAGE_MAX) })]),
      ).finish(),
    )
    expect((at as ProduceRequest).messages[0]?.headers).toEqual(headers(HEADERS_PER_MESSAGE_MAX))
    const over = produceRequest([
      message(),
      message(),
      message({ headers: headers(HEADERS_PER_MESSAGE_MAX + 1) }),
    ])
    const r = refused(produce(ProduceRequest.encode(over).finish()))
    expect(r.error.message).toBe(
      `ProduceRequest.messages[2].headers has more than ${HEADERS_PER_MESSAGE_MAX} headers, the most one ProduceMessage may carry`,
    )
    expect(r.error.facts).toEqual({ messageIndex: 2 })
    // Entries count as sent, the same name repeated too (`1a 00`: an empty entry).
    const r2 = refused(produce(produceWithRawField(1, 0, (w) => w.raw(repeat([0x1a, 0x00], 100_000)))))
    expect(r2.error.message).toContain(
      `ProduceRequest.messages[0].headers has more than ${HEADERS_PER_MESSAGE_MAX}`,
    )
  })

  it(`refuses more than ${REQUEST_FIELDS_MAX} fields in all (a singular field repeated)`, () => {
    // `12 00` repeated: producer_id sent over and over (the decoder keeps the last, after
    // decoding every one: 16 M took ~1.2 s).
    const r = refused(produce(repeat([0x12, 0x00], REQUEST_FIELDS_MAX + 1)))
    expect(r.error.message).toBe(
      `ProduceRequest: more than ${REQUEST_FIELDS_MAX} fields, the most one request may hold`,
    )
    expect(isRefusedRequest(produce(repeat([0x12, 0x00], 1_000)))).toBe(false)
  })

  it(`takes the largest Produce the other bounds allow: ${PRODUCE_MESSAGES_MAX} messages of ${HEADERS_PER_MESSAGE_MAX} headers, every field set`, () => {
    // Three fields a header (its entry, name and value): 3,006,007 fields in all. Under the
    // bound of 1,000,000 the SDK's default batch (512 messages, 1 MiB) of messages with 998
    // headers of two-byte names was refused, every message of it valid, and the refusal named
    // one of them (messageIndex), which the SDK then failed as invalid.
    const headers = Object.fromEntries(
      Array.from({ length: HEADERS_PER_MESSAGE_MAX }, (_, i) => [i.toString(36).padStart(2, '0'), 'v']),
    )
    const full = (i: number) =>
      message({ body: Uint8Array.of(i & 0xff), weight: 2, headers, key: 'k', delayMs: 5, dedupKey: `d${i}` })
    const bytes = ProduceRequest.encode({
      ...produceRequest(Array.from({ length: PRODUCE_MESSAGES_MAX }, (_, i) => full(i))),
      sequenceBase: 3,
    }).finish()
    const at = produce(bytes)
    expect(isRefusedRequest(at), isRefusedRequest(at) ? at.error.message : '').toBe(false)
    expect((at as ProduceRequest).messages).toHaveLength(PRODUCE_MESSAGES_MAX)
    expect((at as ProduceRequest).messages[999]?.headers).toEqual(headers)
  })

  it('GetRoutes and CreateToken are bounded too', () => {
    const r = refused(MetaService.getRoutes.requestDeserialize(repeat([0x0a, 0x00], 100_001)))
    expect(r.error.message).toContain('GetRoutesRequest.queues has more than 100000 queue names')
    const r2 = refused(MetaService.createToken.requestDeserialize(repeat([0x12, 0x00], 1_001)))
    expect(r2.error.message).toContain('CreateTokenRequest.roles has more than 1000 roles')
  })
})

describe('request guard: strict UTF-8', () => {
  it('refuses the dedup keys FF and FE (they decoded to the same U+FFFD and collided), naming the field', () => {
    for (const bad of [0xff, 0xfe]) {
      const bytes = produceWithRawField(2, 1, (w) =>
        w.tag(6, WireType.LengthDelimited).bytes(Uint8Array.of(bad)),
      )
      const r = refused(produce(bytes))
      expect(r.error.message).toBe(
        'ProduceRequest.messages[1].dedup_key is not valid UTF-8: string fields must be UTF-8 (binary data belongs in a bytes field)',
      )
      expect(r.error.facts).toEqual({ messageIndex: 1 })
    }
  })

  it('names the string at fault anywhere in a request', () => {
    const badAck = new BinaryWriter()
    badAck.tag(2, WireType.LengthDelimited).string('fine')
    badAck.tag(2, WireType.LengthDelimited).bytes(Uint8Array.of(0x61, 0xc3)) // a truncated 2-byte sequence
    const r = refused(QueueService.ack.requestDeserialize(Buffer.from(badAck.finish())))
    expect(r.error.message).toMatch(/^AckRequest\.lease_ids\[1\] is not valid UTF-8/)

    const badQueue = new BinaryWriter()
    badQueue
      .tag(1, WireType.LengthDelimited)
      .fork()
      .tag(1, WireType.LengthDelimited)
      .bytes(Uint8Array.of(0xed, 0xa0, 0x80))
      .join()
    const r2 = refused(QueueService.lease.requestDeserialize(Buffer.from(badQueue.finish())))
    expect(r2.error.message).toMatch(/^LeaseRequest\.target\.queue is not valid UTF-8/) // a surrogate
    expect(r2.target).toBeUndefined()

    const badHeader = produceWithRawField(1, 0, (w) =>
      w
        .tag(3, WireType.LengthDelimited)
        .fork()
        .tag(1, WireType.LengthDelimited)
        .bytes(Uint8Array.of(0xc0, 0x80))
        .join(),
    )
    expect(refused(produce(badHeader)).error.message).toMatch(
      /^ProduceRequest\.messages\[0\]\.headers\[0\]\.key is not valid UTF-8/,
    )

    const badName = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .bytes(Uint8Array.of(0xf8, 0x88, 0x80, 0x80, 0x80))
    const r3 = refused(MetaService.createQueue.requestDeserialize(Buffer.from(badName.finish())))
    expect(r3.error.message).toMatch(/^CreateQueueRequest\.name is not valid UTF-8/)
  })

  it('decodes valid UTF-8 of 1 to 4 bytes exactly, and keeps a leading byte-order mark', () => {
    const texts = ['a', 'é', '€', '😀', 'mixed ascii é € 😀 end', '\uFEFFbom', 'bom']
    const request = produceRequest(texts.map((t) => message({ dedupKey: t, key: t, headers: { [t]: t } })))
    const bytes = ProduceRequest.encode(request).finish()
    const decoded = produce(bytes) as ProduceRequest
    expect(decoded.messages.map((m) => [m.key, m.dedupKey, m.headers])).toEqual(
      texts.map((t) => [t, t, { [t]: t }]),
    )
    // Decoded as before, "\uFEFFbom" lost its mark and became a duplicate of "bom".
    expect(produceBefore(bytes).messages[5]?.dedupKey).toBe('bom')
  })
})

describe('request guard: uint64 values', () => {
  it('refuses a uint64 above 2^53 - 1 naming the field and the value', () => {
    const bytes = produceWithRawField(1, 0, (w) => w.tag(5, WireType.Varint).uint64(2n ** 53n))
    const r = refused(produce(bytes))
    expect(r.error.message).toBe(
      'ProduceRequest.messages[0].delay_ms is 9007199254740992, above 2^53 - 1 (9007199254740991), the largest integer mq takes',
    )
    expect(r.error.facts).toEqual({ messageIndex: 0 })

    const epoch = new BinaryWriter()
    epoch
      .tag(1, WireType.LengthDelimited)
      .fork()
      .tag(3, WireType.Varint)
      .uint64(2n ** 64n - 1n)
      .join()
    const r2 = refused(QueueService.stats.requestDeserialize(Buffer.from(epoch.finish())))
    expect(r2.error.message).toMatch(
      /^StatsRequest\.target\.route_epoch is 18446744073709551615, above 2\^53 - 1/,
    )

    const group = new BinaryWriter().tag(1, WireType.Varint).uint64(2n ** 60n)
    const r3 = refused(MetaService.transferLeader.requestDeserialize(Buffer.from(group.finish())))
    expect(r3.error.message).toMatch(/^TransferLeaderRequest\.group_id is 1152921504606846976/)
  })

  it('takes 2^53 - 1 exactly, and leaves uint32 fields to the decoder (it truncates, as protobuf does)', () => {
    const request = produceRequest([message({ delayMs: Number.MAX_SAFE_INTEGER })])
    request.sequence = Number.MAX_SAFE_INTEGER
    const decoded = produce(ProduceRequest.encode(request).finish()) as ProduceRequest
    expect([decoded.sequence, decoded.messages[0]?.delayMs]).toEqual([
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
    ])
    const weight = produceWithRawField(1, 0, (w) => w.tag(2, WireType.Varint).uint64(2n ** 40n + 5n))
    expect((produce(weight) as ProduceRequest).messages[0]?.weight).toBe(5)
  })
})

describe('request guard: headers named __proto__', () => {
  it('keeps a header named __proto__ as an own property (the generated decoder dropped it)', () => {
    const bytes = produceWithRawField(2, 1, (w) => {
      w.tag(3, WireType.LengthDelimited)
        .fork()
        .tag(1, WireType.LengthDelimited)
        .string('a')
        .tag(2, WireType.LengthDelimited)
        .string('1')
        .join()
      w.tag(3, WireType.LengthDelimited)
        .fork()
        .tag(1, WireType.LengthDelimited)
        .string('__proto__')
        .tag(2, WireType.LengthDelimited)
        .string('x')
        .join()
    })
    expect(ProduceRequest.decode(bytes).messages[1]?.headers).toEqual({ a: '1' })
    const headers = (produce(bytes) as ProduceRequest).messages[1]?.headers as Record<string, string>
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
    expect(Object.keys(headers)).toEqual(['a', '__proto__'])
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toBe('x')
    // And it is encoded again as sent.
    const again = ProduceMessage.encode({ ...message(), body: Uint8Array.of(1), headers }).finish()
    expect(ProduceMessage.decode(again).headers).toEqual({ a: '1' }) // (the plain decoder drops it again)
    expect(Buffer.from(again).includes(Buffer.from('__proto__'))).toBe(true)
  })

  it('takes the last of repeated entries, and an entry without a value as empty', () => {
    const entry = (w: BinaryWriter, key: string, value?: string) => {
      w.tag(3, WireType.LengthDelimited).fork().tag(1, WireType.LengthDelimited).string(key)
      if (value !== undefined) w.tag(2, WireType.LengthDelimited).string(value)
      w.join()
    }
    const last = produceWithRawField(1, 0, (w) => {
      entry(w, '__proto__', 'first')
      entry(w, '__proto__', 'second')
    })
    expect(
      Object.getOwnPropertyDescriptor((produce(last) as ProduceRequest).messages[0]?.headers, '__proto__')
        ?.value,
    ).toBe('second')
    const empty = produceWithRawField(1, 0, (w) => entry(w, '__proto__'))
    expect(
      Object.getOwnPropertyDescriptor((produce(empty) as ProduceRequest).messages[0]?.headers, '__proto__')
        ?.value,
    ).toBe('')
  })
})

// The generated decoder threw a plain Error on most of these (grpc-js: INTERNAL "Error
// deserializing request", logged as the server's fault), or misread them without a word.
describe('request guard: malformed bytes', () => {
  const cases: [string, number[], RegExp][] = [
    [
      'a length past the end',
      [0x12, 0x05, 0x61],
      /^ProduceRequest: not a valid protobuf encoding \(a length past the end of its message, at byte 0\)/,
    ],
    ['field number 0', [0x00, 0x00], /field number 0, at byte 0/],
    ['a group (wire type 3)', [0x0b, 0x0c], /wire type 3/],
    ['wire type 7', [0x0f], /wire type 7/],
    [
      'a varint of 11 bytes',
      [0x18, ...Array(10).fill(0xff), 0x01],
      /a varint longer than 10 bytes, at byte 1/,
    ],
    ['a truncated varint', [0x18, 0xff], /a varint past the end of its message, at byte 1/],
    ['a fixed64 past the end', [0x39, 1, 2, 3], /a fixed-size value past the end/],
    // messages[0] claims 2 bytes but holds a 5-byte key: the generated decoder would read on into
    // the parent's bytes (and take what follows as the parent's fields).
    [
      'a field across its message end',
      [0x22, 0x02, 0x22, 0x05, 0x22, 0x00, 0x22, 0x00, 0x22],
      /^ProduceRequest\.messages\[0\]: not a valid protobuf encoding \(a length past the end/,
    ],
  ]
  it.each(cases)('refuses %s with INVALID_ARGUMENT', (_, bytes, message) => {
    const r = refused(produce(Uint8Array.from(bytes)))
    expect(r.error.message).toMatch(message)
  })

  it('skips fields it does not know, of every wire type, as the decoder does', () => {
    const request = produceRequest([message({ key: 'k' })])
    const w = ProduceRequest.encode(request)
    w.tag(99, WireType.Varint).uint64(2n ** 63n) // unknown: no number check
    w.tag(98, WireType.Bit64).fixed64(1n)
    w.tag(97, WireType.Bit32).fixed32(1)
    w.tag(96, WireType.LengthDelimited).bytes(Uint8Array.of(0xff, 0x00)) // unknown: not a string
    w.tag(4, WireType.Varint).uint32(1) // a known field with another wire type: skipped
    const bytes = w.finish()
    expect(produce(bytes)).toEqual(produceBefore(bytes))
    expect((produce(bytes) as ProduceRequest).messages.map((m) => m.key)).toEqual(['k'])
  })
})

describe('request guard: normal requests decode exactly as before', () => {
  const target = TARGET
  const queueRequests: [keyof typeof QueueService, { encode(m: never): BinaryWriter }, unknown][] = [
    [
      'produce',
      ProduceRequest,
      {
        target,
        producerId: 'producer-é',
        sequence: 2 ** 40 + 1,
        sequenceBase: 2 ** 40,
        messages: [
          message({
            weight: 7,
            headers: { 'content-type': 'text/plain', 'x-€': 'ü' },
            key: 'k',
            delayMs: 5_000,
            dedupKey: 'd',
          }),
          message({ body: new Uint8Array(300).fill(0xff) }),
          message({ body: new Uint8Array(0) }),
        ],
      },
    ],
    [
      'lease',
      LeaseRequest,
      {
        target,
        consumerId: 'c',
        max: 500,
        visibilityMs: 30_000,
        waitMs: 1_000,
        attempt: 'a-1',
        attemptRepeat: true,
        ackLeaseIds: ['7.0.12.1', 'ç'],
      },
    ],
    ['ack', AckRequest, { target, leaseIds: ['a', 'b', 'ç'] }],
    ['nack', NackRequest, { target, leaseIds: ['a'], delayMs: 10, release: true }],
    ['extend', ExtendRequest, { target, leaseIds: ['a', 'b'], extendMs: 60_000 }],
    ['purge', PurgeRequest, { target }],
    ['listDead', ListDeadRequest, { target, limit: 100, afterId: 2 ** 50 }],
    ['listReady', ListReadyRequest, { target, limit: 10 }],
    ['redrive', RedriveRequest, { target, max: 1_000, throughPlace: 2 ** 40, placeOnly: true }],
    ['purgeDead', PurgeRequest, { target }],
    ['stats', StatsRequest, { target }],
    ['produce', ProduceRequest, { producerId: '', sequence: 0, messages: [] }],
  ]
  it.each(queueRequests)('Queue.%s', (method, codec, request) => {
    const bytes = codec.encode(request as never).finish()
    const decoded = QueueService[method].requestDeserialize(Buffer.from(bytes))
    expect(decoded).toEqual(GeneratedQueueService[method].requestDeserialize(Buffer.from(bytes)))
    expect(codec.encode(decoded as never).finish()).toEqual(bytes)
  })

  const metaRequests: [keyof typeof MetaService, { encode(m: never): BinaryWriter }, unknown][] = [
    ['getRoutes', GetRoutesRequest, { queues: ['a', 'b'] }],
    [
      'createQueue',
      CreateQueueRequest,
      CreateQueueRequest.fromPartial({
        name: 'orders',
        config: {
          partitions: 4,
          visibilityTimeoutMs: 30_000,
          maxDeliveries: 5,
          deadLetterQueue: 'dlq',
          messageBytesMax: 1 << 20,
          queueLengthMax: 2 ** 40,
          strictPriority: true,
          dedupWindowMs: 60_000,
          engine: 'level',
          messageTtlMs: 3_600_000,
          paused: true,
          orderedKeys: true,
          deliveryRate: 100,
          retryBackoffMinMs: 100,
          retryBackoffMaxMs: 10_000,
        },
      }),
    ],
    [
      'updateQueue',
      UpdateQueueRequest,
      UpdateQueueRequest.fromPartial({
        name: 'orders',
        update: { visibilityTimeoutMs: 1, partitions: 8, paused: false },
      }),
    ],
    ['listQueues', ListQueuesRequest, { prefix: 'o', limit: 10, pageToken: 't' }],
    ['clusterStatus', ClusterStatusRequest, {}],
    ['transferLeader', TransferLeaderRequest, { groupId: 3, toNodeId: 'n2' }],
    [
      'createToken',
      CreateTokenRequest,
      { name: 't', roles: ['producer:orders*', 'admin'], ttlMs: 86_400_000 },
    ],
  ]
  it.each(metaRequests)('Meta.%s', (method, codec, request) => {
    const bytes = codec.encode(request as never).finish()
    const decoded = MetaService[method].requestDeserialize(Buffer.from(bytes))
    expect(decoded).toEqual(GeneratedMetaService[method].requestDeserialize(Buffer.from(bytes)))
    expect(decoded).toEqual(request)
  })

  it('every Peer and Health method refuses bytes its decoder cannot read, naming the message', () => {
    for (const service of [PeerService, HealthService] as const) {
      for (const [name, method] of Object.entries(service)) {
        const r = (method as { requestDeserialize: (b: Buffer) => unknown }).requestDeserialize(
          Buffer.from([0x0f]),
        )
        expect(isRefusedRequest(r), name).toBe(true)
        expect((r as RefusedRequest).error.message, name).toMatch(
          /^\w+: not a valid protobuf encoding \(cant skip wire type 7\)/,
        )
      }
    }
  })

  it('every guarded method refuses malformed bytes (the guard is wired to each)', () => {
    for (const service of [QueueService, MetaService] as const) {
      for (const [name, method] of Object.entries(service)) {
        const r = (method as { requestDeserialize: (b: Buffer) => unknown }).requestDeserialize(
          Buffer.from([0x00]),
        )
        expect(isRefusedRequest(r), name).toBe(true)
      }
    }
  })
})
