import { describe, expect, it } from 'vitest'
import { FaultKind, partitionSides, schedule } from './nemesis'

describe('partitionSides', () => {
  const five = ['n1', 'n2', 'n3', 'n4', 'n5']

  it('puts the leader in a minority of 1 of 3 and 2 of 5', () => {
    expect(partitionSides(FaultKind.PartitionDataLeader, 'n2', ['n1', 'n2', 'n3'], 0)).toEqual([
      ['n2'],
      ['n1', 'n3'],
    ])
    expect(partitionSides(FaultKind.PartitionMetaLeader, 'n3', five, 1)).toEqual([
      ['n3', 'n2'],
      ['n4', 'n5', 'n1'],
    ])
  })

  it('leaves one node out of both sides of a bridge', () => {
    expect(partitionSides(FaultKind.BridgeDataLeader, 'n1', ['n1', 'n2', 'n3'], 1)).toEqual([['n1'], ['n2']])
    const sides = partitionSides(FaultKind.BridgeDataLeader, 'n4', five, 2)
    expect(sides).toEqual([
      ['n4', 'n5'],
      ['n1', 'n2'],
    ])
    // n3 is the bridge: in no side.
    expect(sides.flat()).not.toContain('n3')
  })

  it('replays the same schedule for a seed', () => {
    expect(schedule(5, 30_000)).toEqual(schedule(5, 30_000))
    expect(schedule(5, 30_000)).not.toEqual(schedule(6, 30_000))
  })
})
