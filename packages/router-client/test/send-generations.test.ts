import { describe, expect, it } from 'vitest'
import { SendGenerations } from '../src/send-generations'

/** Whether `promise` has settled, after pending callbacks ran. */
const settled = async (promise: Promise<unknown>): Promise<boolean> => {
  let done = false
  void promise.then(() => {
    done = true
  })
  await Promise.resolve()
  await Promise.resolve()
  return done
}

describe('SendGenerations', () => {
  it('resolves a flush once the sends begun before it end, whatever begins after', async () => {
    const g = new SendGenerations()
    expect(await settled(g.flushed())).toBe(true)
    const a = g.begin()
    const b = g.begin()
    const first = g.flushed()
    const c = g.begin()
    const second = g.flushed()
    expect(g.flushing).toBe(true)
    g.end(b)
    expect(await settled(first)).toBe(false)
    g.end(a)
    expect(await settled(first)).toBe(true)
    expect(await settled(second)).toBe(false)
    g.begin() // a later send does not hold the second flush
    g.end(c)
    expect(await settled(second)).toBe(true)
  })
})
