import { describe, expect, it } from 'vitest'
import { CompactedError, UnavailableError } from './errors'
import { MemoryLogStorage } from './memory-storage'
import { type Entry, EntryType } from './types'

const conf = { voters: ['a'], learners: [], votersOutgoing: [], learnersNext: [] }
const e = (index: number, term: number): Entry => ({
  index,
  term,
  type: EntryType.Normal,
  timestampMs: 0,
  data: new Uint8Array([index]),
})

describe('MemoryLogStorage', () => {
  it('appends, truncates a conflicting suffix, and answers terms and ranges', () => {
    const s = new MemoryLogStorage(conf)
    s.append([e(1, 1), e(2, 1), e(3, 1)])
    s.append([e(2, 2)])
    expect(s.lastIndex()).toBe(2)
    expect(s.term(2)).toBe(2)
    expect(s.entries(1, 3, 1000).map((x) => x.index)).toEqual([1, 2])
    expect(s.entries(1, 3, 0).length).toBe(1) // at least one entry, whatever the byte bound
    expect(() => s.term(3)).toThrow(UnavailableError)
    expect(() => s.append([e(5, 2)])).toThrow(RangeError)
  })

  it('compacts behind a snapshot and keeps the floor term answerable', () => {
    const s = new MemoryLogStorage(conf)
    s.append([e(1, 1), e(2, 1), e(3, 2), e(4, 2)])
    const snap = { meta: { index: 4, term: 2, conf }, data: new Uint8Array([9]) }
    s.compact(snap, 3)
    expect(s.firstIndex()).toBe(4)
    expect(s.term(3)).toBe(2)
    expect(s.snapshot()).toBe(snap)
    expect(() => s.entries(2, 4, 100)).toThrow(CompactedError)
    expect(() => s.term(1)).toThrow(CompactedError)
  })

  it('installs a snapshot, keeping the entries after it only when it holds the snapshot’s entry', () => {
    const s = new MemoryLogStorage(conf)
    s.append([e(1, 1), e(2, 1), e(3, 1)])
    s.applySnapshot({ meta: { index: 2, term: 1, conf }, data: new Uint8Array() })
    expect([s.firstIndex(), s.lastIndex()]).toEqual([3, 3])
    s.applySnapshot({ meta: { index: 7, term: 3, conf }, data: new Uint8Array() })
    expect([s.firstIndex(), s.lastIndex(), s.term(7)]).toEqual([8, 7, 3])
  })

  it('crash() loses exactly the writes since the last sync()', () => {
    const s = new MemoryLogStorage(conf)
    s.append([e(1, 1), e(2, 1)])
    s.setHardState({ term: 1, vote: 'a', commit: 1 })
    s.sync()
    s.append([e(3, 1)])
    s.setHardState({ term: 2, vote: '', commit: 2 })
    expect(s.unsyncedWrites()).toBe(2)
    s.crash()
    expect(s.lastIndex()).toBe(2)
    expect(s.initialState().hardState).toEqual({ term: 1, vote: 'a', commit: 1 })
  })
})
