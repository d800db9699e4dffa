import { EventEmitter } from 'node:events'
import { describe, expect, it, vi } from 'vitest'
import { EXIT_WITH_PARENT_ENV, type ParentLink, watchParent } from './parent-watch'

function link(env: Record<string, string>, channel: boolean, connected = true) {
  const events = new EventEmitter()
  const unref = vi.fn()
  const l: ParentLink & { emit(e: string): void } = {
    env,
    connected,
    channel: channel ? { unref } : undefined,
    once: (event, listener) => events.once(event, listener),
    emit: (e) => events.emit(e),
  }
  return { l, unref, listeners: () => events.listenerCount('disconnect') }
}

describe('watchParent', () => {
  it('stops the node once the parent that asked for it closes the IPC channel', () => {
    const { l, unref } = link({ [EXIT_WITH_PARENT_ENV]: '1' }, true)
    const gone = vi.fn()
    expect(watchParent(gone, l)).toBe(true)
    // The channel must not keep a stopped node alive.
    expect(unref).toHaveBeenCalledOnce()
    expect(gone).not.toHaveBeenCalled()
    l.emit('disconnect')
    expect(gone).toHaveBeenCalledOnce()
  })

  it('calls at once when the channel closed before it looked', async () => {
    const { l } = link({ [EXIT_WITH_PARENT_ENV]: '1' }, true, false)
    const gone = vi.fn()
    expect(watchParent(gone, l)).toBe(true)
    await Promise.resolve()
    expect(gone).toHaveBeenCalledOnce()
  })

  it('does nothing for a node started otherwise (no variable, or no channel)', () => {
    for (const [env, channel] of [
      [{}, true],
      [{ [EXIT_WITH_PARENT_ENV]: '0' }, true],
      [{ [EXIT_WITH_PARENT_ENV]: '1' }, false],
    ] as const) {
      const { l, unref, listeners } = link(env, channel)
      const gone = vi.fn()
      expect(watchParent(gone, l)).toBe(false)
      expect(unref).not.toHaveBeenCalled()
      expect(listeners()).toBe(0)
    }
  })
})
