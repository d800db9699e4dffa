import { describe, expect, it } from 'vitest'
import { fnv1a32, type LaneLoad, Partitioner } from './partitioner'

describe('Partitioner', () => {
  it('hashes with FNV-1a (reference vectors)', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5)
    expect(fnv1a32('a')).toBe(0xe40c292c)
    expect(fnv1a32('foobar')).toBe(0xbf9cf968)
  })
  it('sends one key to one partition', () => {
    const p = new Partitioner()
    const first = p.choose(8, 'user-42')
    for (let i = 0; i < 10; i++) expect(p.choose(8, 'user-42')).toBe(first)
  })
  it('round-robins messages without a key when asked, from a random first partition', () => {
    const p = new Partitioner({ keyless: 'round-robin', random: () => 0 })
    expect([0, 1, 2, 3, 4].map(() => p.choose(3))).toEqual([0, 1, 2, 0, 1])
    const q = new Partitioner({ keyless: 'round-robin', random: () => 0.5 })
    expect([0, 1, 2].map(() => q.choose(4))).toEqual([2, 3, 0])
  })

  it('sticks to one partition for a batch of keyless messages, then moves on in turn', () => {
    const p = new Partitioner({ batchMax: 3, random: () => 0 })
    expect(Array.from({ length: 10 }, () => p.choose(3))).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2, 0])
  })

  it('moves on after a batch of bytes: the message that reaches it is the last', () => {
    const p = new Partitioner({ batchBytesMax: 100, random: () => 0 })
    expect([60, 30, 20, 5, 200, 1].map((bytes) => p.choose(2, undefined, bytes))).toEqual([0, 0, 0, 1, 1, 0])
  })

  it('takes the least loaded partition next, and leaves a stalled one at once', () => {
    const loads: LaneLoad[] = [
      { queued: 0, stalled: false },
      { queued: 40, stalled: false },
      { queued: 5, stalled: false },
    ]
    const p = new Partitioner({ batchMax: 2, random: () => 0 })
    const load = (i: number) => loads[i] as LaneLoad
    expect([p.choose(3, undefined, 1, load), p.choose(3, undefined, 1, load)]).toEqual([0, 0])
    loads[0] = { queued: 50, stalled: false }
    // Next in turn is 1, but 2 holds fewer.
    expect(p.choose(3, undefined, 1, load)).toBe(2)
    loads[2] = { queued: 1, stalled: true }
    // 2 stalled: left before its batch is full, for the least loaded of the others.
    expect(p.choose(3, undefined, 1, load)).toBe(1)
    // Only stalled partitions left: the least loaded of them, each time.
    loads[0] = { queued: 50, stalled: true }
    loads[1] = { queued: 60, stalled: true }
    loads[2] = { queued: 70, stalled: true }
    expect(p.choose(3, undefined, 1, load)).toBe(0)
    expect(p.choose(3, undefined, 1, load)).toBe(0)
  })

  it('re-chooses when the partition count shrinks below the sticky one', () => {
    const p = new Partitioner({ random: () => 0.9 })
    expect(p.choose(4)).toBe(3)
    expect(p.choose(2)).toBeLessThan(2)
  })
  it('rejects a bad partition count', () => {
    expect(() => new Partitioner().choose(0)).toThrow(RangeError)
  })
})
