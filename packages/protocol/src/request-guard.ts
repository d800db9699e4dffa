import { isUtf8 } from 'node:buffer'
import { BinaryReader } from '@bufbuild/protobuf/wire'
import { PartitionTarget } from './generated/mq/v1/queue'
import { InvalidArgumentError } from './mq-error'
import { REQUEST_FIELDS_MAX } from './request-limits'

// A guard on a client request's bytes, run by grpc-js (as the method's requestDeserialize)
// before the generated decoder: it walks the protobuf wire format without making objects,
// counts the repeated fields that would become objects, checks that every string is UTF-8 and
// every uint64 a safe integer, and refuses a request that breaks a rule with a RefusedRequest
// that names the field. Only what it accepts is decoded, by the generated decoder, with strict
// UTF-8.

/** How the walk checks a field's value. Closed set; maps are string → string only. */
export const FieldKind = {
  /** uint32, int32, bool, enum: any varint of at most 10 bytes (the decoder truncates). */
  Varint: 0,
  /** uint64: at most 2^53 - 1, so that the decoder's number is exact. */
  Uint64: 1,
  String: 2,
  Bytes: 3,
  Message: 4,
  /** map<string, string>: repeated entries { 1: key, 2: value }. */
  Map: 5,
} as const
export type FieldKind = (typeof FieldKind)[keyof typeof FieldKind]

export interface FieldRule {
  /** The field's name in the .proto file (refusals name it so). */
  readonly name: string
  /** The property the generated code gives it (ts-proto: camelCase). */
  readonly prop: string
  readonly number: number
  readonly kind: FieldKind
  /** Message and Map: the rule of its messages (a map's entry). */
  readonly message: MessageRule | undefined
  /** Repeated fields (maps too): the most occurrences one message may hold; 0: singular. */
  readonly max: number
  /** Repeated fields: what a refusal calls its elements ("messages", "lease ids"). */
  readonly what: string
  /** Repeated fields: what a refusal tells the caller to do ("send smaller batches"). */
  readonly advice: string
  /** The request's PartitionTarget: a refusal carries it (RefusedRequest.target). */
  readonly target: boolean
  /** Its element's place is the refusal's `messageIndex` fact (ProduceRequest.messages). */
  readonly messageIndex: boolean
  /** Its counter's place among its message's repeated fields (set by messageRule). */
  readonly slot: number
}

export interface MessageRule {
  /** The message's name in the .proto file (`ProduceMessage`, `ProduceMessage.HeadersEntry`). */
  readonly name: string
  /** Its fields by number (undefined: a field this version does not know; it is skipped). */
  readonly byNumber: readonly (FieldRule | undefined)[]
  readonly fields: readonly FieldRule[]
  /** How many of its fields are repeated (each has a counter while it is walked). */
  readonly repeatedCount: number
}

type FieldSpec = Omit<FieldRule, 'number' | 'slot' | 'prop'>

/** Options of a repeated field or map: its bound and what a refusal says about it. */
interface RepeatedOptions {
  readonly max: number
  readonly what: string
  readonly advice?: string
  readonly messageIndex?: boolean
}

/** How many nested messages deep a rule may go (PartitionTarget in a request: 2). */
const DEPTH_MAX = 4
/** How many repeated fields one message's rule may have. */
const SLOTS_MAX = 4

const spec = (name: string, kind: FieldKind, message?: MessageRule): FieldSpec => ({
  name,
  kind,
  message,
  max: 0,
  what: '',
  advice: '',
  target: false,
  messageIndex: false,
})

/** A uint32, int32, bool or enum field. */
export const varintField = (name: string): FieldSpec => spec(name, FieldKind.Varint)
/** A uint64 field: values above 2^53 - 1 are refused. */
export const uint64Field = (name: string): FieldSpec => spec(name, FieldKind.Uint64)
/** A string field: invalid UTF-8 is refused. */
export const stringField = (name: string): FieldSpec => spec(name, FieldKind.String)
export const bytesField = (name: string): FieldSpec => spec(name, FieldKind.Bytes)
/** A singular message field. */
export const messageField = (name: string, rule: MessageRule): FieldSpec =>
  spec(name, FieldKind.Message, rule)
/** The request's PartitionTarget (a refusal after it carries it; see RefusedRequest). */
export const targetField = (name: string, rule: MessageRule): FieldSpec => ({
  ...messageField(name, rule),
  target: true,
})

