import { decodeMetaCommand, type MetaResult, MetaState } from '@mq/meta-service'
import { type Entry, EntryType, type Snapshot, type StateMachine } from '@mq/raft-core'

/**
 * The meta group's state machine on the Raft runtime: decodes each entry into a meta command
 * and applies it to the in-memory MetaState at the entry's leader timestamp. The snapshot is
 * the whole MetaState (it is small and bounded by META_LIMITS).
 */
export class MetaMachine implements StateMachine {
  readonly state = new MetaState()
  /** Called after entries were applied (to wake waiters on the metadata). */
  onApplied: () => void = () => {}

  apply(entries: readonly Entry[]): readonly unknown[] {
    const results = entries.map((e): MetaResult | null => {
      if (e.type !== EntryType.Normal || e.data.length === 0) return null
      const command = decodeMetaCommand(e.data)
      if (!command) return { ok: false, code: 'INVALID_ARGUMENT', message: 'malformed meta entry' }
      return this.state.apply(command, e.timestampMs)
    })
    this.onApplied()
    return results
  }

  snapshot(): Uint8Array {
    return this.state.snapshot()
  }

  restore(snapshot: Snapshot): void {
    this.state.restore(snapshot.data)
    this.onApplied()
  }
}
