import { describe, expect, it } from 'vitest'
import { ConfChangeType, EntryType, MessageType, message, type Ready } from './index'
import { MemoryLogStorage } from './memory-storage'
import { Prng } from './prng'
import { RawNode } from './raw-node'

const conf = { voters: ['a', 'b', 'c'], learners: [], votersOutgoing: [], learnersNext: [] }

function persist(s: MemoryLogStorage, rd: Ready): void {
  if (rd.snapshot !== null) s.applySnapshot(rd.snapshot)
  s.append(rd.entries)
  if (rd.hardState !== null) s.setHardState(rd.hardState)
  s.sync()
}

/** A single-voter group's replica that has just campaigned. */
function campaigningSolo(): { s: MemoryLogStorage; raw: RawNode } {
  const s = new MemoryLogStorage({ voters: ['solo'], learners: [], votersOutgoing: [], learnersNext: [] })
  const raw = new RawNode({ id: 'solo', prng: new Prng(1) }, s)
  raw.campaign()
  return { s, raw }
}

/** A single-voter group's replica that leads, with every Ready so far persisted and advanced. */
function leadingSolo(): { s: MemoryLogStorage; raw: RawNode } {
  const { s, raw } = campaigningSolo()
  do {
    const rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
  } while (raw.hasReady())
  return { s, raw }
}

describe('RawNode', () => {
  it('bootstraps: the founding membership is written to the log as committed conf entries', () => {
    const s = new MemoryLogStorage(conf)
    const raw = new RawNode({ id: 'a', prng: new Prng(1) }, s)
    const rd = raw.ready()
    expect(rd.entries.map((e) => [e.index, e.term, e.type])).toEqual([
      [1, 1, EntryType.ConfChange],
      [2, 1, EntryType.ConfChange],
      [3, 1, EntryType.ConfChange],
    ])
    expect(rd.hardState).toEqual({ term: 1, vote: '', commit: 3 })
    expect(rd.committedEntries.length).toBe(3)
  })

  it('pipelines Readies: each carries only new work, advanced oldest first', () => {
    const { s, raw } = leadingSolo()
    const x = raw.propose(new Uint8Array([1]))
    const rd1 = raw.ready()
    expect(rd1.entries.map((e) => e.index)).toEqual([x])
    s.append(rd1.entries)
    expect(raw.hasReady()).toBe(false) // x is in progress, nothing new
    const y = raw.propose(new Uint8Array([2]))
    const rd2 = raw.ready()
    expect(rd2.entries.map((e) => e.index)).toEqual([y]) // not x again
    expect(rd2.committedEntries).toEqual([]) // a lone voter commits only what it persisted
    s.append(rd2.entries)
    expect(() => raw.advance(rd2)).toThrow(/oldest outstanding/)
    expect(raw.outstandingReadies).toBe(2)
    s.sync()
    raw.advance(rd1)
    const rd3 = raw.ready()
    expect(rd3.committedEntries.map((e) => e.index)).toEqual([x]) // y is not durable yet as far as raft knows
    raw.advance(rd2)
    raw.advance(rd3)
    const rd4 = raw.ready()
    expect(rd4.committedEntries.map((e) => e.index)).toEqual([y])
    raw.advance(rd4)
    expect(() => raw.advance(rd4)).toThrow(/outstanding/)
  })

  it('a lone voter restarted with its stored commit behind answers reads only once its new term commits', () => {
    const { s, raw } = campaigningSolo()
    const drain = (node: RawNode) => {
      const states: { index: number; requestCtx: string }[] = []
      while (node.hasReady()) {
        const rd = node.ready()
        persist(s, rd)
        states.push(...rd.readStates)
        node.advance(rd)
      }
      return states
    }
    drain(raw)
    const x = raw.propose(new Uint8Array([1]))
    drain(raw)
    const before = s.initialState().hardState
    expect(before.commit).toBe(x) // x committed, applied and answered
    // A crash before the hard state carrying that commit was flushed (the host does not wait
    // for a flush that only moves the commit index): the node comes back with commit x - 1.
    s.setHardState({ ...before, commit: x - 1 })
    const again = new RawNode({ id: 'solo', prng: new Prng(2) }, s)
    again.campaign()
    again.readIndex('r1')
    const states = drain(again)
    // Not x - 1 (which would miss the write already answered): the read waited for the new
    // term's entry to commit, and with it x.
    expect(states.map((r) => r.requestCtx)).toEqual(['r1'])
    expect(states[0]?.index).toBeGreaterThan(x)
  })

  it('hands out again entries that overwrite ones still in progress (a new leader truncated them)', () => {
    const s = new MemoryLogStorage(conf)
    const raw = new RawNode({ id: 'a', prng: new Prng(1) }, s)
    const rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
    const entry = (index: number, term: number) => ({
      index,
      term,
      type: EntryType.Normal,
      data: new Uint8Array([index, term]),
      timestampMs: 0,
    })
    // Leader b of term 2 sends 4 and 5; they are handed out and their write is in flight.
    raw.step(
      message({
        type: MessageType.App,
        from: 'b',
        to: 'a',
        term: 2,
        index: 3,
        logTerm: 1,
        commit: 3,
        entries: [entry(4, 2), entry(5, 2)],
      }),
    )
    const rd1 = raw.ready()
    expect(rd1.entries.map((e) => [e.index, e.term])).toEqual([
      [4, 2],
      [5, 2],
    ])
    // Leader c of term 3 replaces index 4 onwards before that write lands.
    raw.step(
      message({
        type: MessageType.App,
        from: 'c',
        to: 'a',
        term: 3,
        index: 3,
        logTerm: 1,
        commit: 3,
        entries: [entry(4, 3)],
      }),
    )
    const rd2 = raw.ready()
    expect(rd2.entries.map((e) => [e.index, e.term])).toEqual([[4, 3]])
    persist(s, rd1)
    persist(s, rd2)
    raw.advance(rd1) // its entries were overwritten: nothing becomes stable through it
    expect(raw.status().lastIndex).toBe(4)
    raw.advance(rd2)
    expect(raw.termAt(4)).toBe(3)
    expect(raw.termAt(5)).toBe(-1)
    expect(raw.hasReady()).toBe(false)
  })

  it('restarts from storage with its term, vote, log and membership', () => {
    const s = new MemoryLogStorage(conf)
    const raw = new RawNode({ id: 'a', prng: new Prng(1), preVote: false }, s)
    let rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
    raw.campaign()
    rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
    const again = new RawNode({ id: 'a', prng: new Prng(2) }, s)
    expect(again.status()).toMatchObject({ term: 2, vote: 'a', commit: 3, lastIndex: 3, role: 'follower' })
    expect(again.status().conf.voters).toEqual(['a', 'b', 'c'])
  })

  it('names the index its configuration comes from: committed only once commit reaches it (§4.1)', () => {
    const { s, raw } = campaigningSolo()
    const drain = () => {
      while (raw.hasReady()) {
        const rd = raw.ready()
        persist(s, rd)
        raw.advance(rd)
      }
    }
    drain()
    expect(raw.status().confIndex).toBe(1) // the bootstrap entry
    const index = raw.proposeConfChange({ type: ConfChangeType.AddLearner, id: 'x' })
    // In force once appended, not committed yet (a later leader could still drop it).
    expect(raw.status()).toMatchObject({ confIndex: index, conf: { voters: ['solo'], learners: ['x'] } })
    expect(raw.status().commit).toBeLessThan(index)
    drain()
    expect(raw.status().commit).toBeGreaterThanOrEqual(raw.status().confIndex)
    // A restart reads it back from the log.
    expect(new RawNode({ id: 'solo', prng: new Prng(3) }, s).status().confIndex).toBe(index)
  })

  it('a single-voter group elects itself and commits alone, after persisting', () => {
    const { s, raw } = campaigningSolo()
    let rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
    const index = raw.propose(new Uint8Array([1]))
    rd = raw.ready()
    expect(rd.committedEntries.some((e) => e.index === index)).toBe(false) // not before it is durable
    persist(s, rd)
    raw.advance(rd)
    rd = raw.ready()
    expect(rd.committedEntries.map((e) => e.index)).toContain(index)
  })
})

