import { describe, expect, it } from 'vitest'
import { ChangeSignal } from './change-signal'

describe('ChangeSignal', () => {
  it('ends a wait at once for a change after the count the waiter read, else at the next change', async () => {
    const s = new ChangeSignal()
    const since = s.count
    s.notify() // came in while the waiter was busy
    const never = new AbortController().signal
    const t0 = Date.now()
    await s.changed(5_000, never, since)
    expect(Date.now() - t0).toBeLessThan(1_000)
    let woke = false
    const waiting = s.changed(5_000, never, s.count).then(() => {
      woke = true
    })
    await Promise.resolve()
    expect(woke).toBe(false)
    expect(s.waiting).toBe(1)
    s.notify()
    await waiting
    expect(woke).toBe(true)
    expect(s.waiting).toBe(0)
  })

  it('ends a wait after ms, or when aborted', async () => {
    const s = new ChangeSignal()
    const t0 = Date.now()
    await s.changed(30, new AbortController().signal, s.count)
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25)
    const c = new AbortController()
    const waiting = s.changed(5_000, c.signal, s.count)
    c.abort()
    await waiting
    expect(s.waiting).toBe(0)
  })
})
