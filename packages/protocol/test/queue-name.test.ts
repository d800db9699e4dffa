import { describe, expect, it } from 'vitest'
import { QUEUE_NAME_LENGTH_MAX, queueNameProblem } from '../src/queue-name'

describe('queueNameProblem', () => {
  it.each(['jobs', 'a', 'orders.v2', 'emails_high-prio', '9lives'])('accepts %s', (n) => {
    expect(queueNameProblem(n)).toBeUndefined()
  })
  it('rejects an empty name', () => {
    expect(queueNameProblem('')).toMatch(/empty/)
  })
  it('rejects an overlong name', () => {
    expect(queueNameProblem('x'.repeat(QUEUE_NAME_LENGTH_MAX + 1))).toMatch(/limit is 200/)
  })
  it.each(['-jobs', 'a b', 'jobs/1', 'ümlaut', '.hidden'])('rejects %s and says why', (n) => {
    expect(queueNameProblem(n)).toMatch(/may hold only/)
  })
})
