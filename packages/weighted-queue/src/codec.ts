import { ByteReader, ByteWriter } from './bytes'
import type { Command, EnqueueMessage } from './commands'
import { CommandType } from './commands'
import { CONFIG_NUMBER_FIELDS, type QueueConfig, SchedulingMode, TRAILING_CONFIG_FIELDS } from './config'
import { InvalidArgumentError } from './errors'

/** The first byte of every encoded command; bump it for an incompatible layout. */
export const COMMAND_CODEC_VERSION = 1
/** The largest encoded command `decodeCommand` accepts. */
export const COMMAND_BYTES_MAX = 64 * 1024 * 1024

const TYPE_CODE: Record<CommandType, number> = {
  enqueue: 1,
  lease: 2,
  ack: 3,
  nack: 4,
  extend: 5,
  tick: 6,
  redriveDead: 7,
  purgeDead: 8,
  configure: 9,
  purgeReady: 10,
}
const CODE_TYPE = new Map(Object.entries(TYPE_CODE).map(([t, c]) => [c, t as CommandType]))

const F_WEIGHT = 1
const F_HEADERS = 2
const F_KEY = 4
const F_NOT_BEFORE = 8
const F_DEDUP = 16

/**
 * Encodes a command as bytes: version u8, type u8, then its fields as unsigned LEB128
 * varints and length-prefixed bytes/UTF-8 strings, optional fields behind a flags byte.
 * Throws InvalidArgumentError for values the format cannot hold (negative or non-integer
 * numbers). Semantic checks (weights, limits) happen on apply, identically on every replica.
 */
