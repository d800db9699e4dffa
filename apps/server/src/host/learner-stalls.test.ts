import { describe, expect, it } from 'vitest'
import { LearnerStalls } from './learner-stalls'

describe('LearnerStalls (the meta leader’s watch on replicas being added)', () => {
  const at = (addMatch: number, addImagePages = 0) => ({ addMatch, addImagePages })

  it('finds a learner stalled once its mark has not moved for the timeout, once, and keeps it out for as long again', () => {
    const s = new LearnerStalls(10_000)
    expect(s.note(1, 'n4', at(0, 1), 0)).toBe(false)
    expect(s.note(1, 'n4', at(0, 2), 5_000)).toBe(false) // an image page: progress
    expect(s.note(1, 'n4', at(0, 2), 14_999)).toBe(false)
    expect(s.stalled(14_999)).toEqual(new Map())
    expect(s.note(1, 'n4', at(0, 2), 15_000)).toBe(true)
    expect(s.stalled(15_000)).toEqual(new Map([[1, 'n4']]))
    // Found once: the watch of the change starts again (it may wait on for want of a target).
    expect(s.note(1, 'n4', at(0, 2), 16_000)).toBe(false)
    expect(s.stalled(24_999)).toEqual(new Map([[1, 'n4']]))
    expect(s.stalled(25_000)).toEqual(new Map())
  })

  it('restarts the watch when the learner moves, another node is added, or the answer says nothing', () => {
    const s = new LearnerStalls(10_000)
    s.note(1, 'n4', at(3), 0)
    expect(s.note(1, 'n4', at(4), 9_000)).toBe(false)
    expect(s.note(1, 'n4', at(4), 18_999)).toBe(false)
    expect(s.note(1, 'n5', at(4), 19_000)).toBe(false) // retargeted: n5's own watch
    expect(s.note(1, 'n5', {}, 25_000)).toBe(false) // a step taken (or an earlier version)
    expect(s.note(1, 'n5', at(4), 30_000)).toBe(false)
    s.forget(1) // a step failed
    expect(s.note(1, 'n5', at(4), 39_000)).toBe(false)
    expect(s.note(1, 'n5', at(4), 49_000)).toBe(true)
    // Groups are watched apart; another term forgets everything.
    s.note(2, 'n6', at(1), 0)
    expect(s.note(2, 'n6', at(1), 10_000)).toBe(true)
    expect(s.stalled(49_000)).toEqual(new Map([[1, 'n5']]))
    s.clear()
    expect(s.stalled(49_000)).toEqual(new Map())
  })
})
