import { RaftBatch } from '@mq/protocol'
import { EntryType, type Message, MessageType, message } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
import { messageFromWire, messageToWire } from './peer-codec'

const conf = { voters: ['n1', 'n2', 'n3'], learners: ['n4'], votersOutgoing: [], learnersNext: [] }

// Every field survives core → wire bytes → core, for the message shapes Raft sends.
describe('peer codec', () => {
  const cases: Message[] = [
    message({
      type: MessageType.App,
      from: 'n1',
      to: 'n2',
      term: 7,
      logTerm: 6,
      index: 41,
      commit: 40,
      leaderTimeMs: 1_700_000_000_125,
      entries: [
        {
          index: 42,
          term: 7,
          type: EntryType.Normal,
          timestampMs: 1_700_000_000_123,
          data: Uint8Array.of(1, 2, 3),
        },
        {
          index: 43,
          term: 7,
          type: EntryType.ConfChange,
          timestampMs: 1_700_000_000_124,
          data: Uint8Array.of(9),
        },
      ],
    }),
    message({
      type: MessageType.AppResp,
      from: 'n2',
      to: 'n1',
      term: 7,
      index: 12,
      reject: true,
      rejectHint: 9,
    }),
    message({ type: MessageType.Heartbeat, from: 'n1', to: 'n3', term: 2 ** 40, commit: 5, context: 17 }),
    message({ type: MessageType.Heartbeat, from: 'n1', to: 'n3', term: 4, leaderTimeMs: 1_700_000_000_999 }),
    message({ type: MessageType.ReadIndex, from: 'n3', to: 'n1', term: 3, requestCtx: 'read-77' }),
    message({
      type: MessageType.Snap,
      from: 'n1',
      to: 'n4',
      term: 9,
      snapshot: {
        meta: { index: 100, term: 8, conf },
        offset: 4096,
        totalBytes: 9000,
        data: new Uint8Array(100).fill(7),
      },
    }),
    // With the stamp of its last entry (a replica that installs it and leads stamps no earlier).
    message({
      type: MessageType.Snap,
      from: 'n1',
      to: 'n4',
      term: 9,
      snapshot: {
        meta: { index: 100, term: 8, conf, timestampMs: 1_700_000_000_999 },
        offset: 0,
        totalBytes: 10,
        data: new Uint8Array(10),
      },
    }),
  ]

  it.each(cases.map((m, i) => [m.type, i, m] as const))(
    'round-trips message type %i (case %i)',
    (_, _i, m) => {
      const bytes = RaftBatch.encode({ fromNode: 'n1', messages: [messageToWire(3, m)] }).finish()
      const decoded = RaftBatch.decode(bytes)
      expect(decoded.messages).toHaveLength(1)
      const back = messageFromWire(decoded.messages[0]!)
      expect(back.groupId).toBe(3)
      expect(back.message).toEqual(m)
    },
  )
})