export function encodeCommand(cmd: Command): Uint8Array {
  const w = new ByteWriter(
    cmd.type === CommandType.Enqueue ? enqueueBytesGuess(cmd.messages) : 64,
    COMMAND_BYTES_MAX,
  )
  w.u8(COMMAND_CODEC_VERSION).u8(TYPE_CODE[cmd.type])
  switch (cmd.type) {
    case CommandType.Enqueue: {
      // 0: no producer; 1: producer id and sequence; 2: and the producer's base sequence.
      const hasProducer = cmd.producerId !== undefined
      const hasBase = hasProducer && cmd.producerBase !== undefined
      // Written apart, they would decode to a command the partition applies (a sequence 0, or
      // none), while it refuses the command as it is.
      if (hasProducer !== (cmd.producerSeq !== undefined) || (!hasProducer && cmd.producerBase !== undefined))
        throw new InvalidArgumentError(
          'producerId and producerSeq come together, and producerBase needs them',
        )
      w.u8(hasBase ? 2 : hasProducer ? 1 : 0)
      if (hasProducer) w.string(cmd.producerId as string).varint(cmd.producerSeq ?? 0)
      if (hasBase) w.varint(cmd.producerBase as number)
      w.varint(cmd.messages.length)
      for (const m of cmd.messages) encodeMessage(w, m)
      break
    }
    case CommandType.Lease:
      w.string(cmd.consumerId).varint(cmd.max).varint(cmd.visibilityMs)
      // Trailing, only when set: a lease without them is the bytes of before (bytesMax 0:
      // none, ahead of an attempt).
      if (cmd.bytesMax !== undefined || cmd.attempt !== undefined) w.varint(cmd.bytesMax ?? 0)
      if (cmd.repeatOnly && cmd.attempt === undefined)
        throw new InvalidArgumentError('a repeat-only lease needs the attempt it repeats')
      // Ahead of an attempt a 0 stands for no budget: a bytesMax 0 (refused on apply) would vanish.
      if (cmd.bytesMax === 0 && cmd.attempt !== undefined)
        throw new InvalidArgumentError('lease bytesMax must be an integer from 1, got 0')
      // A repeat-only lease is a repeat.
      if (cmd.attempt !== undefined) w.string(cmd.attempt).u8(cmd.repeatOnly ? 2 : cmd.repeat ? 1 : 0)
      break
    case CommandType.Ack:
      encodeIds(w, cmd.leaseIds)
      break
    case CommandType.Nack:
      encodeIds(w, cmd.leaseIds)
      w.varint(cmd.delayMs ?? 0)
      // Trailing, only when set: a nack without them is the bytes of before (the flag 0
      // ahead of an attempt).
      if (cmd.release || cmd.attempt !== undefined) w.u8(cmd.release ? 1 : 0)
      if (cmd.attempt !== undefined) w.string(cmd.attempt)
      if (cmd.lapses) {
        if (cmd.attempt === undefined) throw new InvalidArgumentError('a nack that lapses needs its attempt')
        w.u8(1)
      }
      break
    case CommandType.Extend:
      encodeIds(w, cmd.leaseIds)
      w.varint(cmd.visibilityMs)
      break
    case CommandType.Tick:
      // Trailing, only when set: a tick without it is the bytes of before.
      if (cmd.ttlWaiting) w.u8(1)
      break
    case CommandType.PurgeDead:
      w.varint(cmd.max)
      // Trailing, only when set: a purge without them is the bytes of before. `after` needs
      // `through` before it (a purge with `after` alone goes through the end of the list).
      if (cmd.through !== undefined || cmd.after !== undefined)
        w.varint(cmd.through ?? Number.MAX_SAFE_INTEGER)
      if (cmd.after !== undefined) w.varint(cmd.after)
      break
    case CommandType.RedriveDead:
      w.varint(cmd.max)
      // Trailing, only when set: a redrive without them is the bytes of before. `through`
      // needs the flag's byte before it (0 when the TTL is not restarted).
      if (cmd.restartTtl || cmd.through !== undefined) w.u8(cmd.restartTtl ? 1 : 0)
      if (cmd.through !== undefined) w.varint(cmd.through)
      break
    case CommandType.PurgeReady:
      w.varint(cmd.max)
      break
    case CommandType.Configure: {
      const c = cmd.config
      w.u8(c.scheduling === undefined ? 0 : c.scheduling === SchedulingMode.Fair ? 1 : 2)
      // The trailing fields (configVersion, messageTtlMs, orderedKeys) are left out from the first of them
      // that is unset with none set after it: the bytes are as before they existed.
      let end = CONFIG_NUMBER_FIELDS.length
      while (end > 0) {
        const name = CONFIG_NUMBER_FIELDS[end - 1] as (typeof CONFIG_NUMBER_FIELDS)[number]
        if (!TRAILING_CONFIG_FIELDS.has(name) || c[name] !== undefined) break
        end--
      }
      for (const name of CONFIG_NUMBER_FIELDS.slice(0, end)) {
        const v = c[name]
        if (v === undefined) w.u8(0)
        else w.u8(1).varint(v)
      }
      break
    }
  }
  return w.finish()
}

