import { type DataGroupMachine, type DataResult, decodePairs, encodePairs } from '@mq/data-service'
import { type BatchOp, compareKeys, stateMachineKey, stateMachineRange } from '@mq/kv-storage'
import { type Entry, EntryType, type Snapshot, type StateMachine } from '@mq/raft-core'
import { decodeImageHandle } from './image-handle'
import {
  deletePages,
  type KeyReader,
  type KeySpan,
  type PageLimits,
  type Pair,
  type Start,
} from './key-pages'

export { decodePairs, encodePairs }

/** Persists state-machine writes: stages them into the node's group commit, resolves once durable. */
export interface SmWriter {
  write(ops: readonly BatchOp[]): Promise<void>
}

/** Reads the group's own keys (an install deletes them a page at a time). */
export type SmReader = KeyReader

/**
 * Where a data group's snapshot images come from and go (image-handle.ts): `take` makes an
 * image on this node (ImageStore) and returns its handle; `staged`, `page` and `installed` read
 * and drop the images fetched from a leader and staged on disk (ImageStager).
 */
export interface ImagePort {
  take(groupId: number, index: number, garbage: readonly KeySpan[]): Promise<Uint8Array>
  staged(groupId: number, imageId: number, index: number): Promise<boolean>
  page(
    groupId: number,
    imageId: number,
    from: Start | undefined,
    limits: PageLimits,
  ): Promise<{ pairs: Pair[]; next: Start | undefined }>
  /** An image at `index` was installed: the staged images it makes useless can go. */
  installed(groupId: number, index: number): Promise<void>
}

/** Bytes of keys and values an install writes per write at most (give or take a few values). */
const INSTALL_PAGE_BYTES = 4 * 1024 * 1024

/**
 * Keys an install reads and writes per engine call. A group holding a large backlog has
 * millions of keys: in one write they held the node's single write chain (every group's log
 * appends) for seconds; read in one call (as images were once), their conversion held the
 * event loop for seconds, on every replica at once, and every group lost its leader
 * (measured: ~4 s without leaders under a sustained load of 2 million messages). Between
 * pages the node serves its other groups, ticks and heartbeats.
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
 * the applied index) once every applied entry's writes are durable: an engine snapshot kept
 * open by this node, which the Raft snapshot names by a handle (image-handle.ts); the
 * follower fetches and stages it before its replica installs the snapshot. Installing one
 * replaces the group's keys with the staged ones, a page per write and the applied index
 * last, and reopens the partitions.
 */
export class DataMachine implements StateMachine {
  readonly #machine: DataGroupMachine
  readonly #writer: SmWriter
  readonly #appliedKey: Uint8Array
  #applied: number
  #tail: Promise<void> = Promise.resolve()
  /** Entries handed to apply whose apply or write has not finished (applyBacklog). */
  #backlog = 0
  /** Called as the backlog goes down (the node wires RaftHost.backlogDown: a paused group resumes). */
  onBacklogDown: () => void = () => {}
  /** The last write handed to storage (all earlier ones are ordered before it). */
  #lastWrite: Promise<void> = Promise.resolve()
  readonly #reader: SmReader
  readonly #images: ImagePort
  readonly #pageKeys: number
  #fatal: (error: unknown) => void
  /** The first apply or write that failed (the node is stopping); nothing is durable past it. */
  #failure: { error: unknown } | undefined

  constructor(
    machine: DataGroupMachine,
    writer: SmWriter,
    reader: SmReader,
    images: ImagePort,
    appliedIndex: number,
    fatal: (error: unknown) => void,
    pageKeys = SNAPSHOT_PAGE_KEYS,
  ) {
    this.#pageKeys = pageKeys
    this.#machine = machine
    this.#writer = writer
    this.#reader = reader
    this.#images = images
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

  /**
   * StateMachine.applyBacklog: entries handed to apply whose apply or write has not finished.
   * The Raft host hands no more while it is at its bound (a slow disk, a follower short of CPU),
   * so the chain below, each entry holding its data, cannot grow without bound.
   */
  applyBacklog(): number {
    return this.#backlog
  }

  apply(entries: readonly Entry[]): readonly unknown[] {
    return entries.map((e) => {
      if (e.index <= this.#applied) return undefined
      this.#applied = e.index
      this.#backlog++
      let written: Promise<unknown> = Promise.resolve()
      const appliedOp: BatchOp = { type: 'put', key: this.#appliedKey, value: encodeIndex(e.index) }
      // One chain for every entry: applies run in log order, and each entry's writes are
      // handed to storage before the next entry's, so the stored applied index never passes
      // an entry whose writes are not stored.
      const step = this.#tail.then(async (): Promise<DataResult | undefined> => {
        // After a failed apply or write nothing more is applied or written: a later entry's
        // write would store an applied index past the entry whose writes are missing.
        this.#throwIfFailed()
        if (e.type !== EntryType.Normal || e.data.length === 0) {
          written = this.#write([appliedOp])
          return undefined
        }
        // `written`: the writes of every earlier entry (a fence or an import's end waits for them).
        const applied = await this.#machine.apply(e.data, e.timestampMs, () => this.#lastWrite)
        // An earlier write may have failed while this entry applied (the writer's chain fails
        // this one too, when given one: node.ts).
        this.#throwIfFailed()
        written = this.#write([...applied.ops, appliedOp])
        written.then(applied.written, () => {})
        return applied.result
      })
      this.#tail = step.then(
        () => {},
        (error: unknown) => this.#fatal(error),
      )
      step
        .then(() => written)
        .catch(() => {})
        .finally(() => {
          this.#backlog--
          this.onBacklogDown()
        })
      return step
    })
  }

