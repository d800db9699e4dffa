import { describe, expect, it } from 'vitest'
import { InFlight } from './in-flight'

/** A promise and the function that settles it. */
function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void } {
  let resolve = () => {}
  let reject: (e: Error) => void = () => {}
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

describe('InFlight', () => {
  it('returns from add only while fewer than max are under way, and drains', async () => {
    const window = new InFlight(2)
    const [a, b, c] = [deferred(), deferred(), deferred()]
    await window.add(a.promise) // one under way: room for another
    let returned = false
    const adding = window.add(b.promise).then(() => (returned = true))
    await new Promise((r) => setImmediate(r))
    expect([window.size, returned]).toEqual([2, false])
    a.reject(new Error('its own business')) // a rejection frees its slot too
    await adding
    expect(window.size).toBe(1)
    const addingC = window.add(c.promise)
    let drained = false
    const draining = window.drained().then(() => (drained = true))
    b.resolve()
    await addingC
    await new Promise((r) => setImmediate(r))
    expect([window.size, drained]).toEqual([1, false])
    c.resolve()
    await draining
    expect(window.size).toBe(0)
  })
})
