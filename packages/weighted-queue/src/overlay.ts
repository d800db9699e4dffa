import { type BatchOp, compareKeys, type KeyValue, type KvReader } from '@mq/kv-storage'
import type { KeySpan } from './keys'

interface Pending {
  readonly key: Uint8Array
  /** undefined: deleted. */
  readonly value: Uint8Array | undefined
  /** The apply generation that wrote it last. */
  readonly generation: number
}

/**
 * Read-your-writes over an engine: the writes of applied but not yet flushed commands, laid
 * over a KvReader. Each apply's op list is tracked as it grows and indexed lazily, on the
 * first read that needs it (so a caller that flushes after every apply, and an apply that
 * reads before it writes, pay nothing). `release(g)` drops the writes of generations ≤ g once
 * the caller has written them to the engine. Memory: the ops the caller leaves unflushed.
 */
export class Overlay {
  private readonly pending = new Map<string, Pending>()
  /** Tracked op lists, oldest first, and how far the first unindexed one is indexed. */
  private readonly tracked: { readonly generation: number; readonly ops: BatchOp[] }[] = []
  private indexedLists = 0
  private indexedOps = 0
  /** Pending entries per key byte at `tagAt` (the partition's key tag): most lookups skip the map. */
  private readonly perTag = new Uint32Array(256)

  /** `tagAt`: the offset of the byte that tells key kinds apart (the prefix length). */
  constructor(
    private readonly reader: KvReader,
    private readonly tagAt = 0,
  ) {}

  private mayHave(key: Uint8Array): boolean {
    return (this.perTag[key[this.tagAt] ?? 0] as number) > 0
  }

  private mayHaveIn(span: KeySpan): boolean {
    const last = span.lt[this.tagAt] ?? 255
    for (let t = span.gte[this.tagAt] ?? 0; t <= last; t++) if ((this.perTag[t] as number) > 0) return true
    return false
  }

  private index(key: Uint8Array, value: Uint8Array | undefined, generation: number): void {
    const k = keyString(key)
    const tag = key[this.tagAt] ?? 0
    if (!this.pending.has(k)) this.perTag[tag] = (this.perTag[tag] as number) + 1
    this.pending.set(k, { key, value, generation })
  }

  /** The number of pending ops (tracked, indexed or not). */
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
      this.pending.clear()
      this.perTag.fill(0)
      this.indexedLists = 0
      this.indexedOps = 0
      return
    }
    this.tracked.splice(0, n)
    for (const [k, p] of this.pending) {
      if (p.generation > generation) continue
      this.pending.delete(k)
      const tag = p.key[this.tagAt] ?? 0
      this.perTag[tag] = (this.perTag[tag] as number) - 1
    }
    if (n > this.indexedLists) {
      this.indexedLists = 0
      this.indexedOps = 0
    } else this.indexedLists -= n
  }

  /** Indexes every tracked op not yet indexed; returns whether anything is pending. */
  private catchUp(): boolean {
    while (this.indexedLists < this.tracked.length) {
      const t = this.tracked[this.indexedLists] as (typeof this.tracked)[number]
      for (; this.indexedOps < t.ops.length; this.indexedOps++) {
        const op = t.ops[this.indexedOps] as BatchOp
        if (op.type === 'put') this.index(op.key, op.value, t.generation)
        else if (op.type === 'del') this.index(op.key, undefined, t.generation)
      }
      if (this.indexedLists === this.tracked.length - 1) break // the newest list may still grow
      this.indexedLists++
      this.indexedOps = 0
    }
    return this.pending.size > 0
  }

  async get(key: Uint8Array): Promise<Uint8Array | undefined> {
    if (this.catchUp() && this.mayHave(key)) {
      const p = this.pending.get(keyString(key))
      if (p) return p.value
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
      const p = this.mayHave(key) ? this.pending.get(keyString(key)) : undefined
      if (p) out[i] = p.value
      else {
        missing.push(keys[i] as Uint8Array)
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
    const mine: Pending[] = []
    if (this.catchUp() && this.mayHaveIn(span)) {
      for (const p of this.pending.values()) {
        if (compareKeys(p.key, span.gte) >= 0 && compareKeys(p.key, span.lt) < 0) mine.push(p)
      }
    }
    if (mine.length === 0) return this.reader.range({ gte: span.gte, lt: span.lt, limit })
    // Each pending key can hide at most one engine entry, so this many suffice.
    const base = await this.reader.range({ gte: span.gte, lt: span.lt, limit: limit + mine.length })
    const shadowed = new Set(mine.map((p) => keyString(p.key)))
    const merged: KeyValue[] = base.filter(([k]) => !shadowed.has(keyString(k)))
    for (const p of mine) if (p.value !== undefined) merged.push([p.key, p.value])
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