  #throwIfFailed(): void {
    if (this.#failure) throw this.#failure.error
  }

  #write(ops: readonly BatchOp[]): Promise<void> {
    const written = this.#writer.write(ops)
    this.#lastWrite = written.catch((error: unknown) => this.#fatal(error))
    return written
  }

  /**
   * Resolves once every entry handed to apply so far has applied (its writes may still be on
   * their way to storage): what a read of the machine past Raft's read index waits for, since
   * the Raft host counts an entry applied once it is handed over. Rejects once an apply or a
   * write failed.
   */
  async caughtUp(): Promise<void> {
    await this.#tail
    if (this.#failure) throw this.#failure.error
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
   * An image of every key of the group's state machine as of the last entry handed to `apply`
   * before this call (the index the caller labels the snapshot with), and nothing later: it is
   * taken in its place in the apply chain, so entries handed to `apply` meanwhile wait until
   * it is taken, and once every earlier entry's writes are stored. (Reading after the earlier
   * entries only, while later ones went on applying and writing, gave data newer than its
   * index: a replica installing it applied those later entries a second time.) Resolves with
   * the image's handle; the image is an engine snapshot, so taking one reads nothing, and the
   * garbage of dropped partitions still being swept is left out of it.
   */
  snapshot(): Promise<Uint8Array> {
    const index = this.#applied
    const taken = this.#tail.then(async () => {
      await this.#lastWrite
      // After a failed write the stored state lacks entries at or below `index`.
      this.#throwIfFailed()
      return this.#images.take(this.#machine.groupId, index, this.#machine.garbageRanges())
    })
    this.#tail = taken.then(
      () => {},
      (error: unknown) => this.#fatal(error),
    )
    return taken
  }

  /**
   * Replaces the group's state-machine keys with the snapshot's and reopens its partitions:
   * from the image staged on disk when the snapshot carries a handle (the only kind made now),
   * or from the snapshot's own bytes (an image a data dir may hold from before 2026-11-30).
   * The keys are replaced a page per write, not in one write (see SNAPSHOT_PAGE_KEYS). The
   * applied index is written last, and the old one is kept until then: after a crash midway
   * the group's applied index is still below the snapshot its log store holds, and the node
   * installs the snapshot again at start (the staged image is dropped only after). The
   * install takes its place in the apply chain, so `settled()` (what a group's removal waits
   * for before it deletes the group's keys) waits for it too: a removal that cleared the keys
   * while an install went on left the install's later pages and its applied index behind, and
   * the node then refused to start ("appliedIndex 2992 is beyond the stored commit 0").
   */
  restore(snapshot: Snapshot): Promise<void> {
    const installed = this.#tail.then(() => this.#install(snapshot))
    this.#tail = installed.then(
      () => {},
      (error: unknown) => this.#fatal(error),
    )
    return installed
  }

  async #install(snapshot: Snapshot): Promise<void> {
    // The writes of the entries applied before it must be stored first: the install deletes
    // the keys it finds, and a key still in the group commit would be written after that and
    // stay (a follower's leftover lease group then broke the partition's invariants at its
    // expiry, on that replica alone: "lease group … counted its live members").
    await this.#lastWrite
    if (this.#failure) throw this.#failure.error
    const groupId = this.#machine.groupId
    const { index } = snapshot.meta
    const handle = decodeImageHandle(snapshot.data)
    if (handle === undefined) {
      const pairs = decodePairs(snapshot.data)
      let at = 0 // the pages are asked for in order
      await this.#machine.reload(() =>
        this.#replaceKeys(async () => {
          const page = pairs.slice(at, at + this.#pageKeys)
          at += page.length
          return { pairs: page, next: at < pairs.length ? { gte: (pairs[at] as Pair)[0] } : undefined }
        }, index),
      )
      this.#applied = index
      return
    }
    if (
      handle.groupId !== groupId ||
      handle.index !== index ||
      !(await this.#images.staged(groupId, handle.imageId, index))
    ) {
      throw new Error(
        `data group ${groupId}: the snapshot at ${index} names image ${handle.imageId} (group ${handle.groupId}, index ${handle.index}), which is not staged here`,
      )
    }
    await this.#machine.reload(() =>
      this.#replaceKeys((from, limits) => this.#images.page(groupId, handle.imageId, from, limits), index),
    )
    this.#applied = index
    await this.#images.installed(groupId, index)
  }

  async #replaceKeys(
    source: (
      from: Start | undefined,
      limits: PageLimits,
    ) => Promise<{ pairs: Pair[]; next: Start | undefined }>,
    index: number,
  ): Promise<void> {
    // The applied index stays until the last write (see restore).
    const isApplied = (key: Uint8Array) => compareKeys(key, this.#appliedKey) === 0
    const groupKeys = stateMachineRange(this.#machine.groupId)
    await deletePages(this.#reader, (ops) => this.#write(ops), groupKeys, this.#pageKeys, isApplied)
    let at: Start | undefined
    do {
      const page = await source(at, { keys: this.#pageKeys, bytes: INSTALL_PAGE_BYTES })
      const ops: BatchOp[] = page.pairs
        .filter(([key]) => !isApplied(key))
        .map(([key, value]) => ({ type: 'put', key, value }))
      if (ops.length > 0) await this.#write(ops)
      at = page.next
    } while (at)
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
