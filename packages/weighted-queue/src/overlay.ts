import { type BatchOp, compareKeys, type KeyValue, type KvReader } from '@mq/kv-storage'
import type { KeySpan } from './keys'

/** A put or a delete: the ops the overlay reads through (a `clear` only comes with a snapshot's restore, outside any apply). */
type KeyOp = Extract<BatchOp, { readonly type: 'put' | 'del' }>

/** The pending ops of one key tag, oldest first, with their generations; indexed by key on demand. */
interface TagLog {
  readonly ops: KeyOp[]
  readonly generations: number[]
  /** The latest op per key (`keyString`) of `ops[0, indexed)`, built by the first point read. */
  index: Map<string, KeyOp> | undefined
  indexed: number
}

/**
 * Read-your-writes over an engine: the writes of applies not yet flushed, laid over a
 * KvReader. Each apply's op list is tracked as it grows; a read first files the ops it has
 * not seen by their key tag (the byte at `tagAt`: message records, ready entries, lease
 * groups…), and only the tags a read touches are looked at: a point read indexes its tag's
 * ops by key, a range compares its tags' ops with its bounds. Until 2026-12-07 every read
 * indexed every pending op of every tag by key, and a lease's head read, with the previous
 * leases' record writes and acks' deletes unflushed, spent ~10 % of a replica's main thread
 * there (a V8 profile of `mq-bench consume --prefetch 1024 --partitions 1`). `release(g)`
 * drops the writes of generations ≤ g once the caller has written them to the engine.
 * Memory: the ops the caller leaves unflushed.
 */
export class Overlay {
  /** Tracked op lists, oldest first, and how far the first unfiled one is filed. */
  private readonly tracked: { readonly generation: number; readonly ops: BatchOp[] }[] = []
  private filedLists = 0
  private filedOps = 0
  /** Filed ops by key tag. */
  private readonly byTag: (TagLog | undefined)[] = new Array(256)
  private filedCount = 0

  /** `tagAt`: the offset of the byte that tells key kinds apart (the prefix length). */
  constructor(
    private readonly reader: KvReader,
    private readonly tagAt = 0,
  ) {}

  /** The number of pending ops (tracked, filed or not). */
  get size(): number {
    let n = 0
    for (const t of this.tracked) n += t.ops.length
    return n
  }

  /** The number of applies whose ops are not released yet. */
  get pendingApplies(): number {
    return this.tracked.length
  }

  /** Starts tracking `ops`, the (growing) op list of apply `generation`. */
  track(generation: number, ops: BatchOp[]): void {
    this.tracked.push({ generation, ops })
  }

  /** Drops the writes of generations ≤ `generation` (they are in the engine now). */
  release(generation: number): void {
    let n = 0
    while (
      n < this.tracked.length &&
      (this.tracked[n] as (typeof this.tracked)[number]).generation <= generation
    )
      n++
    if (n === 0) return
    if (n === this.tracked.length) {
      this.tracked.length = 0
      this.byTag.fill(undefined)
      this.filedCount = 0
      this.filedLists = 0
      this.filedOps = 0
      return
    }
    this.tracked.splice(0, n)
    for (let t = 0; t < 256; t++) {
      const log = this.byTag[t]
      if (log === undefined) continue
      let k = 0
      while (k < log.generations.length && (log.generations[k] as number) <= generation) k++
      if (k === 0) continue
      this.filedCount -= k
      if (k === log.ops.length) {
        this.byTag[t] = undefined
        continue
      }
      log.ops.splice(0, k)
      log.generations.splice(0, k)
      // Later ops of a key stay; the index is rebuilt from them when next needed.
      log.index = undefined
      log.indexed = 0
    }
    if (n > this.filedLists) {
      this.filedLists = 0
      this.filedOps = 0
    } else this.filedLists -= n
  }

