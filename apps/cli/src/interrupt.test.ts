import { getEventListeners } from 'node:events'
import { describe, expect, it } from 'vitest'
import { handleInterrupts, INTERRUPTED, untilInterrupted } from './interrupt'

describe('untilInterrupted', () => {
  it('gives the value, or INTERRUPTED once aborted, and leaves no listener behind either way', async () => {
    const interrupt = new AbortController()
    for (let i = 0; i < 1_000; i++)
      expect(await untilInterrupted(Promise.resolve(i), interrupt.signal)).toBe(i)
    await expect(untilInterrupted(Promise.reject(new Error('x')), interrupt.signal)).rejects.toThrow('x')
    expect(getEventListeners(interrupt.signal, 'abort')).toHaveLength(0)
    const waiting = untilInterrupted(new Promise(() => {}), interrupt.signal)
    interrupt.abort()
    expect(await waiting).toBe(INTERRUPTED)
    expect(await untilInterrupted(Promise.resolve(1), interrupt.signal)).toBe(INTERRUPTED)
  })

  it('marks the command as handling interrupts until it says it is done', () => {
    const interrupt = new AbortController()
    const done = handleInterrupts(interrupt.signal)
    expect(getEventListeners(interrupt.signal, 'abort')).toHaveLength(1)
    done()
    expect(getEventListeners(interrupt.signal, 'abort')).toHaveLength(0)
  })
})
