import { storedQueueName } from '@mq/data-service'
import { FORMAT_LEVEL, FORMAT_LEVEL_DROP_IMPORT } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { memoryGroup as group } from './memory-group'
import { ORPHAN_DROPS_PER_SWEEP_MAX, OrphanSweeper } from './orphan-sweeper'

describe('OrphanSweeper', () => {
  it('drops the partitions of deleted queues and earlier incarnations, with their keys', async () => {
    const g = await group(3)
    await g.open('jobs', 1, 0)
    await g.open('gone', 2, 0)
    await g.open('gone', 2, 1)
    await g.open('again', 3, 0)
    await g.open('again', 4, 0)
    const keysBefore = await g.keys()
    const asked: string[][] = []
    const sweeper = new OrphanSweeper({
      groups: () => [g.port],
      liveQueues: async (names) => {
        asked.push([...names].sort())
        return new Map([
          ['jobs', 1],
          ['again', 4],
        ])
      },
      formatLevel: () => FORMAT_LEVEL,
    })
    const dropped = await sweeper.sweep()
    expect(asked).toEqual([['again', 'gone', 'jobs']])
    expect(dropped.map((d) => `${d.partition.queue}/${d.partition.index}`).sort()).toEqual([
      'again#3/0',
      'gone#2/0',
      'gone#2/1',
    ])
    expect(dropped.every((d) => !d.importing)).toBe(true)
    expect(g.port.machine.partitionIds()).toEqual(['again#4/0', 'jobs#1/0'])
    expect(await g.keys()).toBeLessThan(keysBefore)
    // A second sweep finds nothing more.
    expect(await sweeper.sweep()).toEqual([])
  })

  it('leaves groups it does not lead alone, and a failed meta read changes nothing', async () => {
    const follower = await group(4, false)
    await follower.open('gone', 9, 0)
    const leader = await group(5)
    await leader.open('gone', 9, 0)
    const before = leader.proposed.length
    const failing = new OrphanSweeper({
      groups: () => [follower.port, leader.port],
      liveQueues: async () => {
        throw new Error('no meta leader')
      },
      formatLevel: () => FORMAT_LEVEL,
    })
    expect(await failing.sweep()).toEqual([])
    expect(leader.proposed.length).toBe(before)
    const sweeper = new OrphanSweeper({
      groups: () => [follower.port, leader.port],
      liveQueues: async () => new Map(),
      formatLevel: () => FORMAT_LEVEL,
    })
    expect((await sweeper.sweep()).map((d) => d.groupId)).toEqual([5])
    expect(follower.port.machine.partitionIds()).toEqual(['gone#9/0'])
  })

  it(`drops the unfinished imports of deleted queues from format level ${FORMAT_LEVEL_DROP_IMPORT}`, async () => {
    const g = await group(7)
    const importChunk = (queue: string, queueId: number, partition: number) =>
      g.port.propose({
        type: 'import',
        queue: storedQueueName(queue, queueId),
        partition,
        moveId: partition + 1,
        session: 's',
        seq: 0,
        last: false,
        config: {},
        pairs: [[Uint8Array.of(1), Uint8Array.of(2)]],
      })
    await importChunk('gone', 2, 0)
    await importChunk('moving', 3, 1)
    const keysBefore = await g.keys()
    let level = FORMAT_LEVEL_DROP_IMPORT - 1
    const sweeper = new OrphanSweeper({
      groups: () => [g.port],
      liveQueues: async () => new Map([['moving', 3]]),
      formatLevel: () => level,
    })
    // Below the level a replica of an earlier version would refuse the drop: nothing is proposed.
    expect(await sweeper.sweep()).toEqual([])
    expect(g.port.machine.importIds()).toEqual(['gone#2/0', 'moving#3/1'])
    level = FORMAT_LEVEL_DROP_IMPORT
    const dropped = await sweeper.sweep()
    expect(dropped).toEqual([{ groupId: 7, partition: { queue: 'gone#2', index: 0 }, importing: true }])
    // The live queue's move goes on; the deleted one's copy is deleted.
    expect(g.port.machine.importIds()).toEqual(['moving#3/1'])
    await g.port.machine.swept()
    expect(await g.keys()).toBeLessThan(keysBefore)
    expect(await sweeper.sweep()).toEqual([])
  })

  it('leaves alone a partition opened or imported while it reads the meta group', async () => {
    // A new queue's partition opened, and a move into the group completed, during the read:
    // their queues were not asked about, and must not count as deleted (both were dropped,
    // the moved one with every message, before the candidates were taken once).
    const source = await group(1)
    await source.open('moved', 5, 0)
    const g = await group(2)
    await g.open('old', 1, 0)
    const sweeper = new OrphanSweeper({
      groups: () => [g.port],
      liveQueues: async (names) => {
        await g.open('fresh', 2, 0)
        const { pairs } = await source.port.machine.exportChunk('moved#5', 0, undefined, 1 << 20)
        const chunk = {
          type: 'import',
          queue: 'moved#5',
          partition: 0,
          moveId: 7,
          session: 's1',
          config: {},
        } as const
        await g.port.propose({ ...chunk, seq: 0, last: false, pairs })
        expect(await g.port.propose({ ...chunk, seq: 1, last: true, pairs: [] })).toMatchObject({
          type: 'imported',
          complete: true,
        })
        return new Map(names.map((n) => [n, 1]))
      },
      formatLevel: () => FORMAT_LEVEL,
    })
    expect(await sweeper.sweep()).toEqual([])
    expect(g.port.machine.partitionIds().sort()).toEqual(['fresh#2/0', 'moved#5/0', 'old#1/0'])
  })

  it(`drops at most ${ORPHAN_DROPS_PER_SWEEP_MAX} partitions per sweep`, async () => {
    const g = await group(6)
    for (let p = 0; p < ORPHAN_DROPS_PER_SWEEP_MAX + 3; p++) await g.open('gone', 1, p)
    const sweeper = new OrphanSweeper({
      groups: () => [g.port],
      liveQueues: async () => new Map(),
      formatLevel: () => FORMAT_LEVEL,
    })
    expect((await sweeper.sweep()).length).toBe(ORPHAN_DROPS_PER_SWEEP_MAX)
    expect((await sweeper.sweep()).length).toBe(3)
    expect(g.port.machine.partitionIds()).toEqual([])
  })
})
