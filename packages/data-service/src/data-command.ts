import {
  type Command,
  decodeCommand,
  encodeCommand,
  type QueueConfig as PartitionConfig,
} from '@mq/weighted-queue'
import { decodePairs, encodePairs, type KeyPair } from './key-pairs'

/**
 * The entries of a data group's Raft log. A data group holds many partitions; each entry
 * names the partition it is for. `open` makes the group the holder of a partition (with its
 * config), `drop` deletes it (or an unfinished import of it: protocol
 * FORMAT_LEVEL_DROP_IMPORT), `apply` runs a weighted-queue command on it. A live move
 * (partition-transfer.ts) adds `fence` on the source group (the partition takes no more
 * commands there, for good) and `import` on the target group (one bounded chunk of the
 * partition's keys at a time). `retire` fences a partition of a deleted queue, as one of the
 * group's latest retirements (protocol FORMAT_LEVEL_RETIRE). `unfence` lifts an aborted move's
 * fence on the source group (protocol FORMAT_LEVEL_MOVE_ABORT): the partition serves there again.
 */
export type DataCommand =
  | {
      readonly type: 'open'
      readonly queue: string
      readonly partition: number
      readonly config: Partial<PartitionConfig>
    }
  | {
      readonly type: 'drop'
      readonly queue: string
      readonly partition: number
      /** A move's drop: only of a partition that move fenced (protocol FORMAT_LEVEL_MOVE_IDS). */
      readonly moveId?: number
      /**
       * With `moveId` (FORMAT_LEVEL_MOVE_ORDER): refused when the group imports a later move of
       * the partition (stale-move.ts).
       */
      readonly ordered?: true
    }
  | { readonly type: 'apply'; readonly queue: string; readonly partition: number; readonly command: Command }
  | {
      readonly type: 'fence'
      readonly queue: string
      readonly partition: number
      /** The move that fences it (FORMAT_LEVEL_MOVE_IDS), which alone may drop it then. */
      readonly moveId?: number
      /**
       * With `moveId` (format level 39, FORMAT_LEVEL_FENCE_ORDER): refused when the group took
       * part in a later move of the partition (stale-move.ts), as an `ordered` drop is.
       */
      readonly ordered?: true
    }
  | {
      readonly type: 'retire'
      readonly queue: string
      readonly partition: number
      /**
       * A partition a move fenced keeps a fence no abort lifts (FORMAT_LEVEL_MOVE_ABORT: its
       * queue is gone, and a late `unfence` would have it served again to stale routes).
       */
      readonly final?: true
    }
  | {
      readonly type: 'unfence'
      readonly queue: string
      readonly partition: number
      /** The aborted move, whose fence (or whose fence to come) is lifted for good. */
      readonly moveId: number
    }
  | ({ readonly type: 'import'; readonly queue: string; readonly partition: number } & ImportChunk)

/**
 * One chunk of a partition's state shipped into a target group. Chunk 0 starts an import
 * session (clearing whatever the group holds of the partition); chunks follow in `seq`
 * order within one session; the `last` chunk carries no pairs and makes the group hold the
 * partition. `moveId` names the move (from the meta state), so that a move imported once is
 * never imported again over a partition the group already serves.
 */
export interface ImportChunk {
  readonly moveId: number
  readonly session: string
  readonly seq: number
  readonly last: boolean
  /** The partition's config; the target opens the partition with the last chunk's. */
  readonly config: Partial<PartitionConfig>
  /**
   * The Raft term in which the source group's leader runs this session (0: not given). A
   * session of an older term cannot restart one of a newer term: a deposed leader that still
   * ships cannot undo its successor's import.
   */
  readonly sourceTerm?: number
  /** Keys relative to the partition's prefix, and their values. */
  readonly pairs: readonly KeyPair[]
  /**
   * Keys (relative to the prefix) to delete, for a chunk that corrects what earlier chunks of
   * the session shipped (a copy made while the partition still served); never in chunk 0.
   */
  readonly dels?: readonly Uint8Array[]
  /**
   * The target must not be serving the partition (FORMAT_LEVEL_MOVE_IDS): a chunk 0 that finds
   * it held there, unfenced, is a stale one of an earlier move, and is refused.
   */
  readonly fresh?: true
  /**
   * Refused when the group took part in a later move of the partition (FORMAT_LEVEL_MOVE_ORDER;
   * stale-move.ts): fenced by it, imported by it, or importing it.
   */
  readonly ordered?: true
  /**
   * On chunk 0 with `fresh` and `ordered` (FORMAT_LEVEL_MOVE_ABORT): a copy the group holds
   * unfenced, imported by an earlier move, is that aborted move's leftover (stale-move.ts,
   * `replacesAborted`), and the chunk clears it rather than being refused as stale.
   */
  readonly replaces?: true
  /**
   * On the last chunk (FORMAT_LEVEL_PARTITION_CLOCK): the partition's clock at the source once
   * it was fenced (the source group's clock plus the partition's offset there). The target
   * keeps the partition's clock going from it rather than from its own group clock, which may
   * differ by the skew between the nodes that started the two groups' clocks.
   */
  readonly clockMs?: number
}

