import {
  type DataGroupMachine,
  type DataResult,
  decodePairs,
  encodePairs,
  wakesLongPolls,
} from '@mq/data-service'
import { type BatchOp, compareKeys, inRange, stateMachineKey, stateMachineRange } from '@mq/kv-storage'
import { type Entry, EntryType, type Snapshot, type StateMachine } from '@mq/raft-core'

export { decodePairs, encodePairs }

/** Persists state-machine writes: stages them into the node's group commit, resolves once durable. */
export interface SmWriter {
  write(ops: readonly BatchOp[]): Promise<void>
}

/** Where a page of a read starts. */
type Start = { gte: Uint8Array } | { gt: Uint8Array }

/** Reads the group's own keys (for snapshots), a page at a time. */
export interface SmReader {
  range(
    range: Start & { lt: Uint8Array; limit: number },
  ): Promise<readonly (readonly [Uint8Array, Uint8Array])[]>
}

/**
 * Keys a snapshot reads per engine call (and an install writes per write). A group holding a
 * large backlog has millions of keys: read in one call, their conversion held the event loop
 * for seconds, on every replica at once (they snapshot at the same index), and every group
 * lost its leader (measured: ~4 s without leaders under a sustained load of 2 million
 * messages). Between pages the node serves its other groups, ticks and heartbeats.
 */
export const SNAPSHOT_PAGE_KEYS = 4096

/**
 * A data group's state machine on the Raft runtime. The runtime's apply is synchronous; the
 * queue partitions read LevelDB asynchronously, so each entry's result is a promise that the
 * proposer awaits, and entries are applied strictly in order behind one another
 * (DataGroupMachine queues them). Each entry's writes go to storage together with the group's
 * applied index, in one batch, so after a crash the machine resumes exactly after the last
 * entry whose writes are durable: entries at or below that index are skipped, never applied
 * twice.
 *
 * A snapshot is every key of the group's state machine (its partitions, their registry and
 * the applied index), read once every applied entry's writes are durable; installing one
 * replaces those keys, a page per write and the applied index last, and reopens the partitions.
 */
export class DataMachine implements StateMachine {
  readonly #machine: DataGroupMachine
  readonly #writer: SmWriter
  readonly #appliedKey: Uint8Array
  #applied: number
  #tail: Promise<void> = Promise.resolve()
  /** The last write handed to storage (all earlier ones are ordered before it). */
  #lastWrite: Promise<void> = Promise.resolve()
  readonly #reader: SmReader
  readonly #pageKeys: number
  #fatal: (error: unknown) => void
  /** The first apply or write that failed (the node is stopping); nothing is durable past it. */
  #failure: { error: unknown } | undefined
  /** Called after an entry that may have made messages ready is applied (to wake long polls). */
  onApplied: () => void = () => {}

