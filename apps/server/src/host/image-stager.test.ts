import { MemoryEngine, stagedImageRange, stateMachineKey, stateMachineRange } from '@mq/kv-storage'
import { describe, expect, it } from 'vitest'
import { decodeImageHandle } from './image-handle'
import { FETCHES_MAX } from './image-stager'
import { imagePeer, snapMessage, snapshotOf, stage } from './image-test-peer'

const key = (n: number) => stateMachineKey(1, ['k', n])

/** The pairs' bytes in a row (deep equality of megabytes of Uint8Arrays takes seconds). */
const bytesOf = (pairs: readonly (readonly [Uint8Array, Uint8Array])[]) =>
  Buffer.concat(pairs.flatMap(([k, v]) => [Buffer.from(String(k.length)), k, v]))

/** A leader side holding `n` keys of `valueBytes` in group 1, and a handle to an image of them. */
async function leaderWith(n: number, valueBytes: number) {
  const engine = new MemoryEngine()
  await engine.write(
    Array.from({ length: n }, (_, i) => ({
      type: 'put' as const,
      key: key(i),
      value: new Uint8Array(valueBytes).fill(7),
    })),
    { sync: false },
  )
  const side = imagePeer(engine)
  const handle = await side.store.take(1, 10, [])
  return { engine, side, snapshot: snapshotOf(handle, 10) }
}

/** Event-loop turns until `done()` (at most `turns`), then a few more. */
const settle = async (done: () => boolean = () => false, turns = 200) => {
  for (let i = 0; i < turns && !done(); i++) await new Promise((r) => setImmediate(r))
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r))
}

