import { describe, expect, it } from 'vitest'
import { DEFAULT_SCHEDULE, FaultKind, faultKinds, PROCESS_FAULTS, partitionSides, schedule } from './nemesis'

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

describe('faultKinds', () => {
  it('draws one mode alone as before the modes combined: the process faults, then its own', () => {
    expect(faultKinds({})).toEqual(PROCESS_FAULTS)
    expect(faultKinds({ netns: true })).toEqual([
      ...PROCESS_FAULTS,
      FaultKind.PartitionDataLeader,
      FaultKind.PartitionMetaLeader,
      FaultKind.BridgeDataLeader,
    ])
    expect(faultKinds({ disk: true })).toEqual([...PROCESS_FAULTS, FaultKind.FillDiskFollower])
  })

  it('combines modes: partitions, a damaged follower and full disks in one schedule', () => {
    const kinds = faultKinds({ netns: true, corrupt: true, disk: true })
    expect(kinds).toEqual([
      ...PROCESS_FAULTS,
      FaultKind.PartitionDataLeader,
      FaultKind.PartitionMetaLeader,
      FaultKind.BridgeDataLeader,
      FaultKind.CorruptDataFollower,
      FaultKind.FillDiskFollower,
    ])
    const drawn = new Set(schedule(11, 600_000, { ...DEFAULT_SCHEDULE, kinds }).map((s) => s.kind))
    expect(drawn).toEqual(new Set(kinds))
  })
})