const VERSION = 1
const TYPE_CODE = { open: 1, drop: 2, apply: 3, fence: 4, import: 5, retire: 6, unfence: 7 } as const
const encoder = new TextEncoder()
/** `ignoreBOM`: a string that starts with U+FEFF keeps it (by default decode drops it, and two names that differ by it become one). */
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Encodes a data command: version (1 byte), type (1 byte), partition index (u32 BE), queue
 * name length (u16 BE) and UTF-8 bytes, then the body — the weighted-queue command's own
 * bytes for `apply`, UTF-8 JSON of the config for `open`, nothing for `retire` (`{"final":true}`
 * for a final one), and for `drop`
 * and `fence` the move's id in decimal when they name one (nothing else; `unfence` always
 * names one), for an `ordered`
 * drop UTF-8 JSON `{"moveId":…,"ordered":true}`;
 * for `import` a u32 BE length and UTF-8 JSON of the chunk's header, then its pairs
 * (key-pairs.ts), then its deletions if any (keys with empty values; the header's
 * `pairsBytes` says where they start).
 */
export function encodeDataCommand(c: DataCommand): Uint8Array {
  const name = encoder.encode(c.queue)
  const body =
    c.type === 'apply'
      ? encodeCommand(c.command)
      : c.type === 'open'
        ? encoder.encode(JSON.stringify(c.config))
        : c.type === 'import'
          ? encodeImport(c)
          : c.type === 'retire' && c.final
            ? encoder.encode(FINAL_RETIRE)
            : (c.type === 'drop' || c.type === 'fence') && c.moveId !== undefined && c.ordered
              ? encoder.encode(JSON.stringify({ moveId: c.moveId, ordered: true }))
              : (c.type === 'drop' || c.type === 'fence' || c.type === 'unfence') && c.moveId !== undefined
                ? encoder.encode(String(c.moveId))
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
    case TYPE_CODE.open: {
      const config: unknown = JSON.parse(decoder.decode(body))
      // An object, as an import's: `null` threw out of apply (an audit), which stops a replica.
      if (typeof config !== 'object' || config === null || Array.isArray(config))
        throw new Error('open entry config is not an object')
      return { type: 'open', queue, partition, config: config as Partial<PartitionConfig> }
    }
    case TYPE_CODE.drop:
      return {
        type: 'drop',
        queue,
        partition,
        ...(body[0] === OPEN_BRACE ? orderedDropOf(body, 'drop') : moveIdOf(body)),
      }
    case TYPE_CODE.apply:
      return { type: 'apply', queue, partition, command: decodeCommand(body) }
    case TYPE_CODE.fence:
      return {
        type: 'fence',
        queue,
        partition,
        ...(body[0] === OPEN_BRACE ? orderedDropOf(body, 'fence') : moveIdOf(body)),
      }
    case TYPE_CODE.retire:
      if (body.length === 0) return { type: 'retire', queue, partition }
      if (decoder.decode(body) !== FINAL_RETIRE) throw new Error('retire body is malformed')
      return { type: 'retire', queue, partition, final: true }
    case TYPE_CODE.unfence: {
      const { moveId } = moveIdOf(body)
      if (moveId === undefined) throw new Error('unfence entry names no move')
      return { type: 'unfence', queue, partition, moveId }
    }
    case TYPE_CODE.import:
      return { type: 'import', queue, partition, ...decodeImport(body) }
    default:
      throw new Error(`data command type ${bytes[1]} is unknown`)
  }
}

const NO_VALUE = new Uint8Array(0)
const FINAL_RETIRE = '{"final":true}'
const OPEN_BRACE = 0x7b

