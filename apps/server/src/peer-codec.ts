import type { RaftConfState, RaftEntry, RaftMessage, RaftSnapshotMeta } from '@mq/protocol'
import type { ConfState, Entry, EntryType, Message, MessageType, SnapshotMeta } from '@mq/raft-core'

/**
 * Maps raft-core's Message to the wire's RaftMessage and back. A pure field-for-field
 * mapping: the core validates what arrives (malformedReason) and drops what is bad.
 */
export function messageToWire(groupId: number, m: Message): RaftMessage {
  return {
    groupId,
    type: m.type,
    from: m.from,
    to: m.to,
    term: m.term,
    logTerm: m.logTerm,
    index: m.index,
    entries: m.entries.map(entryToWire),
    commit: m.commit,
    reject: m.reject,
    rejectHint: m.rejectHint,
    context: m.context,
    requestCtx: m.requestCtx,
    snapshot: m.snapshot
      ? {
          meta: metaToWire(m.snapshot.meta),
          offset: m.snapshot.offset,
          totalBytes: m.snapshot.totalBytes,
          data: m.snapshot.data,
        }
      : undefined,
    leaderTimeMs: m.leaderTimeMs,
  }
}

/** The group id and the core's Message of a wire message. */
export function messageFromWire(w: RaftMessage): { groupId: number; message: Message } {
  const snapshot = w.snapshot
  return {
    groupId: w.groupId,
    message: {
      type: w.type as MessageType,
      from: w.from,
      to: w.to,
      term: w.term,
      logTerm: w.logTerm,
      index: w.index,
      entries: w.entries.map(entryFromWire),
      commit: w.commit,
      reject: w.reject,
      rejectHint: w.rejectHint,
      context: w.context,
      requestCtx: w.requestCtx,
      snapshot: snapshot
        ? {
            meta: metaFromWire(snapshot.meta),
            offset: snapshot.offset,
            totalBytes: snapshot.totalBytes,
            // Copied, as an entry's data: the image stager keeps the message while it fetches.
            data: new Uint8Array(snapshot.data),
          }
        : null,
      leaderTimeMs: w.leaderTimeMs,
    },
  }
}

function entryToWire(e: Entry): RaftEntry {
  return { index: e.index, term: e.term, type: e.type, timestampMs: e.timestampMs, data: e.data }
}

/**
 * The entry's data is copied: the decoder's is a view into the whole RaftBatch it came in, which
 * it would keep alive (megabytes for a few bytes) as long as the entry stays in its group's log.
 */
function entryFromWire(e: RaftEntry): Entry {
  return {
    index: e.index,
    term: e.term,
    type: e.type as EntryType,
    timestampMs: e.timestampMs,
    data: new Uint8Array(e.data),
  }
}

function metaToWire(m: SnapshotMeta): RaftSnapshotMeta {
  return { index: m.index, term: m.term, conf: confToWire(m.conf), timestampMs: m.timestampMs ?? 0 }
}

function metaFromWire(m: RaftSnapshotMeta | undefined): SnapshotMeta {
  return {
    index: m?.index ?? 0,
    term: m?.term ?? 0,
    conf: confFromWire(m?.conf),
    ...(m?.timestampMs ? { timestampMs: m.timestampMs } : {}),
  }
}

export function confToWire(c: ConfState): RaftConfState {
  return {
    voters: [...c.voters],
    learners: [...c.learners],
    votersOutgoing: [...c.votersOutgoing],
    learnersNext: [...c.learnersNext],
  }
}

export function confFromWire(c: RaftConfState | undefined): ConfState {
  return {
    voters: c?.voters ?? [],
    learners: c?.learners ?? [],
    votersOutgoing: c?.votersOutgoing ?? [],
    learnersNext: c?.learnersNext ?? [],
  }
}
