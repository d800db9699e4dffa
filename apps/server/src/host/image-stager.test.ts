import {
  type BatchOp,
  MemoryEngine,
  stagedImageRange,
  stateMachineKey,
  stateMachineRange,
} from '@mq/kv-storage'
import type { Snapshot } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
import { decodeImageHandle } from './image-handle'
import { FETCHES_MAX } from './image-stager'
import type { ImageStore } from './image-store'
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

/**
 * A follower whose FetchImage calls wait until the test answers one (a page of `source`) or
 * fails it, in the order they were made.
 */
function heldFollower(source: ImageStore) {
  const calls: { groupId: number; imageId: number; answer(): Promise<void>; fail(): void }[] = []
  const peer = imagePeer(new MemoryEngine(), () => source, {
    fetch: (_node, req) =>
      new Promise((resolve, reject) => {
        calls.push({
          groupId: req.groupId,
          imageId: req.imageId,
          answer: async () => {
            const page = await source.page(req.groupId, req.imageId, req.after, req.maxBytes)
            if (page) resolve(page)
            else reject(new Error(`image ${req.imageId} is gone`))
          },
          fail: () => reject(new Error('connection reset')),
        })
      }),
  })
  /** The next call of `groupId` (waiting for it to be made). */
  const next = async (groupId: number) => {
    await settle(() => calls.some((c) => c.groupId === groupId))
    const at = calls.findIndex((c) => c.groupId === groupId)
    if (at < 0) throw new Error(`no FetchImage call of group ${groupId}`)
    return calls.splice(at, 1)[0] as (typeof calls)[number]
  }
  /** Answers the calls of group 1 until `snapshot`'s Snap is delivered. */
  const stageAll = async (snapshot: Snapshot) => {
    const before = peer.delivered.length
    expect(peer.stager.offer(1, snapMessage(snapshot), 'n1')).toBe(false)
    for (let i = 0; i < 10 && peer.delivered.length === before; i++) {
      await (await next(1)).answer()
      await settle(() => peer.delivered.length > before || calls.length > 0)
    }
    expect(peer.delivered.length).toBe(before + 1)
  }
  return { ...peer, calls, next, stageAll }
}