/** An `ordered` drop's (or fence's) body: `{"moveId":…,"ordered":true}`. */
function orderedDropOf(body: Uint8Array, what: 'drop' | 'fence'): { moveId: number; ordered: true } {
  const h = JSON.parse(decoder.decode(body)) as { moveId?: unknown; ordered?: unknown } | null
  if (h === null || !Number.isSafeInteger(h.moveId) || (h.moveId as number) < 0 || h.ordered !== true)
    throw new Error(`ordered ${what} body is malformed`)
  return { moveId: h.moveId as number, ordered: true }
}

/** A `drop`, `fence` or `unfence` body: the move's id in decimal, or nothing. */
function moveIdOf(body: Uint8Array): { moveId?: number } {
  if (body.length === 0) return {}
  const text = decoder.decode(body)
  const moveId = Number(text)
  if (!/^[0-9]{1,15}$/.test(text) || !Number.isSafeInteger(moveId)) throw new Error('move id is malformed')
  return { moveId }
}

/** The header (JSON) names `pairsBytes` when deletions follow the pairs (as pairs with empty values). */
function encodeImport(c: ImportChunk): Uint8Array {
  const pairs = encodePairs(c.pairs)
  const dels = c.dels && c.dels.length > 0 ? encodePairs(c.dels.map((k) => [k, NO_VALUE])) : NO_VALUE
  const header = encoder.encode(
    JSON.stringify({
      moveId: c.moveId,
      session: c.session,
      seq: c.seq,
      last: c.last,
      config: c.config,
      ...(c.sourceTerm ? { sourceTerm: c.sourceTerm } : {}),
      ...(dels.length > 0 ? { pairsBytes: pairs.length } : {}),
      ...(c.fresh ? { fresh: true } : {}),
      ...(c.ordered ? { ordered: true } : {}),
      ...(c.replaces ? { replaces: true } : {}),
      ...(c.clockMs !== undefined ? { clockMs: c.clockMs } : {}),
    }),
  )
  const out = new Uint8Array(4 + header.length + pairs.length + dels.length)
  new DataView(out.buffer).setUint32(0, header.length)
  out.set(header, 4)
  out.set(pairs, 4 + header.length)
  out.set(dels, 4 + header.length + pairs.length)
  return out
}

function decodeImport(body: Uint8Array): ImportChunk {
  if (body.length < 4) throw new Error('import chunk too short')
  const length = new DataView(body.buffer, body.byteOffset, body.byteLength).getUint32(0)
  if (4 + length > body.length) throw new Error('import chunk header runs past its end')
  const h = JSON.parse(decoder.decode(body.subarray(4, 4 + length))) as Partial<ImportChunk> & {
    pairsBytes?: number
  }
  const tail = body.subarray(4 + length)
  if (
    !Number.isSafeInteger(h.moveId) ||
    typeof h.session !== 'string' ||
    !Number.isSafeInteger(h.seq) ||
    (h.seq as number) < 0 ||
    typeof h.last !== 'boolean' ||
    typeof h.config !== 'object' ||
    h.config === null ||
    (h.sourceTerm !== undefined && (!Number.isSafeInteger(h.sourceTerm) || h.sourceTerm < 0)) ||
    (h.fresh !== undefined && h.fresh !== true) ||
    (h.ordered !== undefined && h.ordered !== true) ||
    (h.replaces !== undefined && h.replaces !== true) ||
    (h.clockMs !== undefined && (!Number.isSafeInteger(h.clockMs) || h.clockMs < 0 || !h.last)) ||
    (h.pairsBytes !== undefined &&
      (!Number.isSafeInteger(h.pairsBytes) || h.pairsBytes < 0 || h.pairsBytes > tail.length))
  ) {
    throw new Error('import chunk header is malformed')
  }
  const pairsEnd = h.pairsBytes ?? tail.length
  const dels = pairsEnd < tail.length ? decodePairs(tail.subarray(pairsEnd)).map(([k]) => k) : []
  return {
    moveId: h.moveId as number,
    session: h.session,
    seq: h.seq as number,
    last: h.last,
    config: h.config,
    ...(h.sourceTerm ? { sourceTerm: h.sourceTerm } : {}),
    ...(h.fresh ? { fresh: true as const } : {}),
    ...(h.ordered ? { ordered: true as const } : {}),
    ...(h.replaces ? { replaces: true as const } : {}),
    ...(h.clockMs !== undefined ? { clockMs: h.clockMs } : {}),
    pairs: decodePairs(tail.subarray(0, pairsEnd)),
    ...(dels.length > 0 ? { dels } : {}),
  }
}