  constructor(
    machine: DataGroupMachine,
    writer: SmWriter,
    reader: SmReader,
    appliedIndex: number,
    fatal: (error: unknown) => void,
    pageKeys = SNAPSHOT_PAGE_KEYS,
  ) {
    this.#pageKeys = pageKeys
    this.#machine = machine
    this.#writer = writer
    this.#reader = reader
    this.#applied = appliedIndex
    this.#appliedKey = appliedKeyOf(machine.groupId)
    this.#fatal = (error) => {
      this.#failure ??= { error }
      fatal(error)
    }
  }

  get machine(): DataGroupMachine {
    return this.#machine
  }

  apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      if (e.index <= this.#applied) return undefined
      this.#applied = e.index
      const appliedOp: BatchOp = { type: 'put', key: this.#appliedKey, value: encodeIndex(e.index) }
      // One chain for every entry: applies run in log order, and each entry's writes are
      // handed to storage before the next entry's, so the stored applied index never passes
      // an entry whose writes are not stored.
      const step = this.#tail.then(async (): Promise<DataResult | undefined> => {
        // After a failed apply or write nothing more is applied or written: a later entry's
        // write would store an applied index past the entry whose writes are missing.
        if (this.#failure) throw this.#failure.error
        if (e.type !== EntryType.Normal || e.data.length === 0) {
          this.#write([appliedOp])
          return undefined
        }
        // `written`: the writes of every earlier entry (a fence or an import's end waits for them).
        const applied = await this.#machine.apply(e.data, e.timestampMs, () => this.#lastWrite)
        this.#write([...applied.ops, appliedOp]).then(applied.written, () => {})
        if (wakesLongPolls(applied.result)) this.onApplied()
        return applied.result
      })
      this.#tail = step.then(
        () => {},
        (error: unknown) => this.#fatal(error),
      )
      return step
    })
  }

  #write(ops: readonly BatchOp[]): Promise<void> {
    const written = this.#writer.write(ops)
    this.#lastWrite = written.catch((error: unknown) => this.#fatal(error))
    return written
  }

  /**
   * Resolves once every entry handed to apply is applied and its writes are durable; rejects
   * once an apply or a write failed (the chain goes on after a failure, to fail what follows).
   */
  async settled(): Promise<void> {
    await this.#tail
    await this.#lastWrite
    if (this.#failure) throw this.#failure.error
  }

  /**
   * StateMachine.persisted (snapshots on demand): `settled`. A compaction waits for it and
   * records that the state up to its index is durable, so it must never resolve after a write
   * failed (a fault run with full disks recorded one past the last durable entry, and the
   * node then refused to start).
   */
  persisted(): Promise<void> {
    return this.settled()
  }

  /**
   * Every key of the group's state machine as of the last entry handed to `apply` before this
   * call (the index the caller labels the snapshot with), and nothing later: the read takes
   * its place in the apply chain, so entries handed to `apply` meanwhile wait until it is
   * done, and it starts once every earlier entry's writes are stored. (Reading after the
   * earlier entries only, while later ones went on applying and writing, gave data newer
   * than its index: a replica installing it applied those later entries a second time.)
   */
  snapshot(): Promise<Uint8Array> {
    const read = this.#tail.then(async () => {
      await this.#lastWrite
      return encodePairs(await this.#readAll())
    })
    this.#tail = read.then(
      () => {},
      (error: unknown) => this.#fatal(error),
    )
    return read
  }

  /**
   * Every key of the group's state machine, a page per engine call, but for the garbage of
   * dropped partitions still being swept (their tombstones are in). Consistent without one
   * engine snapshot: nothing else writes the group's keys while a snapshot reads (later
   * entries wait behind it, and every earlier write is stored; the sweeps delete garbage only).
   */
  async #readAll(): Promise<(readonly [Uint8Array, Uint8Array])[]> {
    const { gte, lt } = stateMachineRange(this.#machine.groupId)
    const garbage = this.#machine.garbageRanges()
    const pairs: (readonly [Uint8Array, Uint8Array])[] = []
    let from: Start = { gte }
    for (;;) {
      const page = await this.#reader.range({ ...from, lt, limit: this.#pageKeys })
      let next: Start | undefined
      for (const pair of page) {
        const skip = garbage.find((g) => inRange(pair[0], g))
        if (skip) {
          // Read on from the end of the garbage range.
          next = { gte: skip.lt }
          break
        }
        pairs.push(pair)
      }
      if (next) {
        from = next
        continue
      }
      if (page.length < this.#pageKeys) return pairs
      from = { gt: (page[page.length - 1] as readonly [Uint8Array, Uint8Array])[0] }
    }
  }

  /**
   * Replaces the group's state-machine keys with the snapshot's and reopens its partitions.
   * The keys are replaced a page per write (`pageKeys`), not in one write: a group with a large
   * backlog has millions of keys, and one write of them all held the node's single write
   * chain (every group's log appends) for seconds. The applied index is written last, and the
   * old one is kept until then: after a crash midway the group's applied index is still below
   * the snapshot its log store holds, and the node installs the snapshot again at start.
   */
  async restore(snapshot: Snapshot): Promise<void> {
    await this.#tail
    const pairs = decodePairs(snapshot.data)
    await this.#machine.reload(() => this.#replaceKeys(pairs, snapshot.meta.index))
    this.#applied = snapshot.meta.index
  }

  async #replaceKeys(pairs: readonly (readonly [Uint8Array, Uint8Array])[], index: number): Promise<void> {
    const { gte, lt } = stateMachineRange(this.#machine.groupId)
    const notApplied = (key: Uint8Array) => compareKeys(key, this.#appliedKey) !== 0
    let from: Start = { gte }
    for (;;) {
      const page = await this.#reader.range({ ...from, lt, limit: this.#pageKeys })
      const ops: BatchOp[] = page.filter(([key]) => notApplied(key)).map(([key]) => ({ type: 'del', key }))
      if (ops.length > 0) await this.#write(ops)
      if (page.length < this.#pageKeys) break
      from = { gt: (page[page.length - 1] as readonly [Uint8Array, Uint8Array])[0] }
    }
    const puts = pairs.filter(([key]) => notApplied(key))
    for (let i = 0; i < puts.length; i += this.#pageKeys) {
      await this.#write(
        puts.slice(i, i + this.#pageKeys).map(([key, value]) => ({ type: 'put', key, value })),
      )
    }
    await this.#write([{ type: 'put', key: this.#appliedKey, value: encodeIndex(index) }])
  }
}

/** Where a data group's applied index is kept (inside its state-machine key space). */
export function appliedKeyOf(groupId: number): Uint8Array {
  return stateMachineKey(groupId, ['applied'])
}

export function encodeIndex(index: number): Uint8Array {
  const out = new Uint8Array(8)
  new DataView(out.buffer).setBigUint64(0, BigInt(index))
  return out
}

export function decodeIndex(bytes: Uint8Array | undefined): number {
  if (bytes?.length !== 8) return 0
  return Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0))
}
