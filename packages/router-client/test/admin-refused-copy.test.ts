import {
  InvalidArgumentError,
  LimitExceededError,
  QueueExistsError,
  QueueNotFoundError,
  UnavailableError,
} from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Admin } from '../src/admin'
import { fail, metaLeaderRouter, type Replica, routeOf } from './stub-pool'

describe('an admin removal one copy of which the meta leader refused', () => {
  it('fails as the one copy applied says when the first was refused overloaded (LIMIT_EXCEEDED: nothing proposed)', async () => {
    const calls: string[] = []
    // The meta leader is overloaded at the first copy (its proposals queue is full: nothing is
    // proposed); the retry finds neither the node nor the queue, which never existed.
    const seen = new Set<string>()
    const replica = (): Replica => (method, request, reply) => {
      calls.push(method)
      setImmediate(() => {
        if (!seen.has(method)) {
          seen.add(method)
          fail(reply, new LimitExceededError('group 0 is overloaded: too many proposals pending'))
        } else if (method === 'removeNode')
          fail(reply, new InvalidArgumentError(`node ${String(request.nodeId)} is not registered`))
        else fail(reply, new QueueNotFoundError(`queue ${String(request.name)} does not exist`))
      })
    }
    const router = metaLeaderRouter(replica)
    const admin = new Admin(router)
    try {
      await expect(admin.removeNode('n9')).rejects.toThrow('node n9 is not registered')
      await expect(admin.deleteQueue('typo')).rejects.toBeInstanceOf(QueueNotFoundError)
      expect(calls).toEqual(['removeNode', 'removeNode', 'deleteQueue', 'deleteQueue'])
    } finally {
      router.close()
    }
  })
})

describe('a createQueue whose answer was lost', () => {
  /**
   * A meta leader whose first createQueue copy is lost (`lost`: the queue then has `partitions`,
   * made by that copy or by another client meanwhile) or refused overloaded (`refused`: the
   * queue existed before, with `partitions`).
   */
  const metaLeader = (first: 'lost' | 'refused', partitions: number | undefined) => {
    const calls: string[] = []
    let created = first === 'refused' ? partitions : undefined
    let copies = 0
    const replica = (): Replica => (method, request, reply) => {
      calls.push(method)
      setImmediate(() => {
        const name = String(request.name)
        if (method === 'describeQueue') {
          if (created === undefined)
            return fail(reply, new QueueNotFoundError(`queue ${name} does not exist`))
          return reply(null, { ...routeOf(name, 'M', ['M'], created), config: { partitions: created } })
        }
        if (method !== 'createQueue') return fail(reply, new UnavailableError('?'))
        if (copies++ === 0) {
          if (first === 'refused')
            return fail(reply, new LimitExceededError('group 0 is overloaded: too many proposals pending'))
          created = partitions
          return fail(reply, new UnavailableError('deadline exceeded')) // its answer lost
        }
        fail(reply, new QueueExistsError(`queue ${name} already exists`))
      })
    }
    const router = metaLeaderRouter(replica)
    return { admin: new Admin(router), router, calls }
  }

  it('answers the queue its lost copy created, the retry finding the name taken', async () => {
    const { admin, router, calls } = metaLeader('lost', 3)
    try {
      const route = await admin.createQueue('jobs', { partitions: 3 })
      expect(route.partitions).toHaveLength(3)
      expect(calls).toEqual(['createQueue', 'createQueue', 'describeQueue'])
    } finally {
      router.close()
    }
  })

  it("fails QUEUE_EXISTS for another's queue: other settings, or no copy that may have made it", async () => {
    // Another client made it meanwhile, with other settings.
    const other = metaLeader('lost', 8)
    try {
      await expect(other.admin.createQueue('jobs', { partitions: 3 })).rejects.toThrow(
        'queue jobs already exists, with partitions 8, not 3',
      )
    } finally {
      other.router.close()
    }
    // The first copy refused (nothing proposed), the name taken before: no describe.
    const taken = metaLeader('refused', 3)
    try {
      await expect(taken.admin.createQueue('jobs', { partitions: 3 })).rejects.toBeInstanceOf(
        QueueExistsError,
      )
      expect(taken.calls).toEqual(['createQueue', 'createQueue'])
    } finally {
      taken.router.close()
    }
  })
})
