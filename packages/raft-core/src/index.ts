export { Prng } from './prng'
export type { LogStorage } from './storage'
export type { ConfState, Entry, HardState, ReplicaId, Snapshot, SnapshotMeta } from './types'
export { EMPTY_HARD_STATE, EntryType } from './types'
