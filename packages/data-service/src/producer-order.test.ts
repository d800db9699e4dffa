import { describe, expect, it } from 'vitest'
import { ProducerOrder } from './producer-order'

/** Whether `p` has settled after the pending callbacks of this turn ran. */
async function settled(p: Promise<void> | undefined): Promise<boolean> {
  if (p === undefined) return true
  let done = false
  void p.then(() => {
    done = true
  })
  await new Promise((resolve) => setImmediate(resolve))
  return done
}

describe('ProducerOrder', () => {
  it('lets a batch go at once when nothing before it is in flight or its predecessor was proposed', () => {
    const order = new ProducerOrder()
    expect(order.turn('p q/0', 1, 1)).toBeUndefined()
    order.proposed('p q/0', 1)
    expect(order.turn('p q/0', 2, 1)).toBeUndefined()
    expect(order.turn('p q/0', 7, 7)).toBeUndefined()
  })

  it('holds a batch that overtook its predecessor until the predecessor is proposed', async () => {
    const order = new ProducerOrder({ waitMs: 60_000 })
    const third = order.turn('p q/0', 3, 1)
    const second = order.turn('p q/0', 2, 1)
    expect(await settled(third)).toBe(false)
    expect(await settled(second)).toBe(false)
    order.proposed('p q/0', 1)
    expect(await settled(second)).toBe(true)
    expect(await settled(third)).toBe(false)
    order.proposed('p q/0', 2)
    expect(await settled(third)).toBe(true)
    // Other lanes are independent.
    expect(await settled(order.turn('p q/1', 2, 1))).toBe(false)
  })

  it('lets a batch go after waitMs when its predecessor never comes', async () => {
    const order = new ProducerOrder({ waitMs: 20 })
    const started = performance.now()
    await order.turn('p q/0', 5, 4)
    expect(performance.now() - started).toBeGreaterThanOrEqual(15)
  })

  it('is bounded: waiters per lane and lanes remembered', async () => {
    const order = new ProducerOrder({ waitMs: 60_000, waitersPerLaneMax: 2, lanesMax: 3 })
    const a = order.turn('p q/0', 5, 1)
    const b = order.turn('p q/0', 6, 1)
    expect(a).toBeDefined()
    expect(b).toBeDefined()
    expect(order.turn('p q/0', 7, 1)).toBeUndefined()
    expect(order.turn('p q/0', 5, 1)).toBeUndefined() // the same sequence twice waits once
    for (const lane of ['x', 'y', 'z']) order.proposed(lane, 1)
    expect(order.size).toBe(3)
    // 'p q/0' was the least recently used lane: evicted, and its waiters let go.
    expect(await settled(a)).toBe(true)
    expect(await settled(b)).toBe(true)
  })
})
