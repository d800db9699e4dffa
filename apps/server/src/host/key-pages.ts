import { type BatchOp, inRange } from '@mq/kv-storage'

/** A half-open key range [gte, lt). */
export interface KeySpan {
  readonly gte: Uint8Array
  readonly lt: Uint8Array
}

/** Where a page of a read starts. */
export type Start = { gte: Uint8Array } | { gt: Uint8Array }

export type Pair = readonly [Uint8Array, Uint8Array]

/** A range read (a kv-storage engine, an engine snapshot, or a test's stand-in). */
export interface RangeReader {
  range(range: Start & { lt: Uint8Array; limit: number; bytesMax?: number }): Promise<readonly Pair[]>
}

/** A keys-only range read (a kv-storage engine or snapshot). */
export interface KeyReader {
  keys(range: Start & { lt: Uint8Array; limit: number }): Promise<readonly Uint8Array[]>
}

/** How much one page holds, and what it leaves out. */
export interface PageLimits {
  /** At most this many keys. */
  readonly keys: number
  /**
   * Stop once the page holds this many bytes of keys and values: it passes them by one value
   * at most (each engine call stops at the bytes left, `KeyRange.bytesMax`).
   */
  readonly bytes: number
  /** Ranges whose keys are left out (garbage still being swept); the read jumps past them. */
  readonly skip?: readonly KeySpan[]
}

/**
 * Keys per engine call of a page read (each call also stops at the page's bytes left: until
 * 2026-12-04 it did not, and 64 message bodies of up to 16 MiB made a page of up to 1 GiB,
 * past the peers' 64 MiB message limit, so a follower fetching that image never caught up).
 */
export const READ_KEYS = 64

/**
 * One page of the keys in [from, lt), in key order: at most `limits.keys` keys, ending once it
 * holds `limits.bytes`. `next` is where the following page starts; undefined once the range
 * is read to its end.
 */
export async function readPage(
  reader: RangeReader,
  from: Start,
  lt: Uint8Array,
  limits: PageLimits,
): Promise<{ pairs: Pair[]; next: Start | undefined }> {
  const pairs: Pair[] = []
  let bytes = 0
  let at: Start = from
  for (;;) {
    // Unbounded in bytes (keys only wanted, say): no reason to read in small steps.
    const step = Number.isFinite(limits.bytes) ? READ_KEYS : limits.keys
    const want = Math.min(step, limits.keys - pairs.length)
    const bounded = Number.isFinite(limits.bytes) ? { bytesMax: limits.bytes - bytes } : {}
    const got = await reader.range({ ...at, lt, limit: want, ...bounded })
    let jump: Start | undefined
    for (const pair of got) {
      const garbage = limits.skip?.find((g) => inRange(pair[0], g))
      if (garbage) {
        jump = { gte: garbage.lt }
        break
      }
      pairs.push(pair)
      bytes += pair[0].length + pair[1].length
    }
    if (jump) at = jump
    // Fewer than asked: the range's end, unless the call stopped at the page's bytes.
    else if (got.length < want && bytes < limits.bytes) return { pairs, next: undefined }
    else at = { gt: (got[got.length - 1] as Pair)[0] }
    if (pairs.length >= limits.keys || bytes >= limits.bytes) return { pairs, next: at }
  }
}

/**
 * Deletes the keys of `span`, a page of at most `pageKeys` keys per `write` (never one write
 * of them all), but the keys `keep` says to keep. Reads keys only: a page of large values
 * would otherwise be held in memory just to be deleted.
 */
export async function deletePages(
  reader: KeyReader,
  write: (ops: readonly BatchOp[]) => Promise<void>,
  span: KeySpan,
  pageKeys: number,
  keep: (key: Uint8Array) => boolean = () => false,
): Promise<void> {
  let from: Start = { gte: span.gte }
  for (;;) {
    const keys = await reader.keys({ ...from, lt: span.lt, limit: pageKeys })
    const ops: BatchOp[] = keys.filter((key) => !keep(key)).map((key) => ({ type: 'del', key }))
    if (ops.length > 0) await write(ops)
    if (keys.length < pageKeys) return
    from = { gt: keys[keys.length - 1] as Uint8Array }
  }
}
