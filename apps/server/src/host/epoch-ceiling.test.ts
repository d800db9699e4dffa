import { describe, expect, it } from 'vitest'
import { EpochCeiling } from './epoch-ceiling'

/**
 * A meta group whose epoch reads are counted and answered when the test says, each with the
 * epoch of when it began (a read linearized at its start).
 */
function metaGroup(epoch: number) {
  const reads: (() => void)[] = []
  const group = {
    epoch,
    reads: 0,
    read: () =>
      new Promise<number>((resolve) => {
        group.reads++
        const at = group.epoch
        reads.push(() => resolve(at))
      }),
    /** Answers the reads under way. */
    answer: () => {
      for (const resolve of reads.splice(0)) resolve()
    },
  }
  return group
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0))

describe('EpochCeiling', () => {
  it('answers at once for an epoch it has heard of, without a read', async () => {
    const meta = metaGroup(7)
    const ceiling = new EpochCeiling(meta.read, () => 0, 0)
    ceiling.observe(7)
    expect(await ceiling.reach(5)).toBe(7)
    expect(await ceiling.reach(7)).toBe(7)
    expect(meta.reads).toBe(0)
  })

  it('shares one read among the requests above it, and tells a made-up epoch by it', async () => {
    const meta = metaGroup(7)
    let now = 0
    const ceiling = new EpochCeiling(meta.read, () => now, 50)
    // 200 requests with made-up epochs: one read for all of them (two calls each before).
    const answers = Array.from({ length: 200 }, (_, i) => ceiling.reach(1_000_000 + i))
    await tick()
    expect(meta.reads).toBe(1)
    meta.answer()
    expect(new Set(await Promise.all(answers))).toEqual(new Set([7]))
    // Heard of now: a request at the cluster's epoch needs no read.
    expect(await ceiling.reach(7)).toBe(7)
    expect(meta.reads).toBe(1)
    now = 10
    // A request above it after that read waits for a read begun after it came.
    const later = ceiling.reach(1_000_000)
    await new Promise((resolve) => setTimeout(resolve, 60))
    expect(meta.reads).toBe(2)
    meta.answer()
    expect(await later).toBe(7)
  })

  it('waits for a read begun after the request: one under way may predate its epoch', async () => {
    const meta = metaGroup(7)
    let now = 0
    const ceiling = new EpochCeiling(meta.read, () => now, 0)
    const early = ceiling.reach(8)
    await tick()
    expect(meta.reads).toBe(1)
    // The queue is created (epoch 8) and a client routed there asks while the first read is out.
    meta.epoch = 8
    now = 5
    const routed = ceiling.reach(8)
    meta.answer() // the first read was answered before the creation reached it
    await tick()
    await tick()
    expect(meta.reads).toBe(2)
    meta.answer()
    expect(await routed).toBe(8)
    // Sent before epoch 8 existed: made up, told so by the read under way when it came.
    expect(await early).toBe(7)
  })

  it('starts reads at most every everyMs, and fails a request whose read fails', async () => {
    let reads = 0
    let now = 0
    const ceiling = new EpochCeiling(
      async () => {
        reads++
        throw new Error('no meta leader')
      },
      () => now,
      40,
    )
    await expect(ceiling.reach(3)).rejects.toThrow('no meta leader')
    const started = Date.now()
    now = 1
    await expect(ceiling.reach(3)).rejects.toThrow('no meta leader')
    expect(reads).toBe(2)
    expect(Date.now() - started).toBeGreaterThanOrEqual(35)
  })

  it('does not hold a request behind an earlier read a silent meta leader holds', async () => {
    const answers: ((e: number) => void)[] = []
    let now = 0
    const ceiling = new EpochCeiling(
      () => new Promise<number>((resolve) => answers.push(resolve)),
      () => now,
      20,
    )
    void ceiling.reach(5) // its read is never answered (the meta leader it went to is silent)
    await tick()
    expect(answers).toHaveLength(1)
    now = 30
    const later = ceiling.reach(5)
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect(answers).toHaveLength(2) // started without waiting for the first
    answers[1]!(7)
    expect(await later).toBe(7)
  })
})
