import { describe, expect, it } from 'vitest'
import { ROUTE_MISS_MS, ROUTE_MISSES_MAX, type RouteAnswer, RouteMisses } from './route-misses'

type Route = { readonly queue: string }

/** A fetch that counts its calls and answers `answer` (or what `next` says). */
function fetcher(answer: (call: number) => RouteAnswer<Route>) {
  let calls = 0
  const fetch = async () => answer(++calls)
  return { fetch, calls: () => calls }
}

describe('RouteMisses', () => {
  it('asks the meta group once for an unknown queue within a second, then again', async () => {
    let now = 0
    const misses = new RouteMisses<Route>(() => now)
    const f = fetcher(() => ({ epoch: 7, route: undefined }))
    for (let i = 0; i < 100; i++) expect(await misses.lookup('nosuch', 0, f.fetch)).toBeUndefined()
    expect(f.calls()).toBe(1)
    now += ROUTE_MISS_MS
    expect(await misses.lookup('nosuch', 7, f.fetch)).toBeUndefined()
    expect(f.calls()).toBe(2)
  })

  it('shares one lookup among the requests that wait for it', async () => {
    const misses = new RouteMisses<Route>(() => 0)
    let release: (a: RouteAnswer<Route>) => void = () => {}
    let calls = 0
    const fetch = () => {
      calls++
      return new Promise<RouteAnswer<Route>>((r) => {
        release = r
      })
    }
    const waiting = Array.from({ length: 50 }, () => misses.lookup('jobs', 3, fetch))
    release({ epoch: 5, route: { queue: 'jobs' } })
    expect(await Promise.all(waiting)).toEqual(Array(50).fill({ queue: 'jobs' }))
    expect(calls).toBe(1)
  })

  it('looks up again a request routed after the miss (the queue was created since)', async () => {
    const misses = new RouteMisses<Route>(() => 0)
    const f = fetcher((call) =>
      call === 1 ? { epoch: 7, route: undefined } : { epoch: 9, route: { queue: 'q' } },
    )
    expect(await misses.lookup('q', 0, f.fetch)).toBeUndefined()
    expect(await misses.lookup('q', 7, f.fetch)).toBeUndefined() // covered by the miss
    expect(await misses.lookup('q', 8, f.fetch)).toEqual({ queue: 'q' })
    expect(f.calls()).toBe(2)
    // Found: the miss is forgotten.
    expect(misses.size).toBe(0)
  })

  it('asks again when the shared answer is older than the request', async () => {
    const misses = new RouteMisses<Route>(() => 0)
    let release: (a: RouteAnswer<Route>) => void = () => {}
    let calls = 0
    const fetch = () => {
      calls++
      if (calls === 1)
        return new Promise<RouteAnswer<Route>>((r) => {
          release = r
        })
      return Promise.resolve({ epoch: 12, route: { queue: 'q' } })
    }
    const early = misses.lookup('q', 0, fetch)
    const late = misses.lookup('q', 11, fetch) // joins the lookup started before its epoch
    release({ epoch: 10, route: undefined })
    expect(await early).toBeUndefined()
    expect(await late).toEqual({ queue: 'q' })
    expect(calls).toBe(2)
  })

  it('asks again once for all the requests the shared answer is older than (a burst on a new queue)', async () => {
    const misses = new RouteMisses<Route>(() => 0)
    const releases: ((a: RouteAnswer<Route>) => void)[] = []
    let calls = 0
    const fetch = () => {
      calls++
      return new Promise<RouteAnswer<Route>>((r) => {
        releases.push(r)
      })
    }
    const early = misses.lookup('q', 0, fetch)
    // 50 requests routed at the queue's creation join the lookup started before it.
    const late = Array.from({ length: 50 }, () => misses.lookup('q', 11, fetch))
    releases[0]?.({ epoch: 10, route: undefined })
    expect(await early).toBeUndefined()
    await new Promise((resolve) => setImmediate(resolve))
    expect(calls).toBe(2) // 51 before: each asked again on its own
    releases[1]?.({ epoch: 12, route: { queue: 'q' } })
    expect(await Promise.all(late)).toEqual(Array(50).fill({ queue: 'q' }))
    expect(calls).toBe(2)
  })

  it('passes a failed lookup on to every waiter and remembers nothing', async () => {
    const misses = new RouteMisses<Route>(() => 0)
    let calls = 0
    const fetch = async (): Promise<RouteAnswer<Route>> => {
      calls++
      throw new Error('no meta leader')
    }
    const both = await Promise.allSettled([misses.lookup('q', 0, fetch), misses.lookup('q', 0, fetch)])
    expect(both.map((r) => r.status)).toEqual(['rejected', 'rejected'])
    expect(calls).toBe(1)
    expect(misses.size).toBe(0)
    await expect(misses.lookup('q', 0, fetch)).rejects.toThrow('no meta leader')
    expect(calls).toBe(2)
  })

  it('remembers at most ROUTE_MISSES_MAX names, forgetting the oldest', async () => {
    const misses = new RouteMisses<Route>(() => 0)
    const f = fetcher(() => ({ epoch: 1, route: undefined }))
    for (let i = 0; i <= ROUTE_MISSES_MAX; i++) await misses.lookup(`q${i}`, 0, f.fetch)
    expect(misses.size).toBe(ROUTE_MISSES_MAX)
    const calls = f.calls()
    await misses.lookup(`q${ROUTE_MISSES_MAX}`, 0, f.fetch) // the newest: still remembered
    expect(f.calls()).toBe(calls)
    await misses.lookup('q0', 0, f.fetch) // the oldest: forgotten, asked again
    expect(f.calls()).toBe(calls + 1)
  })
})
