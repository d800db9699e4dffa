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

  it('leaves no unhandled rejection when what it waited on fails after the interrupt', async () => {
    const unhandled: unknown[] = []
    const record = (reason: unknown) => unhandled.push(reason)
    process.on('unhandledRejection', record)
    try {
      const interrupt = new AbortController()
      interrupt.abort()
      // A stdin read the interrupt closed: it rejects after the interrupt was seen.
      let fail: (e: Error) => void = () => {}
      const read = new Promise<string>((_, reject) => {
        fail = reject
      })
      expect(await untilInterrupted(read, interrupt.signal)).toBe(INTERRUPTED)
      fail(new Error('premature close'))
      // And one rejected already when it is handed over.
      expect(await untilInterrupted(Promise.reject(new Error('closed')), interrupt.signal)).toBe(INTERRUPTED)
      // Unhandled rejections are reported once the microtasks of a turn have run.
      await new Promise((resolve) => setImmediate(resolve))
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', record)
    }
  })

  it('marks the command as handling interrupts until it says it is done', () => {
    const interrupt = new AbortController()
    const done = handleInterrupts(interrupt.signal)
    expect(getEventListeners(interrupt.signal, 'abort')).toHaveLength(1)
    done()
    expect(getEventListeners(interrupt.signal, 'abort')).toHaveLength(0)
  })
})
