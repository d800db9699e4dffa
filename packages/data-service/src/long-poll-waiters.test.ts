import { describe, expect, it } from 'vitest'
import { type LongPoll, LongPollWaiters, type PartitionLook } from './long-poll-waiters'

const LIMITS = { waitersPerPartitionMax: 100, waitersPerGroupMax: 1_000 }
const NEVER = new AbortController().signal

/** Waiters whose look answers `looks[partition]` (spare 0, nothing due, by default) and counts its calls. */
function waitersWith(looks: Record<string, Partial<PartitionLook>> = {}) {
  const asked: string[] = []
  const waiters = new LongPollWaiters((queue, partition) => {
    asked.push(`${queue}/${partition}`)
    return { spare: 0, dueInMs: Number.POSITIVE_INFINITY, ...looks[`${queue}/${partition}`] }
  }, LIMITS)
  return { waiters, asked }
}

function entered(waiters: LongPollWaiters, queue: string, partition: number, wants: number): LongPoll {
  const poll = waiters.enter(queue, partition, wants)
  if (typeof poll === 'string') throw new Error(`refused: ${poll}`)
  return poll
}

/** `n` polls of `queue/0` asleep (for 60 s), each asking for `wants`; `woken()` names those woken, in order. */
function asleep(waiters: LongPollWaiters, queue: string, n: number, wants = 1) {
  const order: number[] = []
  const polls = Array.from({ length: n }, (_, i) => {
    const poll = entered(waiters, queue, 0, wants)
    void poll.sleep(60_000, Number.POSITIVE_INFINITY, NEVER).then(() => order.push(i))
    return poll
  })
  const woken = async () => {
    await settle()
    return order
  }
  return { polls, woken }
}

/** Lets resolved promises' callbacks run. */
const settle = () => new Promise((r) => setImmediate(r))

