import { describe, expect, it } from 'vitest'
import { type Message, MessageType, message } from '../src/index'
import { Harness } from './harness'

/**
 * Three voters a (leading), b and c: c misses three entries, a compacts them, and the snapshot
 * chunks sent to c while a beats four times carry `meta` over their own. Returns c's drop count
 * of malformed messages from before.
 */
function snapshotToCAs(meta: Record<string, unknown>) {
  const h = new Harness(['a', 'b', 'c'])
  h.elect('a')
  h.isolate('c')
  for (let i = 0; i < 3; i++) h.propose('a', `x${i}`)
  h.compact('a')
  h.heal()
  h.filter = (m: Message) =>
    m.type === MessageType.Snap && m.to === 'c'
      ? { ...m, snapshot: { ...m.snapshot!, meta: { ...m.snapshot!.meta, ...meta } } }
      : true
  const c = h.raw('c')
  const dropped = c.stats.droppedMalformed
  for (let i = 0; i < 4; i++) h.heartbeat('a')
  h.filter = null
  return { h, c, dropped }
}

// Replies a correct peer never sends (a bug or corruption elsewhere): counted as malformed and
// dropped, never taken as a quorum's word, and never thrown out of step(). Found by an audit.
describe('replies past what the leader sent', () => {
  it('an AppResp past the leader log is dropped: nothing commits that only the leader holds, nothing throws', () => {
    const h = new Harness(['a', 'b', 'c'])
    h.elect('a')
    h.propose('a', 'x')
    h.isolate('a')
    const index = h.propose('a', 'only-on-a')
    const a = h.raw('a')
    const { term, commit, lastIndex } = a.status()
    const dropped = a.stats.droppedMalformed
    expect(() =>
      a.step(message({ type: MessageType.AppResp, from: 'b', to: 'a', term, index: lastIndex + 5 })),
    ).not.toThrow()
    expect(a.stats.droppedMalformed).toBe(dropped + 1)
    expect(a.status().commit).toBe(commit)
    expect(commit).toBeLessThan(index)
    expect(a.matchIndex('b')).toBeLessThanOrEqual(lastIndex)
    expect(() => h.settle()).not.toThrow()
  })

  it('a HeartbeatResp acknowledging a read never asked for confirms no read of a deposed leader', () => {
    const h = new Harness(['a', 'b', 'c'], { preVote: false, checkQuorum: false }, ['l'])
    h.elect('a')
    h.propose('a', 'x')
    const a = h.raw('a')
    a.step(
      message({ type: MessageType.HeartbeatResp, from: 'b', to: 'a', term: a.status().term, context: 1000 }),
    )
    // a is cut off from the voters (the learner still reaches it); b and c elect b and write.
    h.cut('a', 'b')
    h.cut('a', 'c')
    h.cut('b', 'l')
    h.cut('c', 'l')
    h.elect('b')
    const w = h.propose('b', 'new')
    expect(h.raw('b').status().commit).toBeGreaterThanOrEqual(w)
    expect(a.status().role).toBe('leader') // it does not know yet
    a.readIndex('r1')
    h.settle()
    expect(h.node('a').readStates).toEqual([]) // it cannot see the write above
  })

  it('a snapshot chunk whose timestamp is not a finite count is dropped, as an entry with one is', () => {
    const { h, c, dropped } = snapshotToCAs({ timestampMs: Number.POSITIVE_INFINITY })
    expect(c.stats.droppedMalformed).toBeGreaterThan(dropped)
    expect(c.timelineMs()).not.toBe(Number.POSITIVE_INFINITY)
    // Sent as it is, it installs; and c, leading, commits.
    for (let i = 0; i < 4; i++) h.heartbeat('a')
    h.raw('a').transferLeader('c')
    h.settle()
    expect(c.status().role).toBe('leader')
    const index = h.propose('c', 'after')
    for (let i = 0; i < 3; i++) h.heartbeat('c')
    expect(c.status().commit).toBeGreaterThanOrEqual(index)
  })
})

describe('a snapshot chunk whose configuration this core cannot hold', () => {
  // A correct leader's snapshot lists a single configuration with a voter and no id twice (what
  // validateConfState asks of a stored one). One that does not was installed and stored, and
  // the replica then failed to start again (InvalidConfigError from its stored snapshot).
  it.each([
    [
      'a joint configuration',
      { voters: ['a', 'b', 'c'], learners: [], votersOutgoing: ['x'], learnersNext: [] },
    ],
    ['no voter', { voters: [], learners: ['a', 'b', 'c'], votersOutgoing: [], learnersNext: [] }],
    ['an id twice', { voters: ['a', 'b', 'c', 'b'], learners: [], votersOutgoing: [], learnersNext: [] }],
  ])('is dropped (%s), and the replica still restarts', (_, bad) => {
    const { h, c, dropped } = snapshotToCAs({ conf: bad })
    expect(() => h.restart('c')).not.toThrow()
    expect(c.stats.droppedMalformed).toBeGreaterThan(dropped)
    // Sent as it is, it installs, and c catches up.
    for (let i = 0; i < 6; i++) h.heartbeat('a')
    expect(h.node('c').applied).toEqual(['x0', 'x1', 'x2'])
  })
})
