import { describe, expect, it } from 'vitest'
import { RouteCache } from './route-cache'

const route = (queue: string, routeEpoch: number, queueId = 1) => ({ queue, queueId, routeEpoch })

describe('RouteCache', () => {
  it('keeps the newest route of each queue, and none older than its last refresh', () => {
    const cache = new RouteCache<ReturnType<typeof route>>()
    cache.put(route('jobs', 5))
    cache.put(route('jobs', 3))
    expect(cache.get('jobs')?.routeEpoch).toBe(5)
    cache.refreshed(8)
    cache.put(route('mail', 7)) // an answer to a call made before the refresh
    expect(cache.get('mail')).toBeUndefined()
    cache.put(route('mail', 9))
    expect(cache.get('mail')?.routeEpoch).toBe(9)
    expect(cache.highestEpoch).toBe(9)
  })

  it('asks about every cached name at a new changed epoch, not only the hosted ones', () => {
    const cache = new RouteCache<ReturnType<typeof route>>()
    cache.put(route('gone', 3))
    cache.put(route('kept', 4))
    // The deleted queue's partitions already left this node's groups: it hosts only "kept".
    const names = cache.namesToRefresh(6, ['kept', 'hosted-only'])
    expect([...(names ?? [])].sort()).toEqual(['gone', 'hosted-only', 'kept'])
    cache.answered(names ?? [], 6, [route('kept', 6), route('hosted-only', 6)])
    cache.refreshed(6)
    expect(cache.get('gone')).toBeUndefined()
    expect(cache.get('kept')?.routeEpoch).toBe(6)
    expect(cache.size).toBe(2)
    // Up to date: nothing to ask until the next change.
    expect(cache.namesToRefresh(6, ['kept'])).toBeUndefined()
  })

  it('takes no route older than a refresh under way (an answer read before a deletion, arriving late)', () => {
    const cache = new RouteCache<ReturnType<typeof route>>()
    const names = cache.namesToRefresh(10, ['kept']) // q deleted at epoch 10; the refresh starts
    cache.put(route('q', 9)) // a GetRoutes read before the deletion answers meanwhile
    cache.answered(names ?? [], 10, [route('kept', 10)])
    cache.refreshed(10)
    expect(cache.get('q')).toBeUndefined()
    expect(cache.get('kept')?.routeEpoch).toBe(10)
  })

  it('keeps a route newer than an answer that lacks it (created after the answer was read)', () => {
    const cache = new RouteCache<ReturnType<typeof route>>()
    cache.put(route('new', 9))
    cache.answered(['new'], 8, [])
    expect(cache.get('new')?.routeEpoch).toBe(9)
  })

  it('forgets routes older than a new grow epoch', () => {
    const cache = new RouteCache<ReturnType<typeof route>>()
    cache.put(route('a', 3))
    cache.put(route('b', 6))
    cache.forgetBefore(5)
    expect(cache.get('a')).toBeUndefined()
    expect(cache.get('b')).toBeDefined()
  })

  it('forgets, against a meta replica, the routes of deleted queues and of other incarnations', () => {
    const cache = new RouteCache<ReturnType<typeof route>>()
    cache.put(route('gone', 3, 1))
    cache.put(route('again', 3, 2))
    cache.put(route('live', 3, 4))
    const ids = new Map([
      ['again', 5],
      ['live', 4],
    ])
    cache.forgetDeleted(7, (name) => ids.get(name))
    expect([cache.get('gone'), cache.get('again'), cache.get('live')?.queueId]).toEqual([
      undefined,
      undefined,
      4,
    ])
    // Once per changed epoch.
    cache.put(route('gone', 8, 1))
    cache.forgetDeleted(7, (name) => ids.get(name))
    expect(cache.get('gone')).toBeDefined()
  })
})
