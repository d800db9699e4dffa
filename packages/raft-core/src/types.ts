/**
 * The data types shared by the Raft core, its storage port and the runtime. Plain,
 * serialisable objects; ids are strings (node ids such as "n1").
 */

/** A member of a Raft group, identified by its node id. */
export type ReplicaId = string

export const EntryType = {
  /** A command for the state machine; empty `data` is the leader's no-op of its term. */
  Normal: 0,
  /** A membership change (see ConfChange); applied by the core and the runtime. */
  ConfChange: 1,
} as const
export type EntryType = (typeof EntryType)[keyof typeof EntryType]

/** One log entry. Invariant: `index` ≥ 1, `term` ≥ 1. */
export interface Entry {
  readonly index: number
  readonly term: number
  readonly type: EntryType
  /**
   * The leader's clock when it appended the entry, in milliseconds. The only clock the
   * state machines see; never smaller than the previous entry's timestamp.
   */
  readonly timestampMs: number
  readonly data: Uint8Array
}

/** The state Raft must persist before it sends a message that depends on it (Raft Fig. 2). */
export interface HardState {
  readonly term: number
  /** The candidate voted for in `term`, or '' for none. */
  readonly vote: ReplicaId
  readonly commit: number
}

/** A group's membership. With `votersOutgoing` non-empty the group is in joint consensus. */
export interface ConfState {
  readonly voters: readonly ReplicaId[]
  readonly learners: readonly ReplicaId[]
  /** The old voter set while in a joint configuration; empty otherwise (Raft §6). */
  readonly votersOutgoing: readonly ReplicaId[]
  /** Voters of the old config that become learners when the joint config is left. */
  readonly learnersNext: readonly ReplicaId[]
}

/** What a snapshot covers: everything up to and including `index` (of `term`). */
export interface SnapshotMeta {
  readonly index: number
  readonly term: number
  readonly conf: ConfState
  /**
   * The timestamp of the entry at `index`, so that a leader whose log was compacted to this
   * snapshot still stamps new entries no lower (optional: absent means 0).
   */
  readonly timestampMs?: number
}

export interface Snapshot {
  readonly meta: SnapshotMeta
  /** The state machine's image at `meta.index`; opaque to Raft. */
  readonly data: Uint8Array
}

export const EMPTY_HARD_STATE: HardState = { term: 0, vote: '', commit: 0 }
