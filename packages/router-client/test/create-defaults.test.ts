import { QueueExistsError, QueueNotFoundError, UnavailableError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Admin } from '../src/admin'
import { fail, metaLeaderRouter, type Replica, routeOf } from './stub-pool'

// A createQueue whose first copy's answer is lost (a meta failover) and whose retry finds the
// name taken describes the queue, and answers it when it has the settings asked for. A setting
// given as 0 or '' asks for the cluster's default (as one left out does: the wire's 0), which
// the queue then has: it was taken for other settings, and the call failed QUEUE_EXISTS for the
// queue it had created itself.
describe('a createQueue whose answer was lost, with settings given as their defaults', () => {
  it('answers the queue its lost copy created', async () => {
    const calls: string[] = []
    let config: Record<string, unknown> | undefined
    let copies = 0
    const replica = (): Replica => (method, request, reply) => {
      calls.push(method)
      setImmediate(() => {
        const name = String(request.name)
        if (method === 'describeQueue') {
          if (!config) return fail(reply, new QueueNotFoundError(`queue ${name} does not exist`))
          return reply(null, { ...routeOf(name, 'M', ['M'], config.partitions as number), config })
        }
        if (copies++ > 0) return fail(reply, new QueueExistsError(`queue ${name} already exists`))
        // The meta leader's defaults for 0 and '' (meta-service resolveQueueConfig).
        const asked = request.config as Record<string, unknown>
        config = {
          ...asked,
          partitions: asked.partitions || 4,
          visibilityTimeoutMs: asked.visibilityTimeoutMs || 30_000,
          maxDeliveries: asked.maxDeliveries || 5,
          engine: asked.engine || 'leveldb',
        }
        fail(reply, new UnavailableError('deadline exceeded')) // its answer lost
      })
    }
    const router = metaLeaderRouter(replica)
    try {
      const route = await new Admin(router).createQueue('jobs', {
        partitions: 2,
        visibilityTimeoutMs: 0,
        maxDeliveries: 0,
        engine: '',
      })
      expect(route.partitions).toHaveLength(2)
      expect(calls).toEqual(['createQueue', 'createQueue', 'describeQueue'])
    } finally {
      router.close()
    }
  })
})
