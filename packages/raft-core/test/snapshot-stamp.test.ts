import { describe, expect, it } from 'vitest'
import { EntryType } from '../src/index'
import { bytes, Harness } from './harness'

const stampsOf = (h: Harness, id: string) =>
  h
    .node(id)
    .appliedEntries.filter((e) => e.type === EntryType.Normal && e.data.length > 0)
    .map((e) => e.timestampMs)

describe('snapshot metadata at the compaction floor', () => {
  // A snapshot image made at the index the log was just compacted to (RaftHost#makeImage: a
  // follower needs an image and nothing was applied since the compaction) carries the
  // timestamp of its last entry, which the storage's snapshot still knows: a replica that
  // installs it and leads next stamps no lower than the entries it covers.
  it('keeps the timestamp of the snapshot at that index, so stamps never go backwards', () => {
    const h = new Harness(['a', 'b', 'c'], { preVote: false, checkQuorum: false })
    for (const id of ['a', 'b', 'c']) h.raw(id).tick(10_000, 1_000)
    h.elect('a')
    h.raw('a').propose(bytes('x'), 10_000, 1_000)
    h.settle()
    // c misses 'y', stamped 10 s later; a compacts behind it and keeps no entry.
    h.isolate('c')
    for (const id of ['a', 'b', 'c']) h.raw(id).tick(20_000, 11_000)
    h.raw('a').propose(bytes('y'), 20_000, 11_000)
    h.settle()
    h.compact('a')
    const a = h.node('a')
    const applied = a.raw.status().applied
    expect(a.storage.firstIndex()).toBe(applied + 1)
    // An image made now, at the compacted index, as on demand.
    const meta = a.raw.snapshotMeta(applied)
    a.storage.compact({ meta, data: bytes(JSON.stringify(a.applied)) }, applied)
    a.storage.sync()
    // c gets it as a snapshot, then the leadership.
    h.heal()
    h.heartbeat('a')
    expect(h.node('c').applied).toEqual(['x', 'y'])
    h.raw('a').transferLeader('c')
    h.settle()
    expect(h.raw('c').status().role).toBe('leader')
    h.raw('c').propose(bytes('z'), 20_000, 11_000)
    h.settle()
    // Before: c stamped 'z' 10 000, the stamp of the last entry it held before the snapshot.
    expect(stampsOf(h, 'b')).toEqual([10_000, 20_000, 20_000])
  })
})
