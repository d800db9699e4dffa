import { type LeasedMessage, UnavailableError } from '@mq/protocol'
import { describe, expect, it, vi } from 'vitest'
import { Admin, LISTED_PARTITIONS_AT_ONCE, STATS_PARTITIONS_AT_ONCE } from './admin'
import type { Router } from './router'

const PARTITIONS = 20

/**
 * A router stand-in: `PARTITIONS` partitions, each one's ListReady answering one message after
 * a number of event-loop turns that falls with the partition (so later partitions finish
 * first); counts the calls under way. `failing` partitions fail instead.
 */
function fakeRouter(failing: readonly number[] = []) {
  const seen = { inFlight: 0, inFlightMax: 0, answered: 0, started: [] as number[] }
  const queue = {
    listReady(
      request: { target: { partition: number } },
      _metadata: unknown,
      _options: unknown,
      callback: (error: null, response: { messages: LeasedMessage[] }) => void,
    ) {
      const partition = request.target.partition
      seen.started.push(partition)
      seen.inFlight++
      seen.inFlightMax = Math.max(seen.inFlightMax, seen.inFlight)
      let turns = PARTITIONS - partition
      const step = () => {
        if (turns-- > 0) return void setImmediate(step)
        seen.inFlight--
        seen.answered++
        const body = new Uint8Array(1024).fill(partition)
        callback(null, { messages: [{ id: partition, body } as unknown as LeasedMessage] })
      }
      step()
      return { cancel: () => {} }
    },
  }
  const router = {
    route: async () => ({
      partitions: Array.from({ length: PARTITIONS }, (_, partition) => ({ partition })),
    }),
    partition: async <T>(
      name: string,
      partition: number,
      operation: (c: { queue: typeof queue }, target: object, attemptMs: number) => Promise<T>,
    ): Promise<T> => {
      if (failing.includes(partition)) throw new UnavailableError(`partition ${partition} has no leader`)
      return operation({ queue }, { queue: name, partition, routeEpoch: 1 }, 1_000)
    },
  }
  return { admin: new Admin(router as unknown as Router), seen }
}

describe('Admin.peek', () => {
  it('reads LISTED_PARTITIONS_AT_ONCE partitions at a time and lists them in partition order', async () => {
    const { admin, seen } = fakeRouter()
    const listed = await admin.peek('jobs', 10)
    expect(seen.inFlightMax).toBe(LISTED_PARTITIONS_AT_ONCE)
    expect(listed.map((m) => [m.partition, m.id])).toEqual(
      Array.from({ length: PARTITIONS }, (_, p) => [p, p]),
    )
  })

  it('with map, turns each message as its partition answers and keeps only what map returns', async () => {
    const { admin, seen } = fakeRouter()
    const answeredAtMap: number[] = []
    const listed = await admin.peek('jobs', 10, {
      map: (m) => {
        answeredAtMap.push(seen.answered)
        return { partition: m.partition, head: m.body.slice(0, 2) }
      },
    })
    expect(listed).toEqual(
      Array.from({ length: PARTITIONS }, (_, p) => ({ partition: p, head: Uint8Array.of(p, p) })),
    )
    // Each answer is mapped when it arrives, not once every partition has answered.
    expect([...answeredAtMap].sort((a, b) => a - b)).toEqual(
      Array.from({ length: PARTITIONS }, (_, i) => i + 1),
    )
  })

  it('fails the peek when map throws', async () => {
    const { admin } = fakeRouter()
    await expect(
      admin.peek('jobs', 10, {
        map: () => {
          throw new Error('no room')
        },
      }),
    ).rejects.toThrow('no room')
  })

  it('fails with the first partition that fails, and starts no partition after it', async () => {
    const { admin, seen } = fakeRouter([0])
    await expect(admin.peek('jobs', 10)).rejects.toThrow(/partition 0 has no leader/)
    // Partition 0 failed before any ListReady answered: once those under way are done, no other ran.
    await vi.waitFor(() => expect(seen.inFlight).toBe(0))
    expect(seen.started).toEqual([1, 2, 3, 4, 5, 6, 7])
  })
})

describe('Admin.queueStats', () => {
  it('asks STATS_PARTITIONS_AT_ONCE partitions at a time, answering in partition order', async () => {
    const partitions = 100
    const seen = { inFlight: 0, inFlightMax: 0 }
    const queue = {
      stats(
        request: { target: { partition: number } },
        _metadata: unknown,
        _options: unknown,
        callback: (error: null, response: { partition: number }) => void,
      ) {
        seen.inFlight++
        seen.inFlightMax = Math.max(seen.inFlightMax, seen.inFlight)
        setImmediate(() => {
          seen.inFlight--
          callback(null, { partition: request.target.partition })
        })
        return { cancel: () => {} }
      },
    }
    const router = {
      route: async () => ({
        partitions: Array.from({ length: partitions }, (_, partition) => ({ partition })),
      }),
      partition: async <T>(
        name: string,
        partition: number,
        operation: (c: { queue: typeof queue }, target: object, attemptMs: number) => Promise<T>,
      ): Promise<T> => operation({ queue }, { queue: name, partition, routeEpoch: 1 }, 1_000),
    }
    const stats = await new Admin(router as unknown as Router).queueStats('jobs')
    expect(seen.inFlightMax).toBe(STATS_PARTITIONS_AT_ONCE)
    expect(stats.map((s) => s.partition)).toEqual(Array.from({ length: partitions }, (_, p) => p))
  })
})

describe('Admin.createToken', () => {
  /** A router whose meta calls answer as a meta leader that does (or, an older version, does not) keep lifetimes. */
  function metaRouter(keepsLifetimes: boolean) {
    const calls: string[] = []
    const router = {
      meta: async (_pick: unknown, request: { name: string; ttlMs?: number }) => {
        if (request.ttlMs === undefined) {
          calls.push(`delete:${request.name}`)
          return {}
        }
        calls.push(`create:${request.name}:${request.ttlMs}`)
        const expiresAtMs = keepsLifetimes && request.ttlMs > 0 ? 1_000 + request.ttlMs : 0
        return { name: request.name, token: 'mq_x', expiresAtMs }
      },
    }
    return { admin: new Admin(router as unknown as Router), calls }
  }

  it('returns the expiry the cluster set; no lifetime means none', async () => {
    const { admin, calls } = metaRouter(true)
    expect(await admin.createToken('ci', ['admin'], { ttlMs: 60_000 })).toEqual({
      name: 'ci',
      token: 'mq_x',
      expiresAtMs: 61_000,
    })
    expect((await admin.createToken('app', ['admin'])).expiresAtMs).toBe(0)
    expect(calls).toEqual(['create:ci:60000', 'create:app:0'])
    await expect(admin.createToken('bad', ['admin'], { ttlMs: -1 })).rejects.toThrow(RangeError)
  })

  it('deletes a token an older meta leader made without its lifetime, and says so', async () => {
    const { admin, calls } = metaRouter(false)
    await expect(admin.createToken('ci', ['admin'], { ttlMs: 60_000 })).rejects.toThrow(
      /made token ci without its lifetime .* so it was deleted again/,
    )
    expect(calls).toEqual(['create:ci:60000', 'delete:ci'])
  })
})
