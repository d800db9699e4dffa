import { describe, expect, it } from 'vitest'
import { metaGroupSummary, metaVotersResult } from './meta-summary'

describe('metaGroupSummary', () => {
  const base = {
    metaVoters: ['n1', 'n2', 'n3'],
    metaLearners: [],
    metaVotersWanted: 0,
    metaChange: undefined,
  }

  it('names the voters, the size wanted while not reached, a learner and the change under way', () => {
    expect(metaGroupSummary(base)).toBe('n1, n2, n3')
    expect(metaGroupSummary({ ...base, metaVotersWanted: 3 })).toBe('n1, n2, n3')
    const change = (add: string, remove: string, reason: string) => ({ add, remove, reason, startedAtMs: 1 })
    expect(
      metaGroupSummary({
        ...base,
        metaVotersWanted: 5,
        metaLearners: ['n4'],
        metaChange: change('n4', '', 'grow'),
      }),
    ).toBe('n1, n2, n3 (5 wanted) + learner n4; adding n4 (grow)')
    expect(metaGroupSummary({ ...base, metaVotersWanted: 1, metaChange: change('', 'n3', 'shrink') })).toBe(
      'n1, n2, n3 (1 wanted); removing n3 (shrink)',
    )
    expect(metaGroupSummary({ ...base, metaChange: change('n4', 'n3', 'dead') })).toBe(
      'n1, n2, n3; replacing n3 by n4 (dead)',
    )
    expect(metaGroupSummary({ ...base, metaChange: change('', '', 'dead') })).toBe(
      'n1, n2, n3; giving up a change (dead): its new voter is gone',
    )
    expect(metaGroupSummary({ ...base, metaVoters: [] })).toBe('(unknown)')
  })

  it('words a SetMetaVoters answer: reached, or on its way', () => {
    expect(metaVotersResult({ voters: ['n1', 'n2', 'n3'] }, 3)).toBe(
      'the meta group has 3 voters: n1, n2, n3',
    )
    expect(metaVotersResult({ voters: ['n1', 'n2', 'n3'] }, 5)).toBe(
      'the meta group goes from 3 voters (n1, n2, n3) to 5',
    )
  })
})