describe('LongPollWaiters', () => {
  it("does not look at a partition's polls, nor wake them, for a change of another partition", async () => {
    const { waiters, asked } = waitersWith({ 'a/0': { spare: 1_000 }, 'b/0': { spare: 1_000 } })
    const a = asleep(waiters, 'a', 50)
    for (let i = 0; i < 100; i++) waiters.changed('b', 0)
    waiters.changed('c', 3)
    expect(asked).toEqual([]) // b and c have no polls: a map look-up each
    expect(await a.woken()).toEqual([])
    expect(waiters.sleeping('a', 0)).toBe(50)
    for (const p of a.polls) p.close()
  })

  it('wakes, oldest first, as many polls as the spare messages could serve; one when it is unknown', async () => {
    const looks: Record<string, Partial<PartitionLook>> = { 'a/0': { spare: 3 } }
    const { waiters } = waitersWith(looks)
    const ones = asleep(waiters, 'a', 10, 1)
    waiters.changed('a', 0)
    expect(await ones.woken()).toEqual([0, 1, 2])
    expect(waiters.sleeping('a', 0)).toBe(7)
    looks['a/0'] = { spare: Number.POSITIVE_INFINITY }
    waiters.changed('a', 0)
    expect(await ones.woken()).toEqual([0, 1, 2, 3])
    looks['a/0'] = { spare: 0 }
    waiters.changed('a', 0)
    expect(await ones.woken()).toHaveLength(4)
    for (const p of ones.polls) p.close()
    // Polls asking for 2 each: 3 spare messages serve two of them.
    looks['a/0'] = { spare: 3 }
    const twos = asleep(waiters, 'a', 5, 2)
    waiters.changed('a', 0)
    expect(await twos.woken()).toEqual([0, 1])
    for (const p of twos.polls) p.close()
  })

  it('ends a sleep at once for a change between mark and sleep, whoever else it woke', async () => {
    const { waiters } = waitersWith({ 'a/0': { spare: 1 } })
    const others = asleep(waiters, 'a', 3)
    const busy = entered(waiters, 'a', 0, 1)
    busy.mark() // then it leases; the change lands meanwhile and wakes one poll asleep
    waiters.changed('a', 0)
    expect(await others.woken()).toEqual([0])
    let ended = false
    void busy.sleep(60_000, Number.POSITIVE_INFINITY, NEVER).then(() => {
      ended = true
    })
    await settle()
    expect(ended).toBe(true)
    // Marked after the change: it sleeps.
    busy.mark()
    let again = false
    void busy.sleep(60_000, Number.POSITIVE_INFINITY, NEVER).then(() => {
      again = true
    })
    await settle()
    expect(again).toBe(false)
    busy.close() // a closed poll is not woken again, and leaves its partition
    for (const p of others.polls) p.close()
    expect(waiters.open('a', 0)).toBe(0)
  })

  it('hands the messages a leaving poll left on to the polls asleep', async () => {
    const looks: Record<string, Partial<PartitionLook>> = { 'a/0': { spare: 0 } }
    const { waiters } = waitersWith(looks)
    const a = asleep(waiters, 'a', 4)
    waiters.handOn('a', 0)
    expect(await a.woken()).toEqual([])
    looks['a/0'] = { spare: 2 }
    waiters.handOn('a', 0)
    expect(await a.woken()).toEqual([0, 1])
    for (const p of a.polls) p.close()
  })

  it("wakes one poll at its partition's due time, not every poll", async () => {
    const looks: Record<string, Partial<PartitionLook>> = {}
    const { waiters } = waitersWith(looks)
    const order: number[] = []
    const polls = Array.from({ length: 20 }, (_, i) => {
      const poll = entered(waiters, 'a', 0, 1)
      void poll.sleep(60_000, 20, NEVER).then(() => order.push(i))
      return poll
    })
    // Due: a lease may find something (unknown how much).
    looks['a/0'] = { spare: Number.POSITIVE_INFINITY }
    const started = performance.now()
    while (order.length === 0 && performance.now() - started < 2_000)
      await new Promise((r) => setTimeout(r, 5))
    await new Promise((r) => setTimeout(r, 50))
    expect(order).toEqual([0])
    expect(waiters.sleeping('a', 0)).toBe(19)
    for (const p of polls) p.close()
  })

  it('refuses polls past the limits per partition and per group; a partition with no poll left is forgotten', async () => {
    const { waiters, asked } = waitersWith({ 'a/0': { spare: 5 } })
    const small = new LongPollWaiters(() => ({ spare: 5, dueInMs: Number.POSITIVE_INFINITY }), {
      waitersPerPartitionMax: 2,
      waitersPerGroupMax: 3,
    })
    const a1 = entered(small, 'a', 0, 1)
    entered(small, 'a', 0, 1)
    expect(small.enter('a', 0, 1)).toBe('partition')
    const b1 = entered(small, 'b', 0, 1)
    expect(small.enter('c', 0, 1)).toBe('group')
    expect(small.size).toBe(3)
    b1.close()
    b1.close() // idempotent
    expect(small.size).toBe(2)
    expect(typeof small.enter('c', 0, 1)).toBe('object')
    a1.close()
    expect(small.open('a', 0)).toBe(1)
    // Forgotten once its last poll is closed: a change of it looks at nothing.
    const poll = entered(waiters, 'a', 0, 1)
    void poll.sleep(60_000, Number.POSITIVE_INFINITY, NEVER)
    waiters.changed('a', 0)
    await settle()
    poll.close()
    const before = asked.length
    waiters.changed('a', 0)
    waiters.handOn('a', 0)
    expect(asked.length).toBe(before)
    expect(waiters.size).toBe(0)
  })

  it("counts its open polls into a tally that other groups' waiters share", () => {
    const tally = { open: 0 }
    const look = () => ({ spare: 0, dueInMs: Number.POSITIVE_INFINITY })
    const limits = { waitersPerPartitionMax: 1, waitersPerGroupMax: 10 }
    const one = new LongPollWaiters(look, limits, tally)
    const two = new LongPollWaiters(look, limits, tally)
    const a = entered(one, 'a', 0, 1)
    const b = entered(two, 'a', 0, 1)
    entered(two, 'b', 0, 1)
    expect(one.enter('a', 0, 1)).toBe('partition') // a refused poll is not counted
    expect(tally.open).toBe(3)
    a.close()
    a.close() // idempotent
    b.close()
    expect(tally.open).toBe(1)
  })

  it('ends a sleep after its ms, or when its signal aborts', async () => {
    const { waiters } = waitersWith()
    const poll = entered(waiters, 'a', 0, 1)
    const started = performance.now()
    await poll.sleep(30, Number.POSITIVE_INFINITY, NEVER)
    expect(performance.now() - started).toBeGreaterThanOrEqual(25)
    const c = new AbortController()
    const sleeping = poll.sleep(60_000, Number.POSITIVE_INFINITY, c.signal)
    expect(waiters.sleeping('a', 0)).toBe(1)
    c.abort()
    await sleeping
    expect(waiters.sleeping('a', 0)).toBe(0)
    poll.close()
  })
})
