import { describe, expect, it } from 'vitest'
import { DELIVERY_BATCH_MS, DeliveryBuckets } from './delivery-rate'

describe('DeliveryBuckets', () => {
  it("starts with one second's worth, refills at the rate, and never holds more", () => {
    let now = 0
    const b = new DeliveryBuckets(() => now)
    expect(b.take('q/0', 10, 100)).toBe(10)
    expect(b.take('q/0', 10, 100)).toBe(0)
    expect(b.waitMs('q/0', 10, 100)).toBe(100)
    now = 250
    expect(b.take('q/0', 10, 100)).toBe(2) // 2.5 tokens: whole ones only
    now = 300
    expect(b.take('q/0', 10, 1)).toBe(1)
    now = 60_000
    expect(b.take('q/0', 10, 100)).toBe(10) // capped at the burst
    // Other partitions have their own buckets.
    expect(b.take('q/1', 10, 3)).toBe(3)
  })

  it('gives back what a lease did not use, up to the burst', () => {
    let now = 0
    const b = new DeliveryBuckets(() => now)
    expect(b.take('q/0', 4, 4)).toBe(4)
    b.giveBack('q/0', 4, 3)
    expect(b.take('q/0', 4, 10)).toBe(3)
    b.giveBack('q/0', 4, 100)
    expect(b.take('q/0', 4, 10)).toBe(4)
    now = 1
    expect(b.waitMs('q/0', 4, 10)).toBe(249) // 1 ms refilled 0.004 of a token
  })

  it('paces a fraction of a message per second: one token every 1/rate seconds, a burst of one', () => {
    let now = 0
    const b = new DeliveryBuckets(() => now)
    expect(b.take('q/0', 0.25, 10)).toBe(1)
    expect(b.waitMs('q/0', 0.25, 10)).toBe(4000)
    now = 3_999
    expect(b.take('q/0', 0.25, 10)).toBe(0)
    now = 4_000
    expect(b.take('q/0', 0.25, 10)).toBe(1)
  })

  it('keeps at most entriesMax buckets: the least recently used is forgotten (full again)', () => {
    const b = new DeliveryBuckets(() => 0, 2)
    expect(b.take('a', 1, 1)).toBe(1)
    expect(b.take('b', 1, 1)).toBe(1)
    expect(b.take('a', 1, 1)).toBe(0) // a used again: b is now the least recent
    expect(b.take('c', 1, 1)).toBe(1) // forgets b
    expect(b.take('a', 1, 1)).toBe(0) // a kept: still empty
    expect(b.take('b', 1, 1)).toBe(1) // b forgotten, so full again (and forgets c)
  })

  it('waits for 100 ms worth before a lease takes any: one entry per batch at a fast rate', () => {
    expect(DELIVERY_BATCH_MS).toBe(100)
    let now = 0
    const b = new DeliveryBuckets(() => now)
    expect(b.take('q/0', 1000, 5000)).toBe(1000) // the burst
    now = 50
    expect(b.take('q/0', 1000, 5000)).toBe(0) // 50 tokens: not yet 100
    expect(b.waitMs('q/0', 1000, 5000)).toBe(50)
    expect(b.take('q/0', 1000, 20)).toBe(20) // a lease that wants fewer takes them
    now = 100
    expect(b.take('q/0', 1000, 5000)).toBe(0) // 80
    now = 120
    expect(b.take('q/0', 1000, 5000)).toBe(100)
  })

  it('refills nothing for a clock that went back (a monotonic clock by default)', () => {
    let now = 10_000
    const b = new DeliveryBuckets(() => now)
    expect(b.take('q/0', 10, 10)).toBe(10)
    now = 5_000
    expect(b.take('q/0', 10, 10)).toBe(0)
    now = 5_100
    expect(b.take('q/0', 10, 1)).toBe(1) // 100 ms after the step back, not after 5 s
  })
})
