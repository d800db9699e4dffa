export type { ConfChange } from './conf-change'
export { ConfChangeType, decodeConfChange, encodeConfChange } from './conf-change'
export type { RaftConfig } from './config'
export { DEFAULT_RAFT_CONFIG } from './config'
export {
  CompactedError,
  HostStoppedError,
  InvalidArgumentError,
  InvalidConfigError,
  NotLeaderError,
  OverloadedError,
  ProposalDroppedError,
  RaftError,
  RaftErrorCode,
  SnapshotTooLargeError,
  UnavailableError,
} from './errors'
export { MemoryDurability, MemoryLogStorage } from './memory-storage'
export type { Message, SnapshotChunk } from './message'
export { MessageType, malformedReason, message } from './message'
export { Prng } from './prng'
export type { RaftStatus, RawNodeOptions } from './raw-node'
export { RawNode } from './raw-node'
export type { RaftStats, ReadState, SoftState } from './read-state'
export { Role } from './read-state'
export type { Ready } from './ready'
export type { Clock, GroupId, StateMachine, Transport } from './runtime/ports'
export type { Applied, GroupLimits, GroupOptions, HostOptions } from './runtime/raft-host'
export {
  DEFAULT_GROUP_LIMITS,
  HOST_INFLIGHT_BYTES_MAX,
  HOST_LOG_BYTES_MAX,
  RaftHost,
} from './runtime/raft-host'
export type { Durability, LogStorage, WritableLogStorage } from './storage'
export type { ConfState, Entry, HardState, ReplicaId, Snapshot, SnapshotMeta } from './types'
export { EMPTY_HARD_STATE, EntryType } from './types'
