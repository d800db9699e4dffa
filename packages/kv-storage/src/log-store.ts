import type { ConfState, Durability } from '@mq/raft-core'
import type { BatchOp, Engine } from './engine'
import {
  ClosedError,
  CorruptRecordError,
  GroupRemovingError,
  InvalidArgumentError,
  OverloadedError,
} from './errors'
import { GroupCommit, type GroupCommitOptions, type GroupCommitStats } from './group-commit'
import { GroupLog } from './group-log'
import { decodeTuple, encodeTuple, prefixRange } from './key-codec'
import { groupRange, groupRemovingKey, groupRemovingRange, KeySpace } from './log-keys'

export interface LogStoreOptions extends GroupCommitOptions {
  /** Snapshot data is stored in chunks of at most this many bytes. Default 1 MiB. */
  readonly snapshotChunkBytes?: number
  /** Snapshot data above this many bytes is refused (it is held in memory). Default 256 MiB. */
  readonly snapshotDataBytesMax?: number
  /** Entries read per page while a group recovers. Default 4,096. */
  readonly recoverPageEntries?: number
  /** Groups open at once, at most. Default 100,000. */
  readonly groupsMax?: number
  /** Keys deleted per write by removeGroupInPages. Default 4,096. */
  readonly removePageKeys?: number
}

/**
 * The Raft log store of one database, for many groups: each group's log, hard state and
 * snapshot live under its own key prefix (see log-keys.ts), and one GroupCommit makes the
 * writes of every group durable together. The store does not own the engine: close the
 * store, then the engine.
 *
 *   const store = new LogStore(engine)
 *   const log = await store.openGroup(7)   // recovers group 7 from disk (empty if new)
 *   log.append(entries); log.setHardState(hs)
 *   await store.durability.flush()          // one fsync for every group's staged writes
 */
export class LogStore {
  /** The database's single writer; also the `Durability` port of the Raft runtime. */
  readonly commit: GroupCommit
  private readonly groups = new Map<number, GroupLog>()
  private readonly opening = new Map<number, Promise<GroupLog>>()
  private readonly groupsMax: number
  private readonly removePageKeys: number
  /** Groups whose removal in pages has begun in this process and not ended (openGroup refuses them). */
  private readonly removing = new Set<number>()
  private readonly limits: {
    snapshotChunkBytes: number
    snapshotDataBytesMax: number
    recoverPageEntries: number
  }
  private closed = false

  constructor(
    private readonly engine: Engine,
    options: LogStoreOptions = {},
  ) {
    this.commit = new GroupCommit(engine, options)
    this.limits = {
      snapshotChunkBytes: atLeastOne('snapshotChunkBytes', options.snapshotChunkBytes ?? 1024 * 1024),
      snapshotDataBytesMax: atLeastOne(
        'snapshotDataBytesMax',
        options.snapshotDataBytesMax ?? 256 * 1024 * 1024,
      ),
      recoverPageEntries: atLeastOne('recoverPageEntries', options.recoverPageEntries ?? 4096),
    }
    this.groupsMax = atLeastOne('groupsMax', options.groupsMax ?? 100_000)
    this.removePageKeys = atLeastOne('removePageKeys', options.removePageKeys ?? 4096)
  }

  /** The Raft runtime's Durability port: `flush()` makes every group's staged writes durable. */
  get durability(): Durability {
    return this.commit
  }

  /**
   * Opens group `groupId`'s log, reading its hard state, snapshot and entries from disk
   * (an empty log when the group has none). `initialConf` is the bootstrap membership that
   * `initialState()` reports until a snapshot carries one (it is not stored). Returns the
   * open instance when it is open already. Throws CorruptRecordError when a stored record is damaged (naming the group
   * and index), ClosedError after close, InvalidArgumentError for a bad id or too many groups.
   */
  async openGroup(groupId: number, initialConf?: ConfState): Promise<GroupLog> {
    this.checkOpen()
    checkGroupId(groupId)
    const open = this.groups.get(groupId)
    if (open) return open
    const pending = this.opening.get(groupId)
    if (pending) return pending
    if (this.removing.has(groupId)) {
      throw new GroupRemovingError(
        `group ${groupId} is being removed from this store (a page at a time); open it once that ends`,
      )
    }
    if (this.groups.size + this.opening.size >= this.groupsMax) {
      throw new InvalidArgumentError(`log store: ${this.groupsMax} groups are open already (groupsMax)`)
    }
    const task = (async () => {
      // Staged writes (a removal, say) must be on disk before the group is read back.
      await this.commit.flush()
      const snap = await this.engine.snapshot()
      try {
        const log = await GroupLog.recover(snap, groupId, this.commit, this.limits, initialConf).catch(
          (err) => {
            // An engine-level corruption names no group; say which group was being read.
            if (err instanceof CorruptRecordError && err.groupId === undefined) {
              throw new CorruptRecordError(`group ${groupId}: ${err.message}`, { groupId }, { cause: err })
            }
            throw err
          },
        )
        if (this.closed) throw new ClosedError('log store closed while the group was opening')
        this.groups.set(groupId, log)
        return log
      } finally {
        await snap.close()
      }
    })()
    this.opening.set(groupId, task)
    try {
      return await task
    } finally {
      this.opening.delete(groupId)
    }
  }

  /** The open log of `groupId`, if any. */
  group(groupId: number): GroupLog | undefined {
    return this.groups.get(groupId)
  }

