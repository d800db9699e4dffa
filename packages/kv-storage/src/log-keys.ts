import { appendUint, encodeTuple, prefixRange, type Tuple } from './key-codec'

/**
 * The key layout of the database a node's groups share (one fact, one place). Every key is
 * an encoded tuple; everything of group g lies under the prefix (KeySpace.Group, g), so
 * removing a group is one range clear of `groupRange(g)`.
 *
 *   (1, g, 1)              hard state
 *   (1, g, 2)              snapshot metadata (+ how its data is chunked)
 *   (1, g, 3, chunk)       snapshot data, chunk 0, 1, …
 *   (1, g, 4, index)       log entry
 *   (1, g, 5)              log start: the last discarded entry's index and term
 *   (1, g, 6)              clock offset: the group clock minus this node's wall clock, as last recorded
 *   (1, g, 16, …)          the group's state machine's own keys (`stateMachineKey`)
 *   (1, g, 17, …)          a snapshot image being received for the group (`stagedImageKey`)
 *   (2, 'batch-seq')       the sequence number of the last stamped group-commit batch (durability-mark.ts)
 *   (2, 'removing', g)     group g's removal in pages is under way (LogStore.removeGroupInPages)
 *   (2, name)              other per-node facts of the process that owns the database (`nodeKey`)
 */

export const KeySpace = {
  /** Per-group data: the Raft log and the group's state machine. */
  Group: 1,
  /** Per-node data that belongs to no group (node identity, …). */
  Node: 2,
} as const

export const GroupKeyKind = {
  HardState: 1,
  SnapshotMeta: 2,
  SnapshotChunk: 3,
  Entry: 4,
  LogStart: 5,
  ClockOffset: 6,
  StateMachine: 16,
  StagedImage: 17,
} as const

/** Where the group commit stamps each synced batch's sequence number (see DurabilityMark). */
export function batchSeqKey(): Uint8Array {
  return nodeKey('batch-seq')
}

/**
 * The marker of a group whose removal in pages is under way (LogStore.removeGroupInPages):
 * (2, 'removing', g), outside the group's range, deleted with the group's last clear.
 */
export function groupRemovingKey(groupId: number): Uint8Array {
  return encodeTuple([KeySpace.Node, 'removing', groupId])
}

/** Every removal marker (groupRemovingKey). */
export function groupRemovingRange(): { gte: Uint8Array; lt: Uint8Array } {
  return prefixRange([KeySpace.Node, 'removing'])
}

/** A per-node fact's key (outside every group: removing a group leaves it). */
export function nodeKey(name: string): Uint8Array {
  return encodeTuple([KeySpace.Node, name])
}

export function hardStateKey(groupId: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.HardState])
}

export function snapshotMetaKey(groupId: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.SnapshotMeta])
}

export function snapshotChunkKey(groupId: number, chunk: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.SnapshotChunk, chunk])
}

export function snapshotChunkRange(groupId: number): { gte: Uint8Array; lt: Uint8Array } {
  return prefixRange([KeySpace.Group, groupId, GroupKeyKind.SnapshotChunk])
}

export function entryKey(groupId: number, index: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.Entry, index])
}

/** The common prefix of a group's entry keys: `entryKeyAt(prefix, i)` = `entryKey(g, i)`. */
export function entryKeyPrefix(groupId: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.Entry])
}

export function entryKeyAt(prefix: Uint8Array, index: number): Uint8Array {
  return appendUint(prefix, index)
}

/** The keys of entries [lo, hi) of a group. */
export function entryRange(groupId: number, lo: number, hi: number): { gte: Uint8Array; lt: Uint8Array } {
  return { gte: entryKey(groupId, lo), lt: entryKey(groupId, hi) }
}

/** Every entry key of a group. */
export function entriesRange(groupId: number): { gte: Uint8Array; lt: Uint8Array } {
  return prefixRange([KeySpace.Group, groupId, GroupKeyKind.Entry])
}

export function logStartKey(groupId: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.LogStart])
}

/** Where a group's clock offset is recorded (raft-core WritableLogStorage.setClockOffset). */
export function clockOffsetKey(groupId: number): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.ClockOffset])
}

/** Every key of a group: its log, hard state, snapshot and state machine keys. */
export function groupRange(groupId: number): { gte: Uint8Array; lt: Uint8Array } {
  return prefixRange([KeySpace.Group, groupId])
}

/** A key of group `groupId`'s state machine: (1, g, 16, ...rest). Removed with the group. */
export function stateMachineKey(groupId: number, rest: Tuple): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.StateMachine, ...rest])
}

/** The range of every key of group `groupId`'s state machine that starts with `rest`. */
export function stateMachineRange(groupId: number, rest: Tuple = []): { gte: Uint8Array; lt: Uint8Array } {
  return prefixRange([KeySpace.Group, groupId, GroupKeyKind.StateMachine, ...rest])
}

/**
 * A key of the snapshot image being received for group `groupId`: (1, g, 17, ...rest). Outside
 * the state machine's range (an install replaces that range from here); removed with the group.
 */
export function stagedImageKey(groupId: number, rest: Tuple): Uint8Array {
  return encodeTuple([KeySpace.Group, groupId, GroupKeyKind.StagedImage, ...rest])
}

/** The range of every staged-image key of group `groupId` that starts with `rest`. */
export function stagedImageRange(groupId: number, rest: Tuple = []): { gte: Uint8Array; lt: Uint8Array } {
  return prefixRange([KeySpace.Group, groupId, GroupKeyKind.StagedImage, ...rest])
}
