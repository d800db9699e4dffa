/**
 * The key-value engine interface every storage user codes against. Keys and values are
 * bytes; keys order bytewise (unsigned lexicographic), so encoded tuples (see the key
 * codec) iterate in tuple order. Implementations: `MemoryEngine` (tests, simulator) and
 * `LevelEngine` (classic-level, durable).
 */

/** One operation of an atomic write batch. `clear` removes every key in [gte, lt). */
export type BatchOp =
  | { readonly type: 'put'; readonly key: Uint8Array; readonly value: Uint8Array }
  | { readonly type: 'del'; readonly key: Uint8Array }
  | { readonly type: 'clear'; readonly gte: Uint8Array; readonly lt: Uint8Array }

/** A key range for iteration. Bounds are optional; `limit` caps the number of entries. */
export interface KeyRange {
  readonly gte?: Uint8Array
  readonly gt?: Uint8Array
  readonly lte?: Uint8Array
  readonly lt?: Uint8Array
  /** Iterate from the high end down. */
  readonly reverse?: boolean
  /** At most this many entries; absent means no limit. */
  readonly limit?: number
  /**
   * `range` stops after the entry that brings the keys and values read to this many bytes (at
   * least one entry is read): pages of a range of large values bounded in bytes, whatever
   * their count. Absent means no limit.
   */
  readonly bytesMax?: number
}

export type KeyValue = readonly [key: Uint8Array, value: Uint8Array]

/** Read access: to the live engine or to a consistent point-in-time snapshot of it. */
export interface KvReader {
  /** Returns the value at `key`, or undefined when absent. */
  get(key: Uint8Array): Promise<Uint8Array | undefined>
  /** Returns the values at `keys`, in order, undefined where absent. */
  getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]>
  /** Returns the entries of `range` in key order (reversed when asked). */
  range(range: KeyRange): Promise<KeyValue[]>
  /**
   * Returns the keys of `range`, like `range` without the values: what a page of deletes
   * needs, in memory bounded by the keys (a page of 1,024 large values could be a GiB).
   * Bounded by `limit`; `bytesMax` does not apply (no values are read).
   */
  keys(range: KeyRange): Promise<Uint8Array[]>
}

/** A consistent read view taken at one moment; release it with `close()`. */
export interface EngineSnapshot extends KvReader {
  close(): Promise<void>
}

export interface WriteOptions {
  /** Wait for the write to reach stable storage (fsync) before resolving. */
  readonly sync: boolean
}

export interface Engine extends KvReader {
  /** Applies `ops` atomically, in order. Resolves once applied (and durable when `sync`). */
  write(ops: readonly BatchOp[], options: WriteOptions): Promise<void>
  /** Takes a consistent point-in-time read view. */
  snapshot(): Promise<EngineSnapshot>
  /** Releases the engine; every later call rejects. */
  close(): Promise<void>
}

/** Bytewise comparison of two keys: negative, zero or positive. */
export function compareKeys(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number)
    if (d !== 0) return d
  }
  return a.length - b.length
}

/** True when `key` lies inside `range`'s bounds (ignoring reverse and limit). */
export function inRange(key: Uint8Array, range: KeyRange): boolean {
  if (range.gte && compareKeys(key, range.gte) < 0) return false
  if (range.gt && compareKeys(key, range.gt) <= 0) return false
  if (range.lte && compareKeys(key, range.lte) > 0) return false
  if (range.lt && compareKeys(key, range.lt) >= 0) return false
  return true
}

/** One end of a range: a key and whether the key itself is inside. */
export interface RangeBound {
  readonly key: Uint8Array
  readonly inclusive: boolean
}

/** The effective lower bound of `range`: the stricter of `gte` and `gt`, or undefined. */
export function lowerBoundOf(range: KeyRange): RangeBound | undefined {
  const { gte, gt } = range
  if (gte && gt)
    return compareKeys(gt, gte) >= 0 ? { key: gt, inclusive: false } : { key: gte, inclusive: true }
  if (gt) return { key: gt, inclusive: false }
  if (gte) return { key: gte, inclusive: true }
  return undefined
}

/** The effective upper bound of `range`: the stricter of `lte` and `lt`, or undefined. */
export function upperBoundOf(range: KeyRange): RangeBound | undefined {
  const { lte, lt } = range
  if (lte && lt)
    return compareKeys(lt, lte) <= 0 ? { key: lt, inclusive: false } : { key: lte, inclusive: true }
  if (lt) return { key: lt, inclusive: false }
  if (lte) return { key: lte, inclusive: true }
  return undefined
}

/** True when no key can lie between `lo` and `hi`. */
export function isEmptyRange(lo: RangeBound | undefined, hi: RangeBound | undefined): boolean {
  if (!lo || !hi) return false
  const c = compareKeys(lo.key, hi.key)
  return c > 0 || (c === 0 && !(lo.inclusive && hi.inclusive))
}
