import type { MqClient } from '@mq/router-client'
import { describe, expect, it } from 'vitest'
import { ConsoleClients } from './console-clients'

/** Clients that record when they are closed, by token. */
function opener(closed: string[]): (token: string) => Promise<MqClient> {
  return async (token) => ({ close: async () => void closed.push(token) }) as unknown as MqClient
}

const settle = () => new Promise<void>((r) => setImmediate(r))

describe('ConsoleClients', () => {
  it('keeps one client per token, reused, and closes the least recently used past max', async () => {
    const closed: string[] = []
    const opened: string[] = []
    const clients = new ConsoleClients(async (token) => {
      opened.push(token)
      return opener(closed)(token)
    }, 2)
    await clients.use('a', async () => {})
    await clients.use('b', async () => {})
    await clients.use('a', async () => {})
    await clients.use('c', async () => {})
    await settle()
    expect([opened, closed, clients.size]).toEqual([['a', 'b', 'c'], ['b'], 2])
  })

  it('closes an evicted client only once its last call is done', async () => {
    const closed: string[] = []
    const clients = new ConsoleClients(opener(closed), 8)
    let release = () => {}
    const held = clients.use('t0', () => new Promise<string>((r) => (release = () => r('answered'))))
    await settle()
    for (let i = 1; i <= 8; i++) await clients.use(`t${i}`, async () => {})
    await settle()
    // t0 left the cache (8 newer tokens) but its call is under way: still open.
    expect([clients.size, closed]).toEqual([8, []])
    release()
    expect(await held).toBe('answered')
    await settle()
    expect(closed).toEqual(['t0'])
  })

  it('closes a client evicted under a failing call too, and does not keep one whose connect failed', async () => {
    const closed: string[] = []
    let fail = true
    const clients = new ConsoleClients(async (token) => {
      if (fail && token === 'x') throw new Error('connect refused')
      return opener(closed)(token)
    }, 1)
    await expect(clients.use('x', async () => {})).rejects.toThrow(/connect refused/)
    await settle()
    expect(clients.size).toBe(0)
    fail = false
    const failing = clients.use('a', async () => {
      await clients.use('b', async () => {}) // evicts a, in use
      throw new Error('call failed')
    })
    await expect(failing).rejects.toThrow(/call failed/)
    await settle()
    expect(closed).toEqual(['a'])
  })
})