describe('RawNode applying paused', () => {
  it('hands out no committed entries while paused, persists and commits meanwhile, and resumes in order', () => {
    const { s, raw } = leadingSolo()
    raw.pauseApplying(true)
    const x = raw.propose(new Uint8Array([1]))
    let rd = raw.ready()
    expect(rd.entries.map((e) => e.index)).toEqual([x]) // persisting goes on
    persist(s, rd)
    raw.advance(rd)
    rd = raw.ready()
    expect(rd.hardState?.commit).toBe(x) // and committing
    expect(rd.committedEntries).toEqual([])
    persist(s, rd)
    raw.advance(rd)
    const y = raw.propose(new Uint8Array([2]))
    rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
    while (raw.hasReady()) {
      rd = raw.ready()
      expect(rd.committedEntries).toEqual([])
      persist(s, rd)
      raw.advance(rd)
    }
    expect(raw.hasReady()).toBe(false) // nothing to hand out: no busy loop while paused
    raw.pauseApplying(false)
    expect(raw.hasReady()).toBe(true)
    rd = raw.ready()
    expect(rd.committedEntries.map((e) => e.index)).toEqual([x, y])
    raw.advance(rd)
  })
})

describe('RawNode outbox bound', () => {
  it('drops and counts outgoing messages past outboxMessagesMax, and recovers once drained', () => {
    const s = new MemoryLogStorage(conf)
    const raw = new RawNode({ id: 'a', prng: new Prng(1), preVote: false, outboxMessagesMax: 3 }, s)
    let rd = raw.ready()
    persist(s, rd)
    raw.advance(rd)
    for (let i = 0; i < 5; i++) raw.campaign() // 2 vote requests per campaign
    expect(raw.stats.droppedOutbound).toBeGreaterThan(0)
    rd = raw.ready()
    expect(rd.messages.length).toBe(3)
    persist(s, rd)
    raw.advance(rd)
    raw.campaign()
    expect(raw.ready().messages.length).toBe(2)
  })
})
