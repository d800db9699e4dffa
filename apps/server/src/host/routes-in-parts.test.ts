import { LimitExceededError, type QueueRoute } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { GET_ROUTES_PART, type RoutesAnswer, routesInParts } from './routes-in-parts'

const route = (name: string) => ({ name }) as unknown as QueueRoute

describe('routesInParts', () => {
  it('asks at most GET_ROUTES_PART queues per call, and answers the lowest epoch of the parts', async () => {
    const calls: number[] = []
    const queues = Array.from({ length: 2 * GET_ROUTES_PART + 1 }, (_, i) => `q${i}`)
    const answer = await routesInParts(queues, async (part) => {
      calls.push(part.length)
      return { routeEpoch: 10 - calls.length, routes: part.map(route) }
    })
    expect(calls).toEqual([GET_ROUTES_PART, GET_ROUTES_PART, 1])
    expect(answer.routeEpoch).toBe(7)
    expect(answer.routes.map((r) => (r as unknown as { name: string }).name)).toEqual(queues)
  })

  it('asks again in halves a part the meta leader refuses as too large to answer (LIMIT_EXCEEDED)', async () => {
    // An answer carries the routes of at most 300 of these queues (many partitions and replicas).
    const calls: number[] = []
    const fetch = async (part: readonly string[]): Promise<RoutesAnswer> => {
      calls.push(part.length)
      if (part.length > 300)
        throw new LimitExceededError('the routes take too many bytes: ask for fewer queues')
      return { routeEpoch: 5, routes: part.map(route) }
    }
    const queues = Array.from({ length: GET_ROUTES_PART }, (_, i) => `q${i}`)
    const answer = await routesInParts(queues, fetch)
    expect(answer.routes).toHaveLength(GET_ROUTES_PART)
    expect(calls.filter((n) => n <= 300).reduce((a, b) => a + b, 0)).toBe(GET_ROUTES_PART)
    expect(calls[0]).toBe(GET_ROUTES_PART)
  })

  it('gives up with the refusal for one queue whose route alone is too large, and on any other error at once', async () => {
    const refusal = new LimitExceededError('too large')
    await expect(routesInParts(['q'], async () => Promise.reject(refusal))).rejects.toBe(refusal)
    const calls: number[] = []
    const other = new Error('meta leader unreachable')
    await expect(
      routesInParts(['a', 'b', 'c'], async (part) => {
        calls.push(part.length)
        throw other
      }),
    ).rejects.toBe(other)
    expect(calls).toEqual([3])
  })
})
