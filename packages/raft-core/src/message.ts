import { confStateProblem } from './conf-change'
import type { ConfState, Entry, ReplicaId, SnapshotMeta } from './types'

/**
 * The messages Raft replicas exchange (Raft Fig. 2 plus pre-vote, heartbeats, chunked
 * InstallSnapshot, TimeoutNow and forwarded ReadIndex). Every message has every field, so
 * that objects share one shape; unused fields are 0, '', false, [] or null.
 */
export const MessageType = {
  /** AppendEntries (§5.3): `index`/`logTerm` name the entry before `entries`. */
  App: 0,
  /** Reply to App: `index` is the last index now matched, or the rejected prev index. */
  AppResp: 1,
  /** RequestVote (§5.2): `index`/`logTerm` are the candidate's last entry. */
  Vote: 2,
  VoteResp: 3,
  /** Pre-vote (dissertation §9.6): would you vote for me in `term`? Changes no state. */
  PreVote: 4,
  PreVoteResp: 5,
  /** Heartbeat: carries `commit` (capped at the follower's match) and a read `context`. */
  Heartbeat: 6,
  HeartbeatResp: 7,
  /** One chunk of InstallSnapshot (§7): `snapshot` carries meta, offset and bytes. */
  Snap: 8,
  /** Chunk acknowledgement: `context` is the number of snapshot bytes the follower holds. */
  SnapResp: 9,
  /** Leadership transfer (dissertation §3.10): campaign now, even inside a lease. */
  TimeoutNow: 10,
  /** A follower forwards a client's ReadIndex (§8) to the leader; `requestCtx` names it. */
  ReadIndex: 11,
  /** The leader's answer: `index` is the read index for `requestCtx`. */
  ReadIndexResp: 12,
} as const
export type MessageType = (typeof MessageType)[keyof typeof MessageType]

/** One InstallSnapshot chunk: bytes [offset, offset + data.length) of a snapshot image. */
export interface SnapshotChunk {
  readonly meta: SnapshotMeta
  readonly offset: number
  readonly totalBytes: number
  readonly data: Uint8Array
}

export interface Message {
  readonly type: MessageType
  readonly from: ReplicaId
  readonly to: ReplicaId
  readonly term: number
  readonly logTerm: number
  readonly index: number
  readonly entries: readonly Entry[]
  readonly commit: number
  readonly reject: boolean
  /** On a rejected AppResp: the follower's hint for the leader's next probe (§5.3 fast backtracking). */
  readonly rejectHint: number
  /**
   * Heartbeat read sequence, SnapResp byte offset, 1 on a Vote forced by TimeoutNow, or a join
   * nonce: on a rejected AppResp from a replica that holds nothing, and on the Snap chunks
   * sent to it (RaftConfig.joinBySnapshot).
   */
  readonly context: number
  readonly requestCtx: string
  readonly snapshot: SnapshotChunk | null
  /**
   * On a leader's App, Heartbeat and Snap: its group clock when it made the message (what it
   * would stamp an entry with then), so that a follower that leads next continues that clock
   * instead of starting from its own (Raft.timelineMs). On a granted VoteResp or PreVoteResp:
   * the group clock as the voter knows it (its leader's, counted forward), for a candidate that
   * knows none (it restarted). 0: not told (a peer of an earlier version, or a host without a
   * steady clock, or a voter that knows none).
   */
  readonly leaderTimeMs: number
}

const EMPTY_ENTRIES: readonly Entry[] = Object.freeze([])

/** Builds a message with every unspecified field at its zero value. */
export function message(fields: Partial<Message> & Pick<Message, 'type' | 'from' | 'to' | 'term'>): Message {
  return {
    type: fields.type,
    from: fields.from,
    to: fields.to,
    term: fields.term,
    logTerm: fields.logTerm ?? 0,
    index: fields.index ?? 0,
    entries: fields.entries ?? EMPTY_ENTRIES,
    commit: fields.commit ?? 0,
    reject: fields.reject ?? false,
    rejectHint: fields.rejectHint ?? 0,
    context: fields.context ?? 0,
    requestCtx: fields.requestCtx ?? '',
    snapshot: fields.snapshot ?? null,
    leaderTimeMs: fields.leaderTimeMs ?? 0,
  }
}

function isCount(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0
}

/**
 * Whether `c` is a configuration this core can hold: four lists of replica ids, and none of
 * confStateProblem's problems (installed, a snapshot with one was stored, and the replica
 * failed to start again; an audit).
 */
function isConf(c: unknown): boolean {
  if (c === null || typeof c !== 'object') return false
  const { voters, learners, votersOutgoing, learnersNext } = c as Record<string, unknown>
  return (
    [voters, learners, votersOutgoing, learnersNext].every(Array.isArray) &&
    confStateProblem(c as ConfState) === ''
  )
}

/**
 * Returns '' when `m` is well formed for a replica `self`, or why it is not. A malformed
 * message is dropped and counted by the core, never applied.
 */
export function malformedReason(m: Message, self: ReplicaId): string {
  if (typeof m !== 'object' || m === null) return 'not an object'
  if (!isCount(m.type) || m.type > MessageType.ReadIndexResp) return 'unknown type'
  if (typeof m.from !== 'string' || m.from === '' || m.from === self) return 'bad sender'
  if (m.to !== self) return 'addressed to another replica'
  if (!isCount(m.term) || !isCount(m.logTerm) || !isCount(m.index) || !isCount(m.commit)) return 'bad number'
  if (!isCount(m.rejectHint) || !isCount(m.context) || !isCount(m.leaderTimeMs)) return 'bad number'
  if (!Array.isArray(m.entries)) return 'bad entries'
  if (m.entries.length > 0) {
    if (m.type !== MessageType.App) return 'entries on a non-App message'
    let expected = m.index + 1
    for (const e of m.entries) {
      if (e === null || typeof e !== 'object' || e.index !== expected || !isCount(e.term) || e.term < 1) {
        return 'entries not consecutive after index'
      }
      if (e.term > m.term || !(e.data instanceof Uint8Array) || (e.type !== 0 && e.type !== 1)) {
        return 'bad entry'
      }
      // A whole number (what a log record holds: a fraction came back changed after a restart,
      // past 2^53 the group did not open again; kv-storage audit).
      if (!isCount(e.timestampMs)) return 'bad entry timestamp'
      expected++
    }
    if (m.entries[0]!.term < m.logTerm) return 'entry term below previous term'
  }
  if (m.type === MessageType.Snap) {
    const s = m.snapshot
    if (s === null || typeof s !== 'object' || !(s.data instanceof Uint8Array))
      return 'missing snapshot chunk'
    if (!isCount(s.offset) || !isCount(s.totalBytes) || s.offset + s.data.length > s.totalBytes) {
      return 'bad snapshot chunk'
    }
    const meta = s.meta
    if (meta === null || typeof meta !== 'object') return 'bad snapshot meta'
    if (!isCount(meta.index) || meta.index < 1 || !isCount(meta.term) || meta.term > m.term) {
      return 'bad snapshot meta'
    }
    if (!isConf(meta.conf)) return 'bad snapshot configuration'
    // The floor of the stamps a replica that installs it makes (an audit: Infinity or NaN
    // there stopped every later entry of its lead from being accepted).
    if (meta.timestampMs !== undefined && !isCount(meta.timestampMs)) return 'bad snapshot timestamp'
  }
  return ''
}
