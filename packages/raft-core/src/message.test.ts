import { describe, expect, it } from 'vitest'
import { MessageType, malformedReason, message } from './message'
import { EntryType } from './types'

const ok = message({ type: MessageType.App, from: 'a', to: 'b', term: 3, index: 4, logTerm: 2 })
const entry = (index: number, term: number) => ({
  index,
  term,
  type: EntryType.Normal,
  timestampMs: 0,
  data: new Uint8Array(),
})

describe('malformedReason', () => {
  it('accepts a well-formed message', () => {
    expect(malformedReason({ ...ok, entries: [entry(5, 3), entry(6, 3)] }, 'b')).toBe('')
  })

  it('names what is wrong with a malformed one', () => {
    expect(malformedReason(ok, 'c')).toMatch(/another replica/)
    expect(malformedReason({ ...ok, from: 'b' }, 'b')).toMatch(/sender/)
    expect(malformedReason({ ...ok, term: -1 }, 'b')).toMatch(/number/)
    expect(malformedReason({ ...ok, index: 1.5 }, 'b')).toMatch(/number/)
    expect(malformedReason({ ...ok, leaderTimeMs: -5 }, 'b')).toMatch(/number/)
    expect(malformedReason({ ...ok, type: 77 as MessageType }, 'b')).toMatch(/type/)
    expect(malformedReason({ ...ok, entries: [entry(6, 3)] }, 'b')).toMatch(/consecutive/)
    expect(malformedReason({ ...ok, entries: [entry(5, 4)] }, 'b')).toMatch(/bad entry/)
    expect(malformedReason({ ...ok, entries: [entry(5, 1)] }, 'b')).toMatch(/below/)
    expect(malformedReason({ ...ok, type: MessageType.Snap }, 'b')).toMatch(/snapshot/)
  })
})
