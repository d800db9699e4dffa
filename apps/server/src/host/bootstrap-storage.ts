import type { ConfState, Entry, HardState, Snapshot, WritableLogStorage } from '@mq/raft-core'

/**
 * A group's log storage that reports `conf` as its membership while the log is still empty
 * (a new replica of a group with known founding voters), so that the Raft core bootstraps
 * the group with it. Every other call goes straight to `log`.
 */
export class BootstrapStorage implements WritableLogStorage {
  readonly #log: WritableLogStorage
  readonly #conf: ConfState

  constructor(log: WritableLogStorage, conf: ConfState) {
    this.#log = log
    this.#conf = conf
  }

  initialState(): { hardState: HardState; conf: ConfState } {
    const state = this.#log.initialState()
    const fresh = this.#log.lastIndex() === 0 && state.hardState.term === 0 && state.conf.voters.length === 0
    return fresh ? { hardState: state.hardState, conf: this.#conf } : state
  }
  entries(lo: number, hi: number, bytesMax: number): Entry[] {
    return this.#log.entries(lo, hi, bytesMax)
  }
  term(index: number): number {
    return this.#log.term(index)
  }
  firstIndex(): number {
    return this.#log.firstIndex()
  }
  lastIndex(): number {
    return this.#log.lastIndex()
  }
  snapshot(): Snapshot {
    return this.#log.snapshot()
  }
  append(entries: readonly Entry[]): void {
    this.#log.append(entries)
  }
  setHardState(hardState: HardState): void {
    this.#log.setHardState(hardState)
  }
  applySnapshot(snapshot: Snapshot): void {
    this.#log.applySnapshot(snapshot)
  }
  compact(snapshot: Snapshot, compactIndex: number): void {
    this.#log.compact(snapshot, compactIndex)
  }
}

/** A founding membership: every replica a voter. */
export function votersConf(voters: readonly string[]): ConfState {
  return { voters: [...voters], learners: [], votersOutgoing: [], learnersNext: [] }
}
