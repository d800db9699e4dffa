import { describe, expect, it } from 'vitest'
import {
  applyConfChange,
  ConfChangeType,
  decodeConfChange,
  encodeConfChange,
  validateConfState,
} from './conf-change'
import { InvalidConfigError } from './errors'

const conf = (voters: string[], learners: string[] = []) => ({
  voters,
  learners,
  votersOutgoing: [],
  learnersNext: [],
})

describe('conf changes', () => {
  it('round-trips through entry data and rejects garbage', () => {
    const c = { type: ConfChangeType.AddLearner, id: 'n7' }
    expect(decodeConfChange(encodeConfChange(c))).toEqual(c)
    expect(decodeConfChange(new TextEncoder().encode('nonsense'))).toBeNull()
    expect(decodeConfChange(new TextEncoder().encode('grow:n1'))).toBeNull()
  })

  it('assigns one replica a role, so applying a change twice changes nothing more', () => {
    const once = applyConfChange(conf(['a', 'b'], ['c']), { type: ConfChangeType.AddVoter, id: 'c' })
    expect(once).toEqual(conf(['a', 'b', 'c']))
    expect(applyConfChange(once, { type: ConfChangeType.AddVoter, id: 'c' })).toEqual(once)
    const removed = applyConfChange(once, { type: ConfChangeType.Remove, id: 'a' })
    expect(removed).toEqual(conf(['b', 'c']))
    expect(applyConfChange(removed, { type: ConfChangeType.AddLearner, id: 'b' })).toEqual(conf(['c'], ['b']))
  })

  it('validates a configuration', () => {
    expect(() => validateConfState(conf(['a', 'b'], ['b']))).toThrow(InvalidConfigError)
    expect(() => validateConfState({ ...conf(['a']), votersOutgoing: ['b'] })).toThrow(/joint/)
    expect(() => validateConfState(conf(['a']), 'z')).toThrow(/not in its own configuration/)
    expect(() => validateConfState(conf(['a', 'b']), 'a')).not.toThrow()
  })
})
