import { describe, expect, it } from 'vitest'
import { MemoryLogStorage } from './memory-storage'
import { RaftLog, TERM_UNKNOWN } from './raft-log'
import { type Entry, EntryType } from './types'

const conf = { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [] }
const e = (index: number, term: number, bytes = 1): Entry => ({
  index,
  term,
  type: EntryType.Normal,
  timestampMs: 0,
  data: new Uint8Array(bytes),
})

function logWith(stored: Entry[], committed = 0): RaftLog {
  const s = new MemoryLogStorage(conf)
  if (stored.length > 0) s.append(stored)
  return new RaftLog(s, committed, 0)
}

describe('RaftLog', () => {
  it('reads terms and slices across the stored log and the unstable tail', () => {
    const log = logWith([e(1, 1), e(2, 1), e(3, 2)])
    log.truncateAndAppend([e(4, 2), e(5, 3)])
    expect([log.firstIndex(), log.lastIndex(), log.lastTerm()]).toEqual([1, 5, 3])
    expect(log.term(0)).toBe(0)
    expect(log.term(6)).toBe(TERM_UNKNOWN)
    expect(log.slice(2, 6, 100).map((x) => x.index)).toEqual([2, 3, 4, 5])
    expect(log.slice(2, 6, 2).map((x) => x.index)).toEqual([2, 3]) // byte bound, at least one
  })

  it('truncates a conflicting unstable or stored suffix, never a committed one (§5.3)', () => {
    const log = logWith([e(1, 1), e(2, 1), e(3, 1)], 1)
    expect(log.findConflict([e(2, 1), e(3, 2), e(4, 2)])).toBe(3)
    log.truncateAndAppend([e(3, 2), e(4, 2)])
    expect([log.term(3), log.lastIndex(), log.unstableOffset]).toEqual([2, 4, 3])
    expect(() => log.truncateAndAppend([e(1, 5)])).toThrow(/committed/)
  })

  it('finds the largest index at or below a hint whose term is at most a given term (fast backtracking)', () => {
    const log = logWith([e(1, 1), e(2, 1), e(3, 2), e(4, 2), e(5, 4), e(6, 4)])
    expect(log.findConflictByTerm(6, 3)).toBe(4)
    expect(log.findConflictByTerm(6, 1)).toBe(2)
    expect(log.findConflictByTerm(6, 4)).toBe(6)
    expect(log.findConflictByTerm(9, 0)).toBe(0)
  })

  it('applies a candidate’s log as up to date by last term, then length (§5.4.1)', () => {
    const log = logWith([e(1, 1), e(2, 2)])
    expect(log.isUpToDate(1, 3)).toBe(true)
    expect(log.isUpToDate(2, 2)).toBe(true)
    expect(log.isUpToDate(5, 1)).toBe(false)
    expect(log.isUpToDate(1, 2)).toBe(false)
  })

  it('stableTo drops persisted entries from the unstable tail only when index and term match', () => {
    const log = logWith([])
    log.truncateAndAppend([e(1, 1), e(2, 1)])
    log.stableTo(2, 9)
    expect(log.unstable.length).toBe(2)
    log.stableTo(1, 1)
    expect([log.unstableOffset, log.unstable.length]).toEqual([2, 1])
  })
})
