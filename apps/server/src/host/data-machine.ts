import type { DataGroupMachine, DataResult } from '@mq/data-service'
import { type BatchOp, stateMachineKey } from '@mq/kv-storage'
import { type Entry, EntryType, type Snapshot, type StateMachine } from '@mq/raft-core'

/** Persists state-machine writes: stages them into the node's group commit, resolves once durable. */
export interface SmWriter {
  write(ops: readonly BatchOp[]): Promise<void>
}

/**
 * A data group's state machine on the Raft runtime. The runtime's apply is synchronous; the
 * queue partitions read LevelDB asynchronously, so each entry's result is a promise that the
 * proposer awaits, and entries are applied strictly in order behind one another
 * (DataGroupMachine queues them). Each entry's writes go to storage together with the group's
 * applied index, in one batch, so after a crash the machine resumes exactly after the last
 * entry whose writes are durable: entries at or below that index are skipped, never applied
 * twice.
 *
 * Snapshots are not supported yet (see the server README): the host is configured never to
 * compact data-group logs, so no follower ever needs one.
 */
export class DataMachine implements StateMachine {
  readonly #machine: DataGroupMachine
  readonly #writer: SmWriter
  readonly #appliedKey: Uint8Array
  #applied: number
  #tail: Promise<void> = Promise.resolve()
  #fatal: (error: unknown) => void
  /** Called after an entry's effects are applied (to wake long polls). */
  onApplied: () => void = () => {}

  constructor(
    machine: DataGroupMachine,
    writer: SmWriter,
    appliedIndex: number,
    fatal: (error: unknown) => void,
  ) {
    this.#machine = machine
    this.#writer = writer
    this.#applied = appliedIndex
    this.#appliedKey = appliedKeyOf(machine.groupId)
    this.#fatal = fatal
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
        if (e.type !== EntryType.Normal || e.data.length === 0) {
          void this.#writer.write([appliedOp]).catch(this.#fatal)
          return undefined
        }
        const applied = await this.#machine.apply(e.data, e.timestampMs)
        void this.#writer.write([...applied.ops, appliedOp]).then(applied.written, this.#fatal)
        this.onApplied()
        return applied.result
      })
      this.#tail = step.then(
        () => {},
        (error: unknown) => this.#fatal(error),
      )
      return step
    })
  }

  snapshot(): Uint8Array {
    throw new Error(
      `data group ${this.#machine.groupId}: snapshots are not supported yet; data-group logs are never compacted`,
    )
  }

  restore(_snapshot: Snapshot): void {
    throw new Error(`data group ${this.#machine.groupId}: installing a snapshot is not supported yet`)
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
