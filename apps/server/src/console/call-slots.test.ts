import { describe, expect, it, vi } from 'vitest'
import { ApiRequestError } from './api-errors'
import { CallSlots } from './call-slots'

describe('CallSlots', () => {
  it('runs at most runningMax calls, lines up waitingMax more in order, refuses the rest with 429', async () => {
    const slots = new CallSlots(2, 3)
    const releases: (() => void)[] = []
    const started: number[] = []
    const calls = Array.from({ length: 5 }, (_, i) =>
      slots.run(async () => {
        started.push(i)
        await new Promise<void>((r) => releases.push(r))
        return i
      }),
    )
    await expect(slots.run(async () => 'late')).rejects.toMatchObject({
      status: 429,
      code: 'TOO_MANY_REQUESTS',
    })
    await expect(slots.run(async () => 'late')).rejects.toBeInstanceOf(ApiRequestError)
    expect([started, slots.running, slots.waiting]).toEqual([[0, 1], 2, 3])
    for (let i = 0; i < 5; i++) {
      releases.shift()?.()
      await new Promise<void>((r) => setImmediate(r))
    }
    // Released in order: each freed slot went to the next in line, never more than 2 at once.
    expect(await Promise.all(calls)).toEqual([0, 1, 2, 3, 4])
    expect(started).toEqual([0, 1, 2, 3, 4])
    expect([slots.running, slots.waiting]).toEqual([0, 0])
  })

  it('frees the slot of a call that fails', async () => {
    const slots = new CallSlots(1, 0)
    await expect(slots.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom')
    expect(await slots.run(async () => 'next')).toBe('next')
    expect(slots.running).toBe(0)
  })

  it('gives up on a slot after waitMaxMs (429), leaving the line to the others', async () => {
    vi.useFakeTimers()
    try {
      const slots = new CallSlots(1, 2, 1_000)
      let release = () => {}
      const running = slots.run(() => new Promise<void>((r) => (release = r)))
      const late = slots.run(async () => 'late')
      const failed = expect(late).rejects.toMatchObject({
        status: 429,
        message: expect.stringContaining('waited 1000 ms'),
      })
      await vi.advanceTimersByTimeAsync(999)
      const second = slots.run(async () => 'second')
      await vi.advanceTimersByTimeAsync(1)
      await failed
      expect([slots.running, slots.waiting]).toEqual([1, 1])
      release()
      await running
      expect(await second).toBe('second')
      expect([slots.running, slots.waiting]).toEqual([0, 0])
    } finally {
      vi.useRealTimers()
    }
  })
})