/** Decodes what encodeCommand wrote. Throws InvalidArgumentError on malformed bytes. */
export function decodeCommand(bytes: Uint8Array): Command {
  if (bytes.length > COMMAND_BYTES_MAX)
    throw new InvalidArgumentError('command larger than COMMAND_BYTES_MAX')
  const r = new ByteReader(bytes)
  const version = r.u8()
  if (version !== COMMAND_CODEC_VERSION) {
    throw new InvalidArgumentError(
      `unknown command codec version ${version}; expected ${COMMAND_CODEC_VERSION}`,
    )
  }
  const code = r.u8()
  const type = CODE_TYPE.get(code)
  let cmd: Command
  switch (type) {
    case CommandType.Enqueue: {
      const producerForm = r.u8()
      if (producerForm > 2) throw new InvalidArgumentError(`malformed enqueue: producer form ${producerForm}`)
      // Read in the order written: id, sequence, then the base (form 2).
      const producer =
        producerForm === 0
          ? {}
          : {
              producerId: r.string(),
              producerSeq: r.varint(),
              ...(producerForm === 2 ? { producerBase: r.varint() } : {}),
            }
      const n = r.varint()
      if (n > bytes.length) throw new InvalidArgumentError('malformed enqueue: message count exceeds input')
      const messages: EnqueueMessage[] = []
      for (let i = 0; i < n; i++) messages.push(decodeMessage(r))
      cmd = { type, messages, ...producer }
      break
    }
    case CommandType.Lease: {
      const lease = { type, consumerId: r.string(), max: r.varint(), visibilityMs: r.varint() }
      if (r.done) cmd = lease
      else {
        const bytesMax = r.varint()
        // Without an attempt, the form of level 16 (a bytesMax 0 stays, and is refused as before).
        if (r.done) cmd = { ...lease, bytesMax }
        else {
          const attempt = r.string()
          const repeat = r.u8()
          if (repeat > 2) throw new InvalidArgumentError('malformed lease: repeat flag')
          cmd = {
            ...lease,
            ...(bytesMax > 0 ? { bytesMax } : {}),
            attempt,
            ...(repeat ? { repeat: true } : {}),
            ...(repeat === 2 ? { repeatOnly: true } : {}),
          }
        }
      }
      break
    }
    case CommandType.Ack:
      cmd = { type, leaseIds: decodeIds(r, bytes.length) }
      break
    case CommandType.Nack: {
      const leaseIds = decodeIds(r, bytes.length)
      const delayMs = r.varint()
      const nack = delayMs === 0 ? { type, leaseIds } : { type, leaseIds, delayMs }
      if (r.done) cmd = nack
      else {
        const flag = r.u8()
        if (flag > 1 || (flag === 0 && r.done)) throw new InvalidArgumentError('malformed nack: release flag')
        const released = flag === 1 ? { ...nack, release: true } : nack
        if (r.done) cmd = released
        else {
          const attempt = { ...released, attempt: r.string() }
          if (r.done) cmd = attempt
          else if (r.u8() === 1) cmd = { ...attempt, lapses: true }
          else throw new InvalidArgumentError('malformed nack: lapses flag')
        }
      }
      break
    }
    case CommandType.Extend:
      cmd = { type, leaseIds: decodeIds(r, bytes.length), visibilityMs: r.varint() }
      break
    case CommandType.Tick:
      if (r.done) cmd = { type }
      else if (r.u8() === 1) cmd = { type, ttlWaiting: true }
      else throw new InvalidArgumentError('malformed tick: ttlWaiting flag')
      break
    case CommandType.PurgeDead: {
      const max = r.varint()
      if (r.done) cmd = { type, max }
      else {
        const through = r.varint()
        cmd = r.done ? { type, max, through } : { type, max, through, after: r.varint() }
      }
      break
    }
    case CommandType.RedriveDead: {
      const max = r.varint()
      if (r.done) {
        cmd = { type, max }
        break
      }
      const flag = r.u8()
      if (flag > 1 || (flag === 0 && r.done))
        throw new InvalidArgumentError('malformed redriveDead: restartTtl flag')
      const restart = flag === 1 ? { restartTtl: true as const } : {}
      cmd = r.done ? { type, max, ...restart } : { type, max, ...restart, through: r.varint() }
      break
    }
    case CommandType.PurgeReady:
      cmd = { type, max: r.varint() }
      break
    case CommandType.Configure: {
      const config: Record<string, unknown> = {}
      const mode = r.u8()
      if (mode === 1) config.scheduling = SchedulingMode.Fair
      else if (mode === 2) config.scheduling = SchedulingMode.Strict
      else if (mode !== 0) throw new InvalidArgumentError(`malformed configure: scheduling code ${mode}`)
      for (const name of CONFIG_NUMBER_FIELDS) {
        if (TRAILING_CONFIG_FIELDS.has(name) && r.done) break // encoded without it (or before it existed)
        const present = r.u8()
        if (present > 1) throw new InvalidArgumentError(`malformed configure: ${name} presence ${present}`)
        if (present === 1) config[name] = r.varint()
      }
      cmd = { type, config: config as Partial<QueueConfig> }
      break
    }
    default:
      throw new InvalidArgumentError(`unknown command type code ${code}`)
  }
  if (!r.done) throw new InvalidArgumentError(`malformed ${cmd.type} command: trailing bytes`)
  return cmd
}

