import { storedQueueName } from '@mq/data-service'
import { FORMAT_LEVEL_TTL_REDRIVE_LINES } from '@mq/protocol'
import { describe, expect, it } from 'vitest'
import { memoryGroup as group } from './memory-group'
import { TTL_TICKS_PER_ROUND_MAX, TtlTicker } from './ttl-ticker'

describe('TtlTicker', () => {
  it('ticks the led partitions whose oldest ready message outlived the TTL, and only those', async () => {
    const g = await group(3) // applies at 1,000 ms (memory-group's clock)
    const led = storedQueueName('short', 1)
    await g.port.propose({ type: 'open', queue: led, partition: 0, config: { messageTtlMs: 500 } })
    await g.port.propose({ type: 'open', queue: led, partition: 1, config: { messageTtlMs: 500 } })
    await g.open('forever', 2, 0) // no TTL
    const enqueue = (partition: number) =>
      g.port.propose({
        type: 'apply',
        queue: led,
        partition,
        command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] },
      })
    await enqueue(0) // enqueued at 1,000 ms; partition 1 stays empty
    const ticker = new TtlTicker({ groups: () => [g.port] })
    expect(await ticker.round()).toEqual([]) // at 1,000 ms nothing is 500 ms old
    const clock = g.port as { nowMs: () => number }
    clock.nowMs = () => 1_500
    const before = g.proposed.length
    expect(await ticker.round()).toEqual([`3:${led}/0`])
    expect(g.proposed.slice(before)).toEqual([
      { type: 'apply', queue: led, partition: 0, command: { type: 'tick' } },
    ])
  })

  it('leaves groups it does not lead alone, and proposes a bounded number of ticks per round', async () => {
    const follower = await group(4, false)
    await follower.port.propose({ type: 'open', queue: 'q#1', partition: 0, config: { messageTtlMs: 1 } })
    const leader = await group(5)
    for (let p = 0; p < TTL_TICKS_PER_ROUND_MAX + 2; p++) {
      await leader.port.propose({ type: 'open', queue: 'q#1', partition: p, config: { messageTtlMs: 1 } })
      await leader.port.propose({
        type: 'apply',
        queue: 'q#1',
        partition: p,
        command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] },
      })
    }
    ;(leader.port as { nowMs: () => number }).nowMs = () => 2_000
    ;(follower.port as { nowMs: () => number }).nowMs = () => 2_000
    const ticker = new TtlTicker({ groups: () => [follower.port, leader.port] })
    const first = await ticker.round()
    expect(first).toHaveLength(TTL_TICKS_PER_ROUND_MAX)
    expect(first.every((t) => t.startsWith('5:'))).toBe(true)
  })

  it('ticks a partition again in the same round while it is still due (a backlog that outlived its TTL at once)', async () => {
    const g = await group(6)
    await g.port.propose({
      type: 'open',
      queue: 'q#1',
      partition: 0,
      config: { messageTtlMs: 100, expiryBatchMax: 2 },
    })
    await g.port.propose({
      type: 'apply',
      queue: 'q#1',
      partition: 0,
      command: {
        type: 'enqueue',
        messages: Array.from({ length: 5 }, () => ({ body: Uint8Array.of(1), weight: 1 })),
      },
    })
    ;(g.port as { nowMs: () => number }).nowMs = () => 2_000
    // 2 + 2 + 1 deleted: three ticks, then nothing is due.
    expect(await new TtlTicker({ groups: () => [g.port] }).round()).toEqual(['6:q#1/0', '6:q#1/0', '6:q#1/0'])
    expect((await g.port.machine.stats('q#1', 0, 2_000))?.messages).toBe(0)
  })
  it('ticks led partitions whose lease deadline or delayed message is due, without traffic and without a TTL', async () => {
    const g = await group(7) // applies at 1,000 ms
    const clock = g.port as { nowMs: () => number }
    await g.port.propose({ type: 'open', queue: 'q#1', partition: 0, config: { maxDeliveries: 1 } })
    await g.port.propose({ type: 'open', queue: 'q#1', partition: 1, config: {} })
    await g.port.propose({
      type: 'apply',
      queue: 'q#1',
      partition: 0,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(1), weight: 1 }] },
    })
    // The only consumer leases the message's last allowed delivery (until 1,100) and is gone.
    await g.port.propose({
      type: 'apply',
      queue: 'q#1',
      partition: 0,
      command: { type: 'lease', consumerId: 'c', max: 1, visibilityMs: 100 },
    })
    await g.port.propose({
      type: 'apply',
      queue: 'q#1',
      partition: 1,
      command: { type: 'enqueue', messages: [{ body: Uint8Array.of(2), weight: 1, notBeforeMs: 1_150 }] },
    })
    const ticker = new TtlTicker({ groups: () => [g.port] })
    clock.nowMs = () => 1_050
    expect(await ticker.round()).toEqual([]) // nothing due yet
    clock.nowMs = () => 1_200
    expect(await ticker.round()).toEqual(['7:q#1/0', '7:q#1/1'])
    expect(g.port.machine.deadCount('q#1', 0)).toBe(1)
    expect((await g.port.machine.stats('q#1', 1, 1_200))?.weights[0]).toMatchObject({ ready: 1, delayed: 0 })
    expect(await ticker.round()).toEqual([]) // the ticks moved the partitions' due times on
  })

  it('begins a round after the partition where the previous one ran out of ticks', async () => {
    const g = await group(8)
    const config = { messageTtlMs: 100, expiryBatchMax: 1 }
    for (const partition of [0, 1]) {
      await g.port.propose({ type: 'open', queue: 'q#1', partition, config })
      await g.port.propose({
        type: 'apply',
        queue: 'q#1',
        partition,
        command: {
          type: 'enqueue',
          // Partition 0: more outlived messages than one round's ticks delete.
          messages: Array.from({ length: partition === 0 ? 2 * TTL_TICKS_PER_ROUND_MAX : 1 }, () => ({
            body: Uint8Array.of(1),
            weight: 1,
          })),
        },
      })
    }
    ;(g.port as { nowMs: () => number }).nowMs = () => 2_000
    const ticker = new TtlTicker({ groups: () => [g.port] })
    const first = await ticker.round()
    expect(new Set(first)).toEqual(new Set(['8:q#1/0']))
    expect(first).toHaveLength(TTL_TICKS_PER_ROUND_MAX)
    // Partition 1 first, then partition 0 again with what is left of the budget.
    const second = await ticker.round()
    expect(second[0]).toBe('8:q#1/1')
    expect(second.slice(1).every((t) => t === '8:q#1/0')).toBe(true)
    expect((await g.port.machine.stats('q#1', 1, 2_000))?.messages).toBe(0)
  })

  it("deletes an ordered key's line of outlived messages in one tick from format level 19", async () => {
    const ticks = async (formatLevel: number) => {
      const g = await group(8) // applies at 1,000 ms
      await g.port.propose({
        type: 'open',
        queue: 'q#1',
        partition: 0,
        config: { messageTtlMs: 100, orderedKeys: 1 },
      })
      await g.port.propose({
        type: 'apply',
        queue: 'q#1',
        partition: 0,
        command: {
          type: 'enqueue',
          messages: Array.from({ length: 20 }, () => ({ body: Uint8Array.of(1), weight: 1, key: 'k' })),
        },
      })
      ;(g.port as { nowMs: () => number }).nowMs = () => 2_000
      const ticked = await new TtlTicker({ groups: () => [g.port], formatLevel: () => formatLevel }).round()
      expect((await g.port.machine.stats('q#1', 0, 2_000))?.messages).toBe(0)
      return ticked.length
    }
    expect(await ticks(FORMAT_LEVEL_TTL_REDRIVE_LINES)).toBe(1)
    expect(await ticks(FORMAT_LEVEL_TTL_REDRIVE_LINES - 1)).toBe(20) // one per tick below it
  })
})
