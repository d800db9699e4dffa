import { describe, expect, it } from 'vitest'
import {
  DEFAULT_SCHEDULE,
  FaultKind,
  faultKinds,
  NemesisShared,
  PROCESS_FAULTS,
  partitionSides,
  schedule,
} from './nemesis'

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

  it("gives the leader a partner outside its group when there is one, so that it loses its group's majority", () => {
    const group = ['n1', 'n2', 'n3']
    for (let choice = 0; choice < 8; choice++) {
      const [side, rest] = partitionSides(FaultKind.PartitionDataLeader, 'n1', five, choice, group)
      // n1 alone of its group on its side: the others elect; a partner from it kept n1 leading.
      expect(side?.filter((id) => group.includes(id))).toEqual(['n1'])
      expect(side).toHaveLength(2)
      expect(rest).toHaveLength(3)
    }
    // A group of every node: no partner outside it, as before.
    expect(partitionSides(FaultKind.PartitionMetaLeader, 'n3', five, 1, five)).toEqual([
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
    expect(faultKinds({ disk: true })).toEqual([
      ...PROCESS_FAULTS,
      FaultKind.FillDiskFollower,
      FaultKind.FillDiskLeader,
    ])
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
      FaultKind.FillDiskLeader,
    ])
    const drawn = new Set(schedule(11, 600_000, { ...DEFAULT_SCHEDULE, kinds }).map((s) => s.kind))
    expect(drawn).toEqual(new Set(kinds))
  })
})

describe('NemesisShared', () => {
  it('lets overlapping loops fault different nodes, never one node twice, and one partition at a time', () => {
    const shared = new NemesisShared()
    expect(shared.claim(FaultKind.PauseDataLeader, 'n1')).toBe(true)
    // n1 is paused: the other loop may not kill it, but may kill n2 meanwhile.
    expect(shared.claim(FaultKind.KillDataLeader, 'n1')).toBe(false)
    expect(shared.claim(FaultKind.KillDataFollower, 'n2')).toBe(true)
    // A partition around n3 while n1 is paused and n2 is down; a second partition waits.
    expect(shared.claim(FaultKind.PartitionDataLeader, 'n3')).toBe(true)
    expect(shared.claim(FaultKind.BridgeDataLeader, 'n4')).toBe(false)
    shared.release(FaultKind.PartitionDataLeader, 'n3')
    expect(shared.claim(FaultKind.BridgeDataLeader, 'n4')).toBe(true)
    shared.release(FaultKind.PauseDataLeader, 'n1')
    expect(shared.claim(FaultKind.KillMetaLeader, 'n1')).toBe(true)
  })
})