/** `field` repeated, at most `options.max` times in one message. */
export function repeated(field: FieldSpec, options: RepeatedOptions): FieldSpec {
  if (!(Number.isInteger(options.max) && options.max >= 1))
    throw new RangeError(`${field.name}: max must be ≥ 1`)
  return {
    ...field,
    max: options.max,
    what: options.what,
    advice: options.advice ?? '',
    messageIndex: options.messageIndex === true,
  }
}

/** A map<string, string> field of message `owner`, at most `options.max` entries. */
export function mapField(owner: string, name: string, options: RepeatedOptions): FieldSpec {
  const entry = messageRule(`${owner}.${pascal(name)}Entry`, {
    1: stringField('key'),
    2: stringField('value'),
  })
  return repeated(spec(name, FieldKind.Map, entry), options)
}

/**
 * The rule of message `name` from its fields by number. Throws (at module load) when a rule
 * breaks what the walk relies on: at most SLOTS_MAX repeated fields.
 */
export function messageRule(name: string, fields: Readonly<Record<number, FieldSpec>>): MessageRule {
  const byNumber: (FieldRule | undefined)[] = []
  const list: FieldRule[] = []
  let slots = 0
  for (const [key, s] of Object.entries(fields)) {
    const number = Number(key)
    const rule: FieldRule = { ...s, number, prop: camel(s.name), slot: s.max > 0 ? slots++ : -1 }
    byNumber[number] = rule
    list.push(rule)
  }
  if (slots > SLOTS_MAX) throw new RangeError(`${name}: more than ${SLOTS_MAX} repeated fields`)
  return { name, byNumber, fields: list, repeatedCount: slots }
}

/**
 * Throws unless `rule` is one the walk can check: at most DEPTH_MAX messages deep; maps only
 * where every message on the way is repeated (a `__proto__` header is restored by its place,
 * which a singular message sent twice would leave stale); no repeated numbers (they may come
 * packed); a target only at the top.
 */
export function assertRequestRule(rule: MessageRule, depth = 0, underSingular = false): void {
  if (depth >= DEPTH_MAX) throw new RangeError(`${rule.name}: nested more than ${DEPTH_MAX} deep`)
  for (const f of rule.fields) {
    if (f.target && depth > 0) throw new RangeError(`${rule.name}.${f.name}: a target below the top`)
    if (f.kind === FieldKind.Map && underSingular)
      throw new RangeError(`${rule.name}.${f.name}: a map under a singular message`)
    // A repeated number may come packed (one length-delimited field), which the walk does not count.
    if (f.max > 0 && (f.kind === FieldKind.Varint || f.kind === FieldKind.Uint64))
      throw new RangeError(`${rule.name}.${f.name}: repeated numbers are not supported`)
    if (f.kind === FieldKind.Message && f.message)
      assertRequestRule(f.message, depth + 1, underSingular || f.max === 0)
  }
}

/** snake_case → camelCase, as ts-proto names properties. */
function camel(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())
}

function pascal(name: string): string {
  const c = camel(name)
  return c.charAt(0).toUpperCase() + c.slice(1)
}

const REFUSED = Symbol.for('@mq/protocol.RefusedRequest')

/**
 * What a guarded requestDeserialize returns instead of a request it refuses (grpc-js turns a
 * thrown error into INTERNAL "Error deserializing request" and drops its message). It reaches
 * the handler as the call's request: `unaryHandler` answers it with `error` (INVALID_ARGUMENT)
 * before the handler runs; any other handler of a guarded service must check
 * `isRefusedRequest(call.request)` first. `target` is the request's PartitionTarget when the
 * refusal came after it (so that an auth check by queue sees the queue), else undefined.
 */
export class RefusedRequest {
  readonly [REFUSED] = true
  readonly error: InvalidArgumentError
  readonly target: PartitionTarget | undefined

  constructor(error: InvalidArgumentError, target?: PartitionTarget) {
    this.error = error
    this.target = target
  }
}

/** Whether `value` is a RefusedRequest (by a global brand: any copy of this module). */
export function isRefusedRequest(value: unknown): value is RefusedRequest {
  return typeof value === 'object' && value !== null && (value as { [REFUSED]?: unknown })[REFUSED] === true
}

/** A generated message decoder. */
export interface Decoder<T> {
  readonly decode: (input: BinaryReader | Uint8Array, length?: number) => T
}

