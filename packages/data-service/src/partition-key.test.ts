import { describe, expect, it } from 'vitest'
import { parsePartitionId, partitionId } from './partition-key'

describe('partition ids', () => {
  it('round-trips', () => {
    const ref = { queue: 'jobs', index: 3 }
    expect(partitionId(ref)).toBe('jobs/3')
    expect(parsePartitionId(partitionId(ref))).toEqual(ref)
  })
  it('rejects malformed ids', () => {
    for (const bad of ['jobs', '/3', 'jobs/', 'jobs/03', 'jobs/-1', 'jobs/x']) {
      expect(parsePartitionId(bad)).toBeUndefined()
    }
  })
  it('rejects a negative index', () => {
    expect(() => partitionId({ queue: 'q', index: -1 })).toThrow(RangeError)
  })
})
