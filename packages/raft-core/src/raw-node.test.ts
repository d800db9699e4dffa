import { describe, expect, it } from 'vitest'
import { EntryType, type Ready } from './index'
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

  it('hands out one Ready at a time: no second Ready until advance()', () => {
    const raw = new RawNode({ id: 'a', prng: new Prng(1) }, new MemoryLogStorage(conf))
    const rd = raw.ready()
    expect(raw.hasReady()).toBe(false)
    expect(() => raw.ready()).toThrow(/advance/)
    raw.advance(rd)
    expect(() => raw.advance(rd)).toThrow(/outstanding/)
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

  it('a single-voter group elects itself and commits alone, after persisting', () => {
    const s = new MemoryLogStorage({ voters: ['solo'], learners: [], votersOutgoing: [], learnersNext: [] })
    const raw = new RawNode({ id: 'solo', prng: new Prng(1) }, s)
    raw.campaign()
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