/** Fatal on invalid UTF-8 (the walk refused it already), and a leading U+FEFF kept. */
const utf8Exact = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const decodeUtf8Exact = (bytes: Uint8Array): string => utf8Exact.decode(bytes)

/**
 * requestDeserialize for a client-facing method: checks `bytes` against `rule` (walkRequest),
 * then decodes them with `decoder`, whose strings are decoded strictly (a byte-order mark
 * kept: two keys that differ by it stay two). Returns the request, or a RefusedRequest in its
 * place (typed as the request: grpc-js hands it to the handler). Throws only if the decoder
 * fails on bytes the walk accepted (a bug in the rule, not the client's fault).
 */
export function guardedDeserializer<T>(rule: MessageRule, decoder: Decoder<T>): (bytes: Buffer) => T {
  assertRequestRule(rule)
  return (bytes) => {
    const walked = walkRequest(bytes, rule)
    if (walked instanceof RefusedRequest) return walked as T
    const request = decoder.decode(new BinaryReader(bytes, decodeUtf8Exact))
    if (walked !== undefined) for (const f of walked) restoreProtoKey(request, f)
    return request
  }
}

/**
 * requestDeserialize for a method whose requests are not guarded (Health, Peer): decodes
 * `bytes` with `decoder`, or returns a RefusedRequest (INVALID_ARGUMENT naming message `name`
 * and the decoder's complaint) when it throws. grpc-js answered those bytes INTERNAL "Error
 * deserializing request", a server fault, and a peer took it for a node gone.
 */
export function decodingDeserializer<T>(name: string, decoder: Decoder<T>): (bytes: Buffer) => T {
  return (bytes) => {
    try {
      return decoder.decode(bytes)
    } catch (error) {
      const problem = error instanceof Error ? error.message : String(error)
      const refusal = `${name}: not a valid protobuf encoding (${problem}); encode requests with a protobuf library`
      return new RefusedRequest(new InvalidArgumentError(refusal)) as T
    }
  }
}

/**
 * A map entry named `__proto__`: the generated decoder assigns entries (`map[key] = value`),
 * which for that key sets no property; restored after decoding as an own property (as
 * weighted-queue's header codec stores it).
 */
interface ProtoKeyFixup {
  /** The way from the request to the map: [prop, index] of each repeated message, then the map's prop. */
  readonly path: readonly (string | number)[]
  readonly valueStart: number
  readonly valueEnd: number
  readonly bytes: Uint8Array
}

function restoreProtoKey(request: unknown, f: ProtoKeyFixup): void {
  let at = request as Record<string | number, unknown>
  for (const step of f.path) at = at[step] as Record<string | number, unknown>
  defineProtoKey(at, decodeUtf8Exact(f.bytes.subarray(f.valueStart, f.valueEnd)))
}

/** Sets a decoded map's entry named `__proto__` as an own property (see ProtoKeyFixup). */
export function defineProtoKey(map: object, value: string): void {
  Object.defineProperty(map, '__proto__', { value, enumerable: true, writable: true, configurable: true })
}

/** A refusal inside the walk (thrown to its top, which makes the RefusedRequest). */
class Refusal {
  constructor(
    readonly message: string,
    readonly messageIndex: number | undefined,
  ) {}
}

const PROTO_KEY = [0x5f, 0x5f, 0x70, 0x72, 0x6f, 0x74, 0x6f, 0x5f, 0x5f] // "__proto__"

/**
 * Checks a request's bytes against `rule` without decoding them: wire format well formed and
 * every field inside its message (the generated decoder trusts lengths and would read across a
 * nested message's end), repeated fields within their bounds, strings UTF-8, uint64 values at
 * most 2^53 - 1, at most REQUEST_FIELDS_MAX fields. O(fields + string bytes); stops at the
 * first problem. Returns undefined (decode as is), the `__proto__` map entries to restore after
 * decoding, or the RefusedRequest that says what is wrong.
 */
export function walkRequest(
  bytes: Uint8Array,
  rule: MessageRule,
): RefusedRequest | ProtoKeyFixup[] | undefined {
  const walk = new Walk(bytes, rule)
  try {
    walk.message(rule, 0, bytes.length, 0)
    return walk.fixups
  } catch (error) {
    if (!(error instanceof Refusal)) throw error
    const facts = error.messageIndex !== undefined ? { messageIndex: error.messageIndex } : {}
    const target =
      walk.targetEnd >= 0
        ? PartitionTarget.decode(
            new BinaryReader(bytes.subarray(walk.targetStart, walk.targetEnd), decodeUtf8Exact),
          )
        : undefined
    return new RefusedRequest(new InvalidArgumentError(error.message, facts), target)
  }
}

