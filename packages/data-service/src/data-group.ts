import { type BatchOp, decodeTuple, type KvReader, stateMachineKey, stateMachineRange } from '@mq/kv-storage'
import {
  type CommandResult,
  type DeadMessage,
  type QueueConfig as PartitionConfig,
  QueuePartition,
  type QueueStats,
} from '@mq/weighted-queue'
import { decodeDataCommand } from './data-command'

/** The outcome of one data-group entry: the same on every replica. */
export type DataResult =
  | { readonly type: 'opened' | 'dropped' }
  | { readonly type: 'applied'; readonly result: CommandResult }
  /** The entry changed nothing: it was malformed or named a partition this group does not hold. */
  | { readonly type: 'refused'; readonly reason: 'malformed' | 'not-held'; readonly message: string }

export interface DataApplied {
  readonly result: DataResult
  /** The writes to put in the same storage batch as the apply index. */
  readonly ops: BatchOp[]
  /** Call once `ops` (and every earlier apply's) are in the engine. */
  readonly written: () => void
}

const REGISTRY = 'partitions'
const PARTITION_DATA = 'p'
const encoder = new TextEncoder()
const decoder = new TextDecoder()
const NOTHING = (): void => {}

/**
 * The state machine of one data group: the queue partitions the group holds (claim 6: the
 * leader stores messages and takes them out by weight), each a weighted-queue partition
 * under its own key prefix inside the group's key space, so that removing the group removes
 * them too. Applies the group's log entries in order; deterministic.
 *
 * Keys: (group, 16, 'partitions', queue, index) → the partition's config (the registry);
 * (group, 16, 'p', queue, index, …) → the partition's own state.
 */
export class DataGroupMachine {
  readonly groupId: number
  readonly #reader: KvReader
  readonly #partitions = new Map<string, QueuePartition>()
  #applying: Promise<unknown> = Promise.resolve()

  private constructor(groupId: number, reader: KvReader) {
    this.groupId = groupId
    this.#reader = reader
  }

  /** Opens the group's state machine from what `reader` holds (empty: a new group). */
  static async open(groupId: number, reader: KvReader): Promise<DataGroupMachine> {
    const machine = new DataGroupMachine(groupId, reader)
    await machine.#load()
    return machine
  }

  /** The partitions this group holds, as `queue/index`. */
  partitionIds(): string[] {
    return [...this.#partitions.keys()].sort()
  }

  /** Whether this group holds `queue`'s partition `index`. */
  holds(queue: string, index: number): boolean {
    return this.#partitions.has(idOf(queue, index))
  }

  stats(queue: string, index: number, nowMs: number): Promise<QueueStats> | undefined {
    return this.#partitions.get(idOf(queue, index))?.stats(nowMs)
  }

  listDead(queue: string, index: number, max: number, cursor?: number): Promise<DeadMessage[]> | undefined {
    return this.#partitions.get(idOf(queue, index))?.listDead(max, cursor)
  }

  /**
   * Applies one committed entry's data at the entry's leader timestamp `nowMs`. Calls are
   * queued, so they never overlap, in the order they are made.
   */
  apply(data: Uint8Array, nowMs: number): Promise<DataApplied> {
    const next = this.#applying.then(() => this.#apply(data, nowMs))
    this.#applying = next.catch(() => {})
    return next
  }

  /** Forgets every partition and reloads from `reader` (after a snapshot was installed). */
  async reload(): Promise<void> {
    await this.#applying
    this.#partitions.clear()
    await this.#load()
  }

  async #apply(data: Uint8Array, nowMs: number): Promise<DataApplied> {
    let command: ReturnType<typeof decodeDataCommand>
    try {
      command = decodeDataCommand(data)
    } catch (error) {
      return refused('malformed', `malformed data-group entry: ${(error as Error).message}`)
    }
    const id = idOf(command.queue, command.partition)
    switch (command.type) {
      case 'open': {
        if (this.#partitions.has(id)) return { result: { type: 'opened' }, ops: [], written: NOTHING }
        const partition = await QueuePartition.open(
          this.#reader,
          this.#prefix(command.queue, command.partition),
          command.config,
        )
        this.#partitions.set(id, partition)
        const value = encoder.encode(JSON.stringify(command.config))
        return {
          result: { type: 'opened' },
          ops: [{ type: 'put', key: this.#registryKey(command.queue, command.partition), value }],
          written: NOTHING,
        }
      }
      case 'drop': {
        if (!this.#partitions.delete(id))
          return refused('not-held', `group ${this.groupId} does not hold ${id}`)
        const range = stateMachineRange(this.groupId, [PARTITION_DATA, command.queue, command.partition])
        return {
          result: { type: 'dropped' },
          ops: [
            { type: 'del', key: this.#registryKey(command.queue, command.partition) },
            { type: 'clear', gte: range.gte, lt: range.lt },
          ],
          written: NOTHING,
        }
      }
      case 'apply': {
        const partition = this.#partitions.get(id)
        if (!partition) return refused('not-held', `group ${this.groupId} does not hold ${id}`)
        const applied = await partition.apply(command.command, nowMs)
        return {
          result: { type: 'applied', result: applied.result },
          ops: applied.ops,
          written: () => partition.release(applied.generation),
        }
      }
    }
  }

  async #load(): Promise<void> {
    const registry = stateMachineRange(this.groupId, [REGISTRY])
    for (const [key, value] of await this.#reader.range({ gte: registry.gte, lt: registry.lt })) {
      const config = JSON.parse(decoder.decode(value)) as Partial<PartitionConfig>
      const { queue, index } = this.#parseRegistryKey(key)
      this.#partitions.set(
        idOf(queue, index),
        await QueuePartition.open(this.#reader, this.#prefix(queue, index), config),
      )
    }
  }

  #registryKey(queue: string, index: number): Uint8Array {
    return stateMachineKey(this.groupId, [REGISTRY, queue, index])
  }

  #parseRegistryKey(key: Uint8Array): { queue: string; index: number } {
    // The registry key is (…, 'partitions', queue, index).
    const tuple = decodeTuple(key)
    return { queue: tuple[tuple.length - 2] as string, index: tuple[tuple.length - 1] as number }
  }

  #prefix(queue: string, index: number): Uint8Array {
    return stateMachineKey(this.groupId, [PARTITION_DATA, queue, index])
  }
}

function idOf(queue: string, index: number): string {
  return `${queue}/${index}`
}

function refused(reason: 'malformed' | 'not-held', message: string): DataApplied {
  return { result: { type: 'refused', reason, message }, ops: [], written: NOTHING }
}