function encodeIds(w: ByteWriter, ids: readonly string[]): void {
  w.varint(ids.length)
  for (const id of ids) w.string(id)
}

function decodeIds(r: ByteReader, limit: number): string[] {
  const n = r.varint()
  if (n > limit) throw new InvalidArgumentError('malformed lease id list: count exceeds input')
  const out: string[] = []
  for (let i = 0; i < n; i++) out.push(r.string())
  return out
}

function encodeMessage(w: ByteWriter, m: EnqueueMessage): void {
  let flags = 0
  if (m.weight !== undefined) flags |= F_WEIGHT
  if (m.headers !== undefined) flags |= F_HEADERS
  if (m.key !== undefined) flags |= F_KEY
  if (m.notBeforeMs !== undefined) flags |= F_NOT_BEFORE
  if (m.dedupKey !== undefined) flags |= F_DEDUP
  w.u8(flags)
  if (m.weight !== undefined) w.varint(m.weight)
  w.bytes(m.body)
  if (m.headers !== undefined) encodeHeaders(w, m.headers)
  if (m.key !== undefined) w.string(m.key)
  if (m.notBeforeMs !== undefined) w.varint(m.notBeforeMs)
  if (m.dedupKey !== undefined) w.string(m.dedupKey)
}

/**
 * The bytes an enqueue command is likely to take: its bodies and a few bytes per message (more
 * with headers, keys or dedup keys, and the writer grows), so that a batch of hundreds of
 * messages is not copied through eight doublings of a 256-byte start. At most
 * COMMAND_BYTES_MAX (a larger batch is refused as it is written).
 */
function enqueueBytesGuess(messages: readonly EnqueueMessage[]): number {
  let bytes = 64
  for (const m of messages) bytes += m.body.length + 8
  return Math.min(bytes, COMMAND_BYTES_MAX)
}

/**
 * The body a decoded message holds until its own is read: shared, because V8 makes each
 * `new Uint8Array(0)` on a slow path (~90 ns, once per message on every replica).
 */
const BODY_UNREAD = new Uint8Array(0)

function decodeMessage(r: ByteReader): EnqueueMessage {
  const flags = r.u8()
  if (flags > 31) throw new InvalidArgumentError(`malformed message flags ${flags}`)
  const m: {
    weight?: number
    body: Uint8Array
    headers?: Record<string, string>
    key?: string
    notBeforeMs?: number
    dedupKey?: string
  } = { body: BODY_UNREAD }
  if (flags & F_WEIGHT) m.weight = r.varint()
  m.body = r.bytes()
  if (flags & F_HEADERS) m.headers = decodeHeaders(r)
  if (flags & F_KEY) m.key = r.string()
  if (flags & F_NOT_BEFORE) m.notBeforeMs = r.varint()
  if (flags & F_DEDUP) m.dedupKey = r.string()
  return m
}

/** Headers: count, then (name, value) pairs in the object's key order. */
export function encodeHeaders(w: ByteWriter, headers: Readonly<Record<string, string>>): void {
  const names = Object.keys(headers)
  w.varint(names.length)
  for (const name of names) w.string(name).string(headers[name] as string)
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

/** Decodes headers; no headers decode to one shared frozen empty object. */
export function decodeHeaders(r: ByteReader): Readonly<Record<string, string>> {
  const n = r.varint()
  if (n === 0) return NO_HEADERS
  const out: Record<string, string> = {}
  for (let i = 0; i < n; i++) {
    const name = r.string()
    const value = r.string()
    if (name === '__proto__') Object.defineProperty(out, name, { value, enumerable: true, writable: true })
    else out[name] = value
  }
  return out
}
