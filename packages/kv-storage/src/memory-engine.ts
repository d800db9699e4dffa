import { ChunkCopier, copyAllOut } from './byte-copies'
import type { BatchOp, Engine, EngineSnapshot, KeyRange, KeyValue, WriteOptions } from './engine'
import { ClosedError, InvalidArgumentError } from './errors'
import { type FrozenMap, OrderedMap } from './ordered-map'
import { checkOps, checkRange } from './write-batch'

/**
 * An in-memory Engine for tests and the simulator: a copy-on-write B+tree (O(log n) reads
 * and writes, O(1) snapshots). Writes apply synchronously inside `write()` (so a read issued
 * after `write()` returns sees them) and `sync` is ignored. Keys and values are copied in
 * and out (as plain Uint8Arrays, even from Buffers), so callers may reuse their buffers;
 * the copies of values over 64 bytes are packed into shared buffers (see byte-copies.ts).
 */
export class MemoryEngine implements Engine {
  private readonly map = new OrderedMap()
  private readonly copier = new ChunkCopier()
  private closed = false
  private readonly snapshots = new Set<MemorySnapshot>()

  /** Number of keys held. */
  get size(): number {
    return this.map.size
  }

  async get(key: Uint8Array): Promise<Uint8Array | undefined> {
    this.checkOpen()
    checkKey(key)
    return copy(this.map.get(key))
  }

  async getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    this.checkOpen()
    for (const key of keys) checkKey(key)
    return copyAllOut(keys.map((key) => this.map.get(key)))
  }

  async range(range: KeyRange): Promise<KeyValue[]> {
    this.checkOpen()
    checkRange(range)
    return copyAll(this.map.range(range))
  }

  async keys(range: KeyRange): Promise<Uint8Array[]> {
    this.checkOpen()
    checkRange(range)
    return copyAllOut(this.map.range(keysOnly(range)).map(([key]) => key))
  }

  async write(ops: readonly BatchOp[], _options: WriteOptions): Promise<void> {
    this.writeNow(ops)
  }

  /**
   * Applies `ops` atomically and in order, synchronously (the memory engine's own extra).
   * Throws ClosedError after close and InvalidArgumentError for a malformed op (nothing applied).
   */
  writeNow(ops: readonly BatchOp[]): void {
    this.checkOpen()
    checkOps(ops)
    for (const op of ops) {
      if (op.type === 'put') this.map.set(this.copier.copy(op.key), this.copier.copy(op.value))
      else if (op.type === 'del') this.map.delete(op.key)
      else this.map.deleteRange(op.gte, op.lt)
    }
  }

  async snapshot(): Promise<EngineSnapshot> {
    this.checkOpen()
    const snap = new MemorySnapshot(this.map.freeze(), (s) => this.snapshots.delete(s))
    this.snapshots.add(snap)
    return snap
  }

  /** Closes the engine and every open snapshot. Idempotent. */
  async close(): Promise<void> {
    this.closed = true
    for (const snap of [...this.snapshots]) await snap.close()
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('memory engine is closed; open a new one')
  }
}

class MemorySnapshot implements EngineSnapshot {
  private closed = false
  constructor(
    private readonly view: FrozenMap,
    private readonly onClose: (s: MemorySnapshot) => void,
  ) {}

  async get(key: Uint8Array): Promise<Uint8Array | undefined> {
    this.checkOpen()
    checkKey(key)
    return copy(OrderedMap.getIn(this.view.root, key))
  }

  async getMany(keys: readonly Uint8Array[]): Promise<(Uint8Array | undefined)[]> {
    this.checkOpen()
    for (const key of keys) checkKey(key)
    return copyAllOut(keys.map((key) => OrderedMap.getIn(this.view.root, key)))
  }

  async range(range: KeyRange): Promise<KeyValue[]> {
    this.checkOpen()
    checkRange(range)
    return copyAll(OrderedMap.collect(this.view.root, range))
  }

  async keys(range: KeyRange): Promise<Uint8Array[]> {
    this.checkOpen()
    checkRange(range)
    return copyAllOut(OrderedMap.collect(this.view.root, keysOnly(range)).map(([key]) => key))
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    this.onClose(this)
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('snapshot is closed (or its engine is); take a new one')
  }
}

/** `range` for `keys()`: no values are read, so `bytesMax` (a bound of `range()`) does not apply, as in LevelEngine. */
function keysOnly(range: KeyRange): KeyRange {
  return range.bytesMax === undefined ? range : { ...range, bytesMax: undefined }
}

function checkKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array)) throw new InvalidArgumentError('key must be a Uint8Array')
}

function copy(v: Uint8Array | undefined): Uint8Array | undefined {
  return v === undefined ? undefined : new Uint8Array(v)
}

function copyAll(kvs: KeyValue[]): KeyValue[] {
  const flat: Uint8Array[] = new Array(2 * kvs.length)
  for (let i = 0; i < kvs.length; i++) {
    const kv = kvs[i] as KeyValue
    flat[2 * i] = kv[0]
    flat[2 * i + 1] = kv[1]
  }
  const copies = copyAllOut(flat)
  const out: KeyValue[] = new Array(kvs.length)
  for (let i = 0; i < kvs.length; i++) out[i] = [copies[2 * i] as Uint8Array, copies[2 * i + 1] as Uint8Array]
  return out
}