  /** The ids of the groups that have any key in the database, ascending (a skip scan). */
  async groupIdsOnDisk(): Promise<number[]> {
    this.checkOpen()
    const ids: number[] = []
    const end = encodeTuple([KeySpace.Group + 1])
    let from = encodeTuple([KeySpace.Group])
    for (let i = 0; i < this.groupsMax * 10; i++) {
      const [row] = await this.engine.range({ gte: from, lt: end, limit: 1 })
      if (!row) return ids
      // Only the space and the id: what follows may be a state machine's own bytes (appendBytes).
      const id = decodeTuple(row[0], 2)[1]
      if (typeof id !== 'number') return ids
      ids.push(id)
      // Past every key of the group (id + 1 would leave the codec's range at the largest id).
      from = prefixRange([KeySpace.Group, id]).lt
    }
    return ids
  }

  /**
   * Removes group `groupId` entirely — log, hard state, snapshot and its state machine's
   * keys — as one range clear, and resolves once that is durable. Its open log is closed.
   */
  async removeGroup(groupId: number): Promise<void> {
    this.checkOpen()
    checkGroupId(groupId)
    const pending = this.opening.get(groupId)
    if (pending) await pending.catch(() => {})
    const log = this.groups.get(groupId)
    const range = groupRange(groupId)
    this.commit.stage([{ type: 'clear', gte: range.gte, lt: range.lt }])
    log?.close()
    this.groups.delete(groupId)
    await this.commit.flush()
  }

  /**
   * Removes group `groupId` like removeGroup, but a page of its keys per write first
   * (`removePageKeys`), then the range clear: a group holding millions of keys (a replica
   * replaced with its backlog) would otherwise be one batch, expanded into every key in memory,
   * that holds every other group's fsync for seconds. A marker made durable first says the
   * removal is under way; `finishRemovals()` (before the groups on disk are opened) completes
   * one a crash cut short, so a group half deleted is never opened. Resolves once it is gone.
   */
  async removeGroupInPages(groupId: number): Promise<void> {
    this.checkOpen()
    checkGroupId(groupId)
    const pending = this.opening.get(groupId)
    if (pending) await pending.catch(() => {})
    this.groups.get(groupId)?.close()
    this.groups.delete(groupId)
    // Until it ends (or, after a failed write, until the store is opened again and
    // finishRemovals completes it), the group is not opened half deleted.
    this.removing.add(groupId)
    // Waiting for room (an overloaded commit refuses a stage): given up here, the group would
    // stay closed and refused, with nothing on disk to finish its removal.
    await this.writeWhenRoom([{ type: 'put', key: groupRemovingKey(groupId), value: new Uint8Array(0) }])
    await this.clearInPages(groupId)
    this.removing.delete(groupId)
  }

  /**
   * Completes the removals in pages that a crash cut short (their markers): call before
   * `groupIdsOnDisk()` and before opening any group. Returns the groups removed.
   */
  async finishRemovals(): Promise<number[]> {
    this.checkOpen()
    const ids: number[] = []
    for (const key of await this.engine.keys(groupRemovingRange())) {
      const id = decodeTuple(key)[2]
      if (typeof id === 'number' && Number.isSafeInteger(id) && id >= 0) ids.push(id)
    }
    for (const id of ids) await this.clearInPages(id)
    return ids
  }

  /** Deletes group `groupId`'s keys a page per write, then clears its range and its marker. */
  private async clearInPages(groupId: number): Promise<void> {
    const range = groupRange(groupId)
    let after: Uint8Array | undefined
    for (;;) {
      const keys = await this.engine.keys({
        ...(after ? { gt: after } : { gte: range.gte }),
        lt: range.lt,
        limit: this.removePageKeys,
      })
      if (keys.length > 0) await this.writeWhenRoom(keys.map((key) => ({ type: 'del' as const, key })))
      if (keys.length < this.removePageKeys) break
      after = keys[keys.length - 1]
    }
    // What was staged for the group and not yet in the engine, and the marker.
    await this.writeWhenRoom([
      { type: 'clear', gte: range.gte, lt: range.lt },
      { type: 'del', key: groupRemovingKey(groupId) },
    ])
  }

  /**
   * `commit.write(ops)`, tried again after the next flush while the commit is overloaded (a
   * removal must end: given up halfway, it would leave the group half deleted until a restart).
   */
  private async writeWhenRoom(ops: readonly BatchOp[]): Promise<void> {
    for (;;) {
      try {
        return await this.commit.write(ops)
      } catch (error) {
        if (!(error instanceof OverloadedError)) throw error
        await this.commit.flush().catch(() => {})
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
    }
  }

  /** Stages extra ops (a state machine's) into the next group commit; see GroupCommit.stage. */
  stage(ops: readonly BatchOp[]): void {
    this.commit.stage(ops)
  }

  stats(): GroupCommitStats {
    return this.commit.stats()
  }

  /** Flushes what is staged, closes every group's log and the group commit. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.allSettled([...this.opening.values()])
    await this.commit.close()
    for (const log of this.groups.values()) log.close()
    this.groups.clear()
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('log store is closed')
  }
}

function checkGroupId(groupId: number): void {
  if (!Number.isSafeInteger(groupId) || groupId < 0) {
    throw new InvalidArgumentError(`log store: group id ${groupId} is not an integer >= 0`)
  }
}

function atLeastOne(name: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 1)
    throw new InvalidArgumentError(`log store: ${name} must be an integer >= 1`)
  return n
}
