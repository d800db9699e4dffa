import { describe, expect, it } from 'vitest'
import { tagLeaseId, untagLeaseId } from './lease-tag'

describe('lease tags', () => {
  it('settle a tagged id only in the partition and queue incarnation that made it', () => {
    const wire = tagLeaseId('15.2', 7, 3)
    expect(wire).toBe('7.3.15.2')
    expect(untagLeaseId(wire, 7, 3)).toBe('15.2')
    expect(untagLeaseId(wire, 8, 3)).toBe('') // the queue was deleted and created again
    expect(untagLeaseId(wire, 7, 4)).toBe('') // another partition
    expect(untagLeaseId(wire, 17, 3)).toBe('') // no prefix match across digits
    expect(untagLeaseId('77.3.15.2', 7, 3)).toBe('')
    expect(untagLeaseId(wire, undefined, 3)).toBe('')
  })

  it('take an untagged (or malformed) id as it is: the partition judges it', () => {
    expect(untagLeaseId('15.2', 7, 3)).toBe('15.2')
    expect(untagLeaseId('bogus', 7, 3)).toBe('bogus')
    expect(untagLeaseId('1.2.3', 7, 3)).toBe('1.2.3')
    expect(untagLeaseId('', 7, 3)).toBe('')
  })
})
