import { describe, expect, it } from 'vitest'
import { replicationResult, replicationSummary } from './replication-summary'

describe('replication wording', () => {
  it('words the factor, one replica alone, and none recorded', () => {
    expect(replicationSummary(3)).toBe('3 replicas per data group')
    expect(replicationSummary(1)).toBe('1 replica per data group')
    expect(replicationSummary(0)).toBe('each meta leader\'s own "replicationFactor" (config file)')
  })

  it('words an answer, naming the factor before only when it differs', () => {
    const tail = 'data groups grow or shrink to 5 replicas, one at a time, as live nodes allow'
    expect(replicationResult({ previous: 3, factor: 5 })).toBe(`replication factor 5 (was 3): ${tail}`)
    expect(replicationResult({ previous: 5, factor: 5 })).toBe(`replication factor 5: ${tail}`)
    expect(replicationResult({ previous: 0, factor: 5 })).toBe(`replication factor 5: ${tail}`)
    expect(replicationResult({ previous: 3, factor: 1 })).toBe(
      'replication factor 1 (was 3): data groups grow or shrink to 1 replica, one at a time, as live nodes allow',
    )
  })
})
