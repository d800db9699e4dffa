import type { BatchOp, KvReader, WriteOptions } from '@mq/kv-storage'

/** What the sweeper reads and writes: the node's engine. */
export interface SweepEngine extends KvReader {
  write(ops: readonly BatchOp[], options: WriteOptions): Promise<void>
}

export interface SweepRange {
  readonly gte: Uint8Array
  readonly lt: Uint8Array
}

/**
 * Keys one sweep write deletes at most. A dropped partition with a backlog holds millions of
 * keys: deleted in one write, its listing and its batch held the node's single write chain
 * (every group's Raft log appends) for seconds on every replica at once, and every group lost
 * its leader (measured: 10–17 leaderships won after a queue of 2 million messages was
 * deleted). A page is ~1,024 small deletes, written without waiting for fsync.
 */
export const SWEEP_PAGE_KEYS = 1024

/** The sweeper was stopped before the range was swept (the range's tombstone remains). */
export class SweepStoppedError extends Error {
  override readonly name = 'SweepStoppedError'
}

interface Sweep {
  readonly range: SweepRange
  readonly done: Promise<void>
}

/**
 * Deletes key ranges that nothing reads any more (the keys of a dropped partition), a page per
 * write, one range after the other, in the background. A range is given with the key of its
 * tombstone (the persisted note that the range is to be swept, written with the drop): the
 * tombstone is deleted after the range's last key, so after a crash the tombstones still on
 * disk name exactly the sweeps to do again. Until a range is swept, its key space must not be
 * written again: `whenSwept` tells when it may be.
 *
 * Deletes are written without fsync: LevelDB's log keeps writes in order, so a tombstone's
 * delete that survives a crash implies every delete of its range before it did.
 */
export class RangeSweeper {
  readonly #engine: SweepEngine
  readonly #pageKeys: number
  readonly #pending = new Map<string, Sweep>()
  #tail: Promise<void> = Promise.resolve()
  #stopped = false
  /**
   * The sweeps waiting for their `ready`, each told when `stop` is called (it gives up then),
   * and gone once its `ready` resolves. (Each raced `ready` against one promise of the stop:
   * a reaction per sweep stayed on it until the sweeper stopped, ~300 bytes for every
   * partition a group ever dropped or imported.)
   */
  readonly #waiting = new Set<() => void>()

  constructor(engine: SweepEngine, pageKeys = SWEEP_PAGE_KEYS) {
    this.#engine = engine
    this.#pageKeys = pageKeys
  }

  /**
   * Sweeps `range` (named `id`) once `ready` resolves and every sweep scheduled before it is
   * done, then deletes `tombstone` (if any). The returned promise (also `whenSwept(id)`)
   * resolves once the range is empty, rejects if a write failed or the sweeper was stopped.
   */
  sweep(
    id: string,
    range: SweepRange,
    tombstone?: Uint8Array,
    ready: Promise<void> = Promise.resolve(),
  ): Promise<void> {
    const done = this.#tail.then(async () => {
      await this.#readyOrStopped(ready)
      await this.#clear(range, tombstone)
    })
    const sweep: Sweep = { range, done }
    this.#pending.set(id, sweep)
    this.#tail = done.then(
      () => {},
      () => {},
    )
    done.then(
      () => {
        if (this.#pending.get(id) === sweep) this.#pending.delete(id)
      },
      () => {},
    )
    return done
  }

  /** Resolves once no sweep of `id` is pending (at once when none is). */
  whenSwept(id: string): Promise<void> {
    return this.#pending.get(id)?.done ?? Promise.resolve()
  }

  /** The ranges scheduled or being swept: their keys are garbage (left out of snapshots). */
  pendingRanges(): SweepRange[] {
    return [...this.#pending.values()].map((s) => s.range)
  }

  /** Resolves once every sweep scheduled so far has ended (swept, failed or stopped). */
  settled(): Promise<void> {
    return this.#tail
  }

  /**
   * Stops sweeping after the page being written; the pending sweeps end with
   * SweepStoppedError (their tombstones stay). `resume` starts afresh, with nothing pending.
   */
  async stop(): Promise<void> {
    this.#stopped = true
    for (const giveUp of this.#waiting) giveUp()
    this.#waiting.clear()
    await this.#tail
  }

  resume(): void {
    this.#pending.clear()
    this.#stopped = false
  }

  /** Resolves once `ready` settles, or at once when the sweeper is stopped (now or meanwhile). */
  #readyOrStopped(ready: Promise<void>): Promise<void> {
    if (this.#stopped) return Promise.resolve()
    return new Promise<void>((resolve) => {
      this.#waiting.add(resolve)
      const leave = () => {
        this.#waiting.delete(resolve)
        resolve()
      }
      ready.then(leave, leave)
    })
  }

  async #clear(range: SweepRange, tombstone: Uint8Array | undefined): Promise<void> {
    // Each page starts after the previous one's last key, not at the range's start, where
    // the deletes already written would have to be stepped over again.
    let after: Uint8Array | undefined
    for (;;) {
      if (this.#stopped) throw new SweepStoppedError('the sweeper was stopped')
      // Keys only: a page of 1,024 messages of 256 KiB would otherwise be read into memory.
      const page = await this.#engine.keys({
        ...(after ? { gt: after } : { gte: range.gte }),
        lt: range.lt,
        limit: this.#pageKeys,
      })
      const ops: BatchOp[] = page.map((key) => ({ type: 'del', key }))
      const last = page.length < this.#pageKeys
      if (last && tombstone) ops.push({ type: 'del', key: tombstone })
      if (ops.length > 0) await this.#engine.write(ops, { sync: false })
      if (last) return
      after = page[page.length - 1]
      // Let the node's other work (ticks, other groups' writes) in between pages.
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }
}
