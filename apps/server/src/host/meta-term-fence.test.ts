import { describe, expect, it } from 'vitest'
import { FENCED_GROUPS_MAX, MetaTermFence } from './meta-term-fence'

describe('MetaTermFence', () => {
  it('refuses a step of a lower meta term than one taken, per group; a term of 0 always passes', () => {
    const fence = new MetaTermFence()
    expect(fence.admit(1, 5)).toBe(true)
    expect(fence.admit(1, 6)).toBe(true) // a later meta leader
    expect(fence.admit(1, 5)).toBe(false) // the deposed one's step, late
    expect(fence.admit(1, 6)).toBe(true)
    expect(fence.admit(2, 5)).toBe(true) // another group: its own highest
    expect(fence.admit(1, 0)).toBe(true) // a version that sends no term
    expect(fence.highest(1)).toBe(6)
  })

  it('keeps at most FENCED_GROUPS_MAX groups, forgetting the least recently stepped', () => {
    const fence = new MetaTermFence()
    for (let g = 1; g <= FENCED_GROUPS_MAX + 1; g++) fence.admit(g, 3)
    expect(fence.highest(1)).toBe(0)
    expect(fence.highest(2)).toBe(3)
  })
})