const imageIdOf = (snapshot: Snapshot) => decodeImageHandle(snapshot.data)?.imageId ?? 0

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

  it('an install whose deletion of older images fails still succeeds; the next sweep deletes them', async () => {
    const leader = await leaderWith(20, 100)
    const engine = new MemoryEngine()
    let failing = false
    const write = engine.write.bind(engine)
    engine.write = async (ops, options) => {
      if (failing) throw Object.assign(new Error('the group commit is full'), { retriable: true })
      return write(ops, options)
    }
    const errors: unknown[] = []
    const follower = imagePeer(engine, () => leader.side.store, { onError: (_g, e) => errors.push(e) })
    await stage(follower, leader.snapshot) // index 10
    failing = true
    await follower.stager.installed(1, 10) // resolves: the install goes on
    expect(errors).toHaveLength(1)
    expect(await follower.stager.staged(1, imageIdOf(leader.snapshot), 10)).toBe(true)
    failing = false
    await follower.stager.sweep()
    expect(await engine.range(stagedImageRange(1))).toEqual([])
  })

  it('deletes the pages of a fetch replaced while its call was pending once that call fails, and the rest at the next install', async () => {
    const leader = await leaderWith(300, 9_000) // three 1 MiB pages
    const follower = heldFollower(leader.side.store)
    expect(follower.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(false)
    await (await follower.next(1)).answer() // image A: its first page is staged
    const a = await follower.next(1) // ... and its second call hangs
    const stagedA = stagedImageRange(1, [imageIdOf(leader.snapshot)])
    expect((await follower.engine.range(stagedA)).length).toBeGreaterThan(0)
    // Another group's fetch takes the other slot: image B waits for the leader's next try.
    const other = snapshotOf(await leader.side.store.take(2, 5, []), 5)
    expect(follower.stager.offer(2, snapMessage(other), 'n1')).toBe(false)
    const otherCall = await follower.next(2)
    const b = snapshotOf(await leader.side.store.take(1, 12, []), 12)
    expect(follower.stager.offer(1, snapMessage(b), 'n1')).toBe(false)
    expect(follower.stager.running).toBe(FETCHES_MAX)
    a.fail()
    await settle()
    expect(await follower.engine.range(stagedA)).toEqual([])
    await otherCall.answer()
    await settle()
    await follower.stageAll(b)
    await follower.stager.installed(1, 12)
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('deletes every older partial image when a fetch starts, also past a replaced fetch that never started', async () => {
    const leader = await leaderWith(300, 9_000)
    const follower = heldFollower(leader.side.store)
    expect(follower.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(false)
    await (await follower.next(1)).answer()
    ;(await follower.next(1)).fail() // image A stops after one page
    await settle()
    const stagedA = stagedImageRange(1, [imageIdOf(leader.snapshot)])
    expect((await follower.engine.range(stagedA)).length).toBeGreaterThan(0)
    // Both slots busy: images B, then C, replace A's fetch before any of them starts.
    const held = []
    for (const g of [2, 3]) {
      const other = snapshotOf(await leader.side.store.take(g, 5, []), 5)
      expect(follower.stager.offer(g, snapMessage(other), 'n1')).toBe(false)
      held.push(await follower.next(g))
    }
    const b = snapshotOf(await leader.side.store.take(1, 12, []), 12)
    const c = snapshotOf(await leader.side.store.take(1, 14, []), 14)
    expect(follower.stager.offer(1, snapMessage(b), 'n1')).toBe(false)
    expect(follower.stager.offer(1, snapMessage(c), 'n1')).toBe(false)
    for (const call of held) await call.answer()
    await settle()
    await follower.stageAll(c) // the leader's next try starts C
    expect(await follower.engine.range(stagedA)).toEqual([])
    await follower.stager.installed(1, 14)
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('deletes a complete image the replica passed by (it applied past it without installing it) at the next sweep', async () => {
    let applied = 0
    const leader = await leaderWith(20, 100)
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store, { applied: () => applied })
    await stage(follower, leader.snapshot) // index 10: delivered, and the replica ignores it
    await follower.stager.sweep()
    expect(await follower.stager.staged(1, imageIdOf(leader.snapshot), 10)).toBe(true) // it may still take it
    applied = 10 // caught up from the log
    await follower.stager.sweep()
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('fetches nothing for a Snap at or below what the replica installed or applied (a late copy)', async () => {
    let applied = 0
    const leader = await leaderWith(20, 100)
    const follower = imagePeer(new MemoryEngine(), () => leader.side.store, { applied: () => applied })
    await stage(follower, leader.snapshot)
    await follower.stager.installed(1, 10)
    const fetched = follower.fetches.count
    // The replica answers it with its commit index, installing nothing.
    expect(follower.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(true)
    // A newer image the replica caught up past from the log, meanwhile.
    const passed = snapshotOf(await leader.side.store.take(1, 12, []), 12)
    applied = 12
    expect(follower.stager.offer(1, snapMessage(passed), 'n1')).toBe(true)
    await settle()
    expect(follower.fetches.count).toBe(fetched)
    expect(await follower.engine.range(stagedImageRange(1))).toEqual([])
  })

  it('forget resolves once its page write in flight has landed: a range clear after it is not undone', async () => {
    const leader = await leaderWith(20, 100) // one page
    const engine = new MemoryEngine()
    const landed: string[] = []
    let release: () => void = () => {}
    const held = new Promise<void>((r) => {
      release = r
    })
    let waiting = false
    const write = async (ops: readonly BatchOp[]) => {
      // The page write waits for room in the group commit.
      if (ops.some((op) => op.type === 'put')) {
        waiting = true
        await held
      }
      await engine.write(ops, { sync: false })
      landed.push(ops[0]?.type === 'put' ? 'page' : (ops[0]?.type ?? 'nothing'))
    }
    const follower = imagePeer(engine, () => leader.side.store, { write })
    expect(follower.stager.offer(1, snapMessage(leader.snapshot), 'n1')).toBe(false)
    await settle(() => waiting)
    // The group's removal: its fetch stops, then its range is cleared (as store.removeGroup does).
    const removal = (async () => {
      await follower.stager.forget(1)
      await write([{ type: 'clear', ...stagedImageRange(1) }])
    })()
    await settle()
    release()
    await removal
    await settle()
    expect(landed.filter((op) => op !== 'del')).toEqual(['page', 'clear'])
    expect(follower.delivered).toEqual([])
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
    await settle(() => hold.length >= FETCHES_MAX) // each calls once the older images are deleted
    expect(hold).toHaveLength(FETCHES_MAX)
    for (const release of hold.splice(0)) release()
    await settle()
    expect(follower.stager.running).toBe(0)
    expect(follower.delivered).toHaveLength(FETCHES_MAX)
  })
})
