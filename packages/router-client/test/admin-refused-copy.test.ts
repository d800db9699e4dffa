import { InvalidArgumentError, LimitExceededError, QueueNotFoundError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Admin } from '../src/admin'
import { DEFAULT_ROUTER_OPTIONS, Router } from '../src/router'
import { fail, type Replica, routeOf, stubPool } from './stub-pool'

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
    const router = new Router(
      stubPool(() => routeOf('q', 'M', ['M']), replica),
      {
        ...DEFAULT_ROUTER_OPTIONS,
        servers: ['M'],
        leaderSilenceMs: 0,
      },
    )
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