describe('ImageStager', () => {
  it('holds a Snap carrying a handle until its image is staged, then delivers it once', async () => {
    const leader = await leaderWith(300, 9_000) // ~2.7 MB: three 1 MiB pages
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store)
    const m = snapMessage(leader.snapshot)
    expect(follower.stager.offer(1, m, 'n1')).toBe(false)
    // The leader's later tries while the fetch runs are held too, and start no second fetch.
    expect(follower.stager.offer(1, m, 'n1')).toBe(false)
    await settle(() => follower.delivered.length > 0, 5_000)
    expect(follower.delivered).toHaveLength(1)
    expect(follower.fetches.count).toBe(3)
    const imageId = decodeImageHandle(leader.snapshot.data)?.imageId ?? 0
    expect(await follower.stager.staged(1, imageId, 10)).toBe(true)
    expect(await follower.stager.staged(1, imageId, 11)).toBe(false)
    const staged = await follower.stager.page(1, imageId, undefined, {
      keys: 10_000,
      bytes: Number.POSITIVE_INFINITY,
    })
    expect(bytesOf(staged.pairs).equals(bytesOf(await leader.engine.range(stateMachineRange(1))))).toBe(true)
    // Staged: the next try goes straight to the replica. Other messages always do.
    expect(follower.stager.offer(1, m, 'n1')).toBe(true)
    expect(follower.stager.offer(1, { ...m, snapshot: null }, 'n1')).toBe(true)
    await follower.stager.discard(1)
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('writes nothing of a page that comes after its group left (its last page neither)', async () => {
    const leader = await leaderWith(300, 9_000) // three 1 MiB pages
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store)
    // The group leaves this node while the last page is on its way.
    follower.fetches.before = (n) => {
      if (n === 3) void follower.stager.discard(1)
    }
    expect(follower.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(false)
    await settle(() => follower.fetches.count >= 3, 5_000)
    expect(follower.delivered).toEqual([])
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('resumes after a failed page from the last key staged, at the leader’s next try', async () => {
    const leader = await leaderWith(300, 9_000)
    const errors: unknown[] = []
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store, {
      onError: (_g, e) => errors.push(e),
    })
    follower.fetches.before = (n) => {
      if (n === 2) throw new Error('connection reset')
    }
    const m = snapMessage(leader.snapshot)
    expect(follower.stager.offer(1, m, 'n1')).toBe(false)
    await settle(() => errors.length > 0)
    expect(errors).toHaveLength(1)
    expect(follower.delivered).toHaveLength(0)
    expect(follower.stager.running).toBe(0)
    follower.stager.offer(1, m, 'n1')
    await settle(() => follower.delivered.length > 0, 5_000)
    expect(follower.delivered).toHaveLength(1)
    // Pages 1, 2 (failed), then 2 and 3 again: page 1 was not fetched twice.
    expect(follower.fetches.count).toBe(4)
    const imageId = decodeImageHandle(leader.snapshot.data)?.imageId ?? 0
    const staged = await follower.stager.page(1, imageId, undefined, {
      keys: 10_000,
      bytes: Number.POSITIVE_INFINITY,
    })
    expect(bytesOf(staged.pairs).equals(bytesOf(await leader.engine.range(stateMachineRange(1))))).toBe(true)
  })

  it('a newer image replaces a fetch under way, whose partial copy is deleted', async () => {
    const leader = await leaderWith(300, 9_000)
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store)
    follower.fetches.before = (n) => {
      if (n === 2) throw new Error('stop here') // the first image's fetch stops after one page
    }
    expect(follower.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(false)
    await settle()
    const first = decodeImageHandle(leader.snapshot.data)?.imageId ?? 0
    expect((await follower.engine.range(stagedImageRange(1, [first]))).length).toBeGreaterThan(0)
    follower.fetches.before = undefined
    const newer = snapshotOf(await leader.side.store.take(1, 12, []), 12)
    await stage(follower, newer)
    expect(await follower.engine.range(stagedImageRange(1, [first]))).toEqual([])
    const second = decodeImageHandle(newer.data)?.imageId ?? 0
    expect(await follower.stager.staged(1, second, 12)).toBe(true)
  })

  it('an install deletes the images at or below its index, not a newer one the replica may take next', async () => {
    const leader = await leaderWith(20, 100)
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store)
    await stage(follower, leader.snapshot) // index 10
    const newer = snapshotOf(await leader.side.store.take(1, 12, []), 12)
    await stage(follower, newer)
    const older = decodeImageHandle(leader.snapshot.data)?.imageId ?? 0
    const newerId = decodeImageHandle(newer.data)?.imageId ?? 0
    // Index 10 installed: its image goes, the one at 12 stays (the replica may have taken it).
    await follower.stager.installed(1, 10)
    expect(await follower.stager.staged(1, older, 10)).toBe(false)
    expect(await follower.engine.range(stagedImageRange(1, [older]))).toEqual([])
    expect(await follower.stager.staged(1, newerId, 12)).toBe(true)
    expect(follower.stager.offer(1, snapMessage(newer), 'n1')).toBe(true)
    await follower.stager.installed(1, 12)
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('refuses a page holding a key outside the group, and stages nothing of it', async () => {
    const errors: unknown[] = []
    const stager = imagePeer(new MemoryEngine(), undefined, {
      fetch: async () => ({ pairs: [[stateMachineKey(2, ['x']), Uint8Array.of(1)]], done: true }),
      onError: (_g, e) => errors.push(e),
    })
    const leader = await leaderWith(1, 1)
    expect(stager.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(false)
    await settle()
    expect(String(errors[0])).toMatch(/a key out of order or outside the group/)
    expect(stager.delivered).toHaveLength(0)
    expect(await stager.engine.range(stagedImageRange(1))).toEqual([])
  })

  it(`runs at most ${FETCHES_MAX} fetches at once; a Snap beyond that waits for the leader's next try`, async () => {
    const hold: (() => void)[] = []
    const follower = imagePeer(new MemoryEngine(), undefined, {
      fetch: () => new Promise((resolve) => hold.push(() => resolve({ pairs: [], done: true }))),
    })
    for (let g = 1; g <= FETCHES_MAX + 1; g++) {
      const handle = snapshotOf(await imagePeer(new MemoryEngine()).store.take(g, 5, []), 5)
      expect(follower.stager.offer(g, snapMessage(handle), 'n1')).toBe(false)
    }
    expect(follower.stager.running).toBe(FETCHES_MAX)
    for (const release of hold.splice(0)) release()
    await settle()
    expect(follower.stager.running).toBe(0)
    expect(follower.delivered).toHaveLength(FETCHES_MAX)
  })
})