  /** Files every tracked op not yet filed under its tag; returns whether anything is pending. */
  private catchUp(): boolean {
    while (this.filedLists < this.tracked.length) {
      const t = this.tracked[this.filedLists] as (typeof this.tracked)[number]
      for (; this.filedOps < t.ops.length; this.filedOps++) {
        const op = t.ops[this.filedOps] as BatchOp
        if (op.type !== 'put' && op.type !== 'del') continue
        const tag = op.key[this.tagAt] ?? 0
        let log = this.byTag[tag]
        if (log === undefined) {
          log = { ops: [], generations: [], index: undefined, indexed: 0 }
          this.byTag[tag] = log
        }
        log.ops.push(op)
        log.generations.push(t.generation)
        this.filedCount++
      }
      if (this.filedLists === this.tracked.length - 1) break // the newest list may still grow
      this.filedLists++
      this.filedOps = 0
    }
    return this.filedCount > 0
  }

  /** The latest pending op on `key`, or undefined when none is (after `catchUp`). */
  private latest(key: Uint8Array): KeyOp | undefined {
    const log = this.byTag[key[this.tagAt] ?? 0]
    if (log === undefined) return undefined
    if (log.index === undefined) log.index = new Map()
    for (; log.indexed < log.ops.length; log.indexed++) {
      const op = log.ops[log.indexed] as (typeof log.ops)[number]
      log.index.set(keyString(op.key), op)
    }
    return log.index.get(keyString(key))
  }

  async get(key: Uint8Array): Promise<Uint8Array | undefined> {
    if (this.catchUp()) {
      const op = this.latest(key)
      if (op) return op.type === 'put' ? op.value : undefined
    }
    return this.reader.get(key)
  }

  async getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    if (!this.catchUp()) return this.reader.getMany(keys)
    const out: (Uint8Array | undefined)[] = new Array(keys.length)
    const missing: Uint8Array[] = []
    const missingAt: number[] = []
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as Uint8Array
      const op = this.latest(key)
      if (op) out[i] = op.type === 'put' ? op.value : undefined
      else {
        missing.push(key)
        missingAt.push(i)
      }
    }
    if (missing.length > 0) {
      const got = await this.reader.getMany(missing)
      for (let j = 0; j < missing.length; j++) out[missingAt[j] as number] = got[j]
    }
    return out
  }

  /** The first `limit` entries of [gte, lt) in key order, pending writes included. */
  async range(span: KeySpan, limit: number): Promise<KeyValue[]> {
    // The latest pending op per key in the span: only the ops of the span's tags are compared.
    let mine: Map<string, KeyOp> | undefined
    if (this.catchUp()) {
      const last = span.lt[this.tagAt] ?? 255
      for (let t = span.gte[this.tagAt] ?? 0; t <= last; t++) {
        const log = this.byTag[t]
        if (log === undefined) continue
        for (const op of log.ops) {
          if (compareKeys(op.key, span.gte) < 0 || compareKeys(op.key, span.lt) >= 0) continue
          mine ??= new Map()
          mine.set(keyString(op.key), op)
        }
      }
    }
    if (mine === undefined) return this.reader.range({ gte: span.gte, lt: span.lt, limit })
    // Each pending key can hide at most one engine entry, so this many suffice.
    const base = await this.reader.range({ gte: span.gte, lt: span.lt, limit: limit + mine.size })
    const merged: KeyValue[] = base.filter(([k]) => !mine.has(keyString(k)))
    for (const op of mine.values()) if (op.type === 'put') merged.push([op.key, op.value])
    merged.sort((a, b) => compareKeys(a[0], b[0]))
    return merged.length > limit ? merged.slice(0, limit) : merged
  }
}

/** A key as a string of char codes 0..255: Map-able, and its string order is the byte order. */
export function keyString(key: Uint8Array): string {
  // One flat string in one call (a char-by-char `+=` builds a chain of cons strings that the
  // young-generation GC then copies and flattens: twice the time, measured).
  return String.fromCharCode.apply(null, key as unknown as number[])
}
