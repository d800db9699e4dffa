import { LimitExceededError, type QueueRoute } from '@mq/protocol'

/** Queues a node asks the routes of per GetRoutes call, at most. */
export const GET_ROUTES_PART = 1_000

/** A GetRoutes answer: the meta state's route epoch and the routes of the queues that exist. */
export interface RoutesAnswer {
  readonly routeEpoch: number
  readonly routes: QueueRoute[]
}

/**
 * The routes of `queues`, asked of `fetch` in parts of at most GET_ROUTES_PART names (the
 * routes of every hosted queue, up to 100,000, passed the 64 MiB a call carries). A part the
 * meta leader refuses as too large to answer (LIMIT_EXCEEDED: 1,000 queues of 256 partitions
 * with five replicas at long addresses pass the 48 MiB an answer carries) is asked again in
 * halves, down to one queue: every refresh of such a node failed. The answer's epoch is the
 * lowest of the parts' (the routes are at least that new).
 */
export async function routesInParts(
  queues: readonly string[],
  fetch: (part: readonly string[]) => Promise<RoutesAnswer>,
): Promise<RoutesAnswer> {
  if (queues.length <= GET_ROUTES_PART) {
    try {
      return await fetch(queues)
    } catch (error) {
      if (!(error instanceof LimitExceededError) || queues.length < 2) throw error
      const half = Math.ceil(queues.length / 2)
      return joined([
        await routesInParts(queues.slice(0, half), fetch),
        await routesInParts(queues.slice(half), fetch),
      ])
    }
  }
  const parts: RoutesAnswer[] = []
  for (let i = 0; i < queues.length; i += GET_ROUTES_PART)
    parts.push(await routesInParts(queues.slice(i, i + GET_ROUTES_PART), fetch))
  return joined(parts)
}

function joined(parts: readonly RoutesAnswer[]): RoutesAnswer {
  let routeEpoch = Number.POSITIVE_INFINITY
  const routes: QueueRoute[] = []
  for (const part of parts) {
    routeEpoch = Math.min(routeEpoch, part.routeEpoch)
    for (const r of part.routes) routes.push(r)
  }
  return { routeEpoch, routes }
}