class Walk {
  readonly #buf: Uint8Array
  readonly #root: MessageRule
  /** Where the last varint read by #varint ended. */
  #pos = 0
  #fieldsLeft = REQUEST_FIELDS_MAX
  /** Occurrences of each repeated field of the message being walked at each depth. */
  readonly #counts = new Int32Array(DEPTH_MAX * SLOTS_MAX)
  /** The field (and element, -1 if singular) being walked at each depth: a refusal's path. */
  readonly #pathFields: FieldRule[] = []
  readonly #pathIndexes: number[] = []
  /** The key (-1: absent) and the value (empty: absent) of the map entry walked last. */
  #keyStart = -1
  #keyEnd = -1
  #valueStart = 0
  #valueEnd = 0
  /** The payload of the last complete top-level target (-1: none yet). */
  targetStart = -1
  targetEnd = -1
  fixups: ProtoKeyFixup[] | undefined

  constructor(buf: Uint8Array, root: MessageRule) {
    this.#buf = buf
    this.#root = root
  }

  /** Walks the message of `rule` in [start, end) at `depth`. */
  message(rule: MessageRule, start: number, end: number, depth: number): void {
    const buf = this.#buf
    const counts = this.#counts
    const base = depth * SLOTS_MAX
    for (let s = 0; s < rule.repeatedCount; s++) counts[base + s] = 0
    let pos = start
    while (pos < end) {
      if (--this.#fieldsLeft < 0)
        this.#refuse(depth, `more than ${REQUEST_FIELDS_MAX} fields, the most one request may hold`)
      const tagAt = pos
      let tag = buf[pos] as number
      if (tag < 0x80) pos++
      else {
        tag = this.#varint(pos, end, depth)
        pos = this.#pos
        if (tag > 0xffff_ffff) this.#malformed(depth, tagAt, 'a tag above 2^32')
      }
      const number = Math.floor(tag / 8)
      const wireType = tag % 8
      if (number === 0) this.#malformed(depth, tagAt, 'field number 0')
      const field = rule.byNumber[number]
      switch (wireType) {
        case 0: {
          const value = this.#varint(pos, end, depth)
          if (value > Number.MAX_SAFE_INTEGER && field?.kind === FieldKind.Uint64) {
            const exact = exactVarint(buf, pos)
            this.#refuseField(
              depth,
              field,
              -1,
              `is ${exact}, above 2^53 - 1 (${Number.MAX_SAFE_INTEGER}), the largest integer mq takes`,
            )
          }
          pos = this.#pos
          break
        }
        case 1:
        case 5: {
          const size = wireType === 1 ? 8 : 4
          if (size > end - pos) this.#malformed(depth, pos, 'a fixed-size value past the end of its message')
          pos += size
          break
        }
        case 2: {
          let length = buf[pos] as number
          if (length < 0x80 && pos < end) pos++
          else {
            length = this.#varint(pos, end, depth)
            pos = this.#pos
          }
          if (length > end - pos) this.#malformed(depth, tagAt, 'a length past the end of its message')
          const to = pos + length
          if (field !== undefined && field.kind !== FieldKind.Varint && field.kind !== FieldKind.Uint64)
            this.#lengthDelimited(field, rule, pos, to, depth)
          pos = to
          break
        }
        default:
          this.#malformed(
            depth,
            tagAt,
            `wire type ${wireType} (groups are not used by mq; 6 and 7 do not exist)`,
          )
      }
    }
  }

  #lengthDelimited(field: FieldRule, rule: MessageRule, from: number, to: number, depth: number): void {
    let index = -1
    if (field.max > 0) {
      const slot = depth * SLOTS_MAX + field.slot
      index = this.#counts[slot] as number
      if (index >= field.max) {
        this.#refuseField(
          depth,
          field,
          -1,
          `has more than ${field.max} ${field.what}, the most one ${rule.name} may carry${field.advice ? `: ${field.advice}` : ''}`,
        )
      }
      this.#counts[slot] = index + 1
    }
    switch (field.kind) {
      case FieldKind.String:
        if (!utf8(this.#buf, from, to))
          this.#refuseField(
            depth,
            field,
            index,
            'is not valid UTF-8: string fields must be UTF-8 (binary data belongs in a bytes field)',
          )
        // Kept for a map entry (1: key, 2: value); reset before each message is walked.
        if (field.number === 1) {
          this.#keyStart = from
          this.#keyEnd = to
        } else {
          this.#valueStart = from
          this.#valueEnd = to
        }
        return
      case FieldKind.Bytes:
        return
      case FieldKind.Message:
      case FieldKind.Map: {
        const entry = field.message as MessageRule
        this.#pathFields[depth] = field
        this.#pathIndexes[depth] = index
        this.#keyStart = -1
        this.#valueStart = 0
        this.#valueEnd = 0
        this.message(entry, from, to, depth + 1)
        if (field.kind === FieldKind.Map && this.#keyStart >= 0 && this.#isProtoKey()) this.#fixup(depth)
        if (field.target && depth === 0) {
          this.targetStart = from
          this.targetEnd = to
        }
        return
      }
    }
  }

  #isProtoKey(): boolean {
    if (this.#keyEnd - this.#keyStart !== PROTO_KEY.length) return false
    for (let i = 0; i < PROTO_KEY.length; i++)
      if (this.#buf[this.#keyStart + i] !== PROTO_KEY[i]) return false
    return true
  }

  /** Records the `__proto__` entry of the map at `depth` (its path: see assertRequestRule). */
  #fixup(depth: number): void {
    const path: (string | number)[] = []
    for (let d = 0; d <= depth; d++) {
      const f = this.#pathFields[d] as FieldRule
      path.push(f.prop)
      if (d < depth) path.push(this.#pathIndexes[d] as number)
    }
    this.fixups ??= []
    this.fixups.push({
      path,
      valueStart: this.#valueStart,
      valueEnd: this.#valueEnd,
      bytes: this.#buf,
    })
  }

  /**
   * The varint at `at`, of at most 10 bytes inside [at, end), as a number (inexact above 2^53);
   * the position after it in `#pos`.
   */
  #varint(at: number, end: number, depth: number): number {
    const buf = this.#buf
    let value = 0
    let scale = 1
    for (let i = 0; i < 10 && at + i < end; i++) {
      const b = buf[at + i] as number
      value += (b & 0x7f) * scale
      if (b < 0x80) {
        this.#pos = at + i + 1
        return value
      }
      scale *= 128
    }
    return this.#malformed(
      depth,
      at,
      at + 10 <= end ? 'a varint longer than 10 bytes' : 'a varint past the end of its message',
    )
  }

  /** The field path being walked at `depth` ("ProduceRequest.messages[3]"). */
  #path(depth: number): string {
    let path = this.#root.name
    for (let d = 0; d < depth; d++) {
      const f = this.#pathFields[d] as FieldRule
      const i = this.#pathIndexes[d] as number
      path += `.${f.name}${i >= 0 ? `[${i}]` : ''}`
    }
    return path
  }

  #messageIndex(depth: number): number | undefined {
    for (let d = 0; d < depth; d++) if (this.#pathFields[d]?.messageIndex) return this.#pathIndexes[d]
    return undefined
  }

  #refuse(depth: number, problem: string): never {
    throw new Refusal(`${this.#path(depth)}: ${problem}`, this.#messageIndex(depth))
  }

  #refuseField(depth: number, field: FieldRule, index: number, problem: string): never {
    const name = `${this.#path(depth)}.${field.name}${index >= 0 ? `[${index}]` : ''}`
    throw new Refusal(`${name} ${problem}`, this.#messageIndex(depth))
  }

  #malformed(depth: number, at: number, problem: string): never {
    return this.#refuse(
      depth,
      `not a valid protobuf encoding (${problem}, at byte ${at}); encode requests with a protobuf library`,
    )
  }
}

/** Whether buf[from, to) is UTF-8: ASCII in a loop, anything else by Node's validator. */
function utf8(buf: Uint8Array, from: number, to: number): boolean {
  let bits = 0
  for (let i = from; i < to; i++) bits |= buf[i] as number
  return bits < 0x80 || isUtf8(buf.subarray(from, to))
}

/** The exact value of the varint at `at` (one already read), for a refusal's message. */
function exactVarint(buf: Uint8Array, at: number): string {
  let value = 0n
  for (let i = 0; i < 10; i++) {
    const b = buf[at + i] as number
    value |= BigInt(b & 0x7f) << BigInt(7 * i)
    if (b < 0x80) break
  }
  return value.toString()
}
