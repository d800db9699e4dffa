import { describe, expect, it } from 'vitest'
import {
  orphanPartitions,
  parsePartitionId,
  parseStoredQueueName,
  partitionId,
  storedQueueName,
} from './partition-key'

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

describe('stored queue names and orphans', () => {
  it('round-trips a stored name, also with # in the queue name', () => {
    expect(parseStoredQueueName(storedQueueName('jobs', 7))).toEqual({ queue: 'jobs', queueId: 7 })
    expect(parseStoredQueueName('a#b#12')).toEqual({ queue: 'a#b', queueId: 12 })
    for (const bad of ['jobs', '#3', 'jobs#', 'jobs#0', 'jobs#07', 'jobs#x']) {
      expect(parseStoredQueueName(bad)).toBeUndefined()
    }
  })

  it('finds the partitions of deleted queues and of earlier incarnations, nothing else', () => {
    const held = ['jobs#1/0', 'jobs#1/1', 'gone#2/0', 'again#3/0', 'again#5/0', 'not-stored/0', 'junk']
    const live = new Map([
      ['jobs', 1],
      ['again', 5],
    ])
    expect(orphanPartitions(held, live)).toEqual([
      { queue: 'gone#2', index: 0 },
      { queue: 'again#3', index: 0 },
    ])
    expect(orphanPartitions(held.slice(0, 2), live)).toEqual([])
  })
})
