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

  it('asks the meta group its term before a step: a lower term is refused where no step was taken yet', async () => {
    const fence = new MetaTermFence()
    const asked: number[] = []
    const metaAt = (t: number) => async () => {
      asked.push(t)
      return t
    }
    // A node just restarted (no term kept): the meta group is at term 6, the step is of term 5.
    expect(await fence.refusal(1, 5, metaAt(6))).toBe(
      "a replica change step of group 1 from meta term 5, below the meta group's term 6: a deposed meta leader's, ignored",
    )
    expect(fence.highest(1)).toBe(6) // the floor now: no need to ask for a lower term again
    expect(await fence.refusal(1, 5, metaAt(6))).toMatch(
      /below meta term 6, which this group's leader has seen/,
    )
    expect(asked).toEqual([6])
    // The current leader's step passes.
    expect(await fence.refusal(1, 6, metaAt(6))).toBeUndefined()
    // A meta replica of a version that does not say (0): the fence alone.
    expect(await fence.refusal(2, 3, metaAt(0))).toBeUndefined()
    expect(await fence.refusal(2, 2, metaAt(0))).toMatch(/from meta term 2, below meta term 3, which/)
    // A sender of a version that sends no term: nothing asked.
    asked.length = 0
    expect(await fence.refusal(3, 0, metaAt(9))).toBeUndefined()
    expect(asked).toEqual([])
  })

  it("refuses, and does not remember, a term above the meta group's: no meta leader sent it", async () => {
    const fence = new MetaTermFence()
    expect(await fence.refusal(1, 1_000_000, async () => 6)).toBe(
      "a replica change step of group 1 from meta term 1000000, above the meta group's term 6: no meta leader sent it, ignored",
    )
    expect(fence.highest(1)).toBe(0)
    // The real leader's steps still pass.
    expect(await fence.refusal(1, 6, async () => 6)).toBeUndefined()
  })

  it('takes no step when the meta group cannot be asked', async () => {
    const fence = new MetaTermFence()
    await expect(
      fence.refusal(1, 5, async () => {
        throw new Error('no meta replica answered')
      }),
    ).rejects.toThrow(/no meta replica answered/)
    expect(fence.highest(1)).toBe(0)
  })
})
