import {
  type Command,
  decodeCommand,
  encodeCommand,
  type QueueConfig as PartitionConfig,
} from '@mq/weighted-queue'

/**
 * The entries of a data group's Raft log. A data group holds many partitions; each entry
 * names the partition it is for. `open` makes the group the holder of a partition (with its
 * config), `drop` deletes it, `apply` runs a weighted-queue command on it.
 */
export type DataCommand =
  | {
      readonly type: 'open'
      readonly queue: string
      readonly partition: number
      readonly config: Partial<PartitionConfig>
    }
  | { readonly type: 'drop'; readonly queue: string; readonly partition: number }
  | { readonly type: 'apply'; readonly queue: string; readonly partition: number; readonly command: Command }

const VERSION = 1
const TYPE_CODE = { open: 1, drop: 2, apply: 3 } as const
const encoder = new TextEncoder()
const decoder = new TextDecoder('utf-8', { fatal: true })

/**
 * Encodes a data command: version (1 byte), type (1 byte), partition index (u32 BE), queue
 * name length (u16 BE) and UTF-8 bytes, then the body — the weighted-queue command's own
 * bytes for `apply`, UTF-8 JSON of the config for `open`, nothing for `drop`.
 */
export function encodeDataCommand(c: DataCommand): Uint8Array {
  const name = encoder.encode(c.queue)
  const body =
    c.type === 'apply'
      ? encodeCommand(c.command)
      : c.type === 'open'
        ? encoder.encode(JSON.stringify(c.config))
        : new Uint8Array(0)
  const out = new Uint8Array(8 + name.length + body.length)
  const view = new DataView(out.buffer)
  out[0] = VERSION
  out[1] = TYPE_CODE[c.type]
  view.setUint32(2, c.partition)
  view.setUint16(6, name.length)
  out.set(name, 8)
  out.set(body, 8 + name.length)
  return out
}

/** Decodes an entry; throws an Error saying what is wrong when the bytes are not a data command. */
export function decodeDataCommand(bytes: Uint8Array): DataCommand {
  if (bytes.length < 8) throw new Error(`data command too short (${bytes.length} bytes)`)
  if (bytes[0] !== VERSION) throw new Error(`data command version ${bytes[0]} is not supported`)
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const partition = view.getUint32(2)
  const nameLength = view.getUint16(6)
  if (8 + nameLength > bytes.length) throw new Error('data command queue name runs past its end')
  const queue = decoder.decode(bytes.subarray(8, 8 + nameLength))
  const body = bytes.subarray(8 + nameLength)
  switch (bytes[1]) {
    case TYPE_CODE.open:
      return {
        type: 'open',
        queue,
        partition,
        config: JSON.parse(decoder.decode(body)) as Partial<PartitionConfig>,
      }
    case TYPE_CODE.drop:
      return { type: 'drop', queue, partition }
    case TYPE_CODE.apply:
      return { type: 'apply', queue, partition, command: decodeCommand(body) }
    default:
      throw new Error(`data command type ${bytes[1]} is unknown`)
  }
}
