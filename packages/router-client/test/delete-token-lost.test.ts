import { InvalidArgumentError, LimitExceededError, UnavailableError } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { Admin } from '../src/admin'
import { fail, metaLeaderRouter, type Replica } from './stub-pool'

describe('a deleteToken whose answer was lost', () => {
  /**
   * A meta leader holding `tokens`: the first deleteToken copy is `first` (its answer lost after
   * the token went, or refused overloaded: nothing proposed); later copies answer as the
   * token registry does (InvalidArgumentError for a name it does not hold).
   */
  const metaLeader = (tokens: Set<string>, first: 'lost' | 'refused') => {
    const calls: string[] = []
    let copies = 0
    const replica = (): Replica => (method, request, reply) => {
      calls.push(method)
      setImmediate(() => {
        const name = String(request.name)
        if (copies++ === 0 && first === 'refused')
          return fail(reply, new LimitExceededError('group 0 is overloaded: too many proposals pending'))
        if (!tokens.delete(name)) return fail(reply, new InvalidArgumentError(`no token is named ${name}`))
        if (copies === 1) return fail(reply, new UnavailableError('deadline exceeded')) // its answer lost
        reply(null, {})
      })
    }
    const router = metaLeaderRouter(replica)
    return { admin: new Admin(router), router, calls }
  }

  it('deletes the token, the retry finding it gone (an earlier copy deleted it)', async () => {
    const tokens = new Set(['ci'])
    const { admin, router, calls } = metaLeader(tokens, 'lost')
    try {
      // Until an audit it failed "no token is named ci" for the token it had deleted.
      await admin.deleteToken('ci')
      expect(tokens.has('ci')).toBe(false)
      expect(calls).toEqual(['deleteToken', 'deleteToken'])
      // Asked once, an unknown token is refused.
      await expect(admin.deleteToken('ci')).rejects.toThrow('no token is named ci')
    } finally {
      router.close()
    }
  })

  it('refuses a token that never existed when the first copy was refused (nothing proposed)', async () => {
    const { admin, router, calls } = metaLeader(new Set(), 'refused')
    try {
      await expect(admin.deleteToken('typo')).rejects.toThrow('no token is named typo')
      expect(calls).toEqual(['deleteToken', 'deleteToken'])
    } finally {
      router.close()
    }
  })
})
