import type { DataGroupPort } from '@mq/data-service'
import { MemoryEngine, stateMachineKey } from '@mq/kv-storage'
import {
  type Entry,
  EntryType,
  MemoryDurability,
  MemoryLogStorage,
  type Message,
  Prng,
  RaftHost,
  type RaftStatus,
  Role,
  type Snapshot,
  type StateMachine,
} from '@mq/raft-core'
import { describe, expect, it, vi } from 'vitest'
import { decodeImageHandle } from './image-handle'
import { LearnerStalls } from './learner-stalls'
import { NodeImages } from './node-images'
import { PeerCalls } from './peer-calls'
import { changeReplicas, type ReplicaChangeRaft } from './replica-changer'

describe('LearnerStalls (the meta leader’s watch on replicas being added)', () => {
  const at = (addMatch: number, addImagePages = 0) => ({ addMatch, addImagePages })

  it('finds a learner stalled once its mark has not moved for the timeout, once, and keeps it out for as long again', () => {
    const s = new LearnerStalls(10_000)
    expect(s.note(1, 'n4', at(0, 1), 0)).toBe(false)
    expect(s.note(1, 'n4', at(0, 2), 5_000)).toBe(false) // an image page: progress
    expect(s.note(1, 'n4', at(0, 2), 14_999)).toBe(false)
    expect(s.stalled(14_999)).toEqual(new Map())
    expect(s.note(1, 'n4', at(0, 2), 15_000)).toBe(true)
    expect(s.stalled(15_000)).toEqual(new Map([[1, 'n4']]))
    // Found once: the watch of the change starts again (it may wait on for want of a target).
    expect(s.note(1, 'n4', at(0, 2), 16_000)).toBe(false)
    expect(s.stalled(24_999)).toEqual(new Map([[1, 'n4']]))
    expect(s.stalled(25_000)).toEqual(new Map())
  })

  it('restarts the watch when the learner moves, another node is added, or the answer says nothing', () => {
    const s = new LearnerStalls(10_000)
    s.note(1, 'n4', at(3), 0)
    expect(s.note(1, 'n4', at(4), 9_000)).toBe(false)
    expect(s.note(1, 'n4', at(4), 18_999)).toBe(false)
    expect(s.note(1, 'n5', at(4), 19_000)).toBe(false) // retargeted: n5's own watch
    expect(s.note(1, 'n5', {}, 25_000)).toBe(false) // a step taken (or an earlier version)
    expect(s.note(1, 'n5', at(4), 30_000)).toBe(false)
    s.forget(1) // a step failed
    expect(s.note(1, 'n5', at(4), 39_000)).toBe(false)
    expect(s.note(1, 'n5', at(4), 49_000)).toBe(true)
    // Groups are watched apart; another term forgets everything.
    s.note(2, 'n6', at(1), 0)
    expect(s.note(2, 'n6', at(1), 10_000)).toBe(true)
    expect(s.stalled(49_000)).toEqual(new Map([[1, 'n5']]))
    s.clear()
    expect(s.stalled(49_000)).toEqual(new Map())
  })
})

describe('LearnerStalls over a data-group leader’s answers (NodeImages + changeReplicas)', () => {
  type Conf = { voters: string[]; learners: string[]; votersOutgoing: never[]; learnersNext: never[] }
  const confOf = (learners: string[]): Conf => ({
    voters: ['n1', 'n2', 'n3'],
    learners,
    votersOutgoing: [],
    learnersNext: [],
  })
  /** n1's Raft status of group 1, which it leads (everything applied), in configuration `conf`. */
  const leaderStatus = (conf: Conf) => ({
    id: 'n1',
    role: Role.Leader,
    commit: 6_000,
    confIndex: 0,
    applied: 6_000,
    conf,
  })
  /** n1's node, leader of group 1 (one key in its state), its images made and served. */
  async function leaderImages(conf: () => Conf): Promise<NodeImages> {
    const engine = new MemoryEngine()
    await engine.write([{ type: 'put', key: stateMachineKey(1, ['a']), value: Uint8Array.of(1) }], {
      sync: false,
    })
    const status = () => leaderStatus(conf())
    return new NodeImages({
      nodeId: 'n1',
      engine,
      write: (ops) => engine.write(ops, { sync: false }),
      calls: new PeerCalls(''),
      addressOf: () => undefined,
      raft: () => ({ status, refreshImage: () => {} }) as unknown as RaftHost,
      onFetchError: () => {},
      onStaged: () => {},
    })
  }
  /** Serves n4 an image of group 1 whole (one page, `done`), at 4,990. */
  async function serveWhole(images: NodeImages): Promise<void> {
    const imageId = decodeImageHandle(await images.store.take(1, 4_990, []))?.imageId ?? 0
    const page = await images.fetch({
      groupId: 1,
      imageId,
      after: new Uint8Array(0),
      maxBytes: 0,
      nodeId: 'n4',
    })
    expect(page.done).toBe(true)
  }
  /** n1's answer to the change adding n4 to group 1 in place of n3, n4's match as `n4Match` says. */
  function addN4(images: NodeImages, conf: () => Conf, n4Match: () => number) {
    const raft: ReplicaChangeRaft = {
      status: () => leaderStatus(conf()) as unknown as RaftStatus,
      matchIndex: (_groupId, id) => (id === 'n4' ? n4Match() : 6_000),
      recentlyActive: () => true,
      proposeConfChange: async () => ({ index: 1, result: undefined }),
      transferLeader: () => {},
    }
    const port = { assertLeader: () => {} } as unknown as DataGroupPort
    const request = { groupId: 1, add: 'n4', remove: 'n3', removeFirst: false, replicas: ['n1', 'n2', 'n3'] }
    return () =>
      changeReplicas(
        raft,
        port,
        request,
        () => undefined,
        (g, id) => images.pagesServed(g, id),
        (g, id) => images.wholeImageServed(g, id),
      )
  }

  it('does not find stalled a learner served its whole image that installs it for longer than the timeout', async () => {
    // n1 leads group 1; n4 is its learner, which needs a snapshot: n1's node serves it the
    // image, whole (one page, `done`). n4 then installs it: every key of the group written
    // again under the group's range and every partition opened (data-machine.ts #install),
    // minutes for a large group, during which n1 sees neither its match move (the install is
    // not acknowledged yet) nor a page asked for (it has them all). n4 is healthy throughout.
    const conf = () => confOf(['n4'])
    const images = await leaderImages(conf)
    try {
      let n4Match = 0 // its install not acknowledged yet
      const answer = addN4(images, conf, () => n4Match)
      const stalls = new LearnerStalls(10_000)
      await serveWhole(images) // n4 has the whole image: it installs it now
      expect(stalls.note(1, 'n4', await answer(), 0)).toBe(false)
      // The install takes longer than the timeout (a large group; or a short --replica-stall-ms).
      expect(stalls.note(1, 'n4', await answer(), 10_000)).toBe(false)
      expect(stalls.stalled(10_000)).toEqual(new Map())
      // Installed (its match past the image's index: entries after it acknowledged), then no
      // further: timed again, and found. (At the image's index it may still be installing:
      // Raft answers the Snap before the state machine installs it.)
      n4Match = 4_991
      expect(stalls.note(1, 'n4', await answer(), 20_000)).toBe(false)
      expect(stalls.note(1, 'n4', await answer(), 30_000)).toBe(true)
    } finally {
      await images.close()
    }
  })

  it('times a learner added again after its removal: the image its earlier replica was served whole does not exempt it', async () => {
    // n1 leads group 1; n4 was its learner once and was served an image whole (at 4,990). n4
    // then left the group (a drain, a retarget), and no page of group 1 was served since. Later
    // n4 is added again: a new, empty learner whose link to n1 is cut (match 0, no page asked
    // for). Its mark must be timed: the old image is not one it installs.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] })
    let current = confOf(['n4'])
    const conf = () => current
    const images = await leaderImages(conf)
    try {
      await serveWhole(images)
      expect(images.wholeImageServed(1, 'n4')).toBe(4_990)
      // n4 leaves the group; a sweep passes; n4 is added again later.
      current = confOf([])
      vi.advanceTimersByTime(10_000)
      current = confOf(['n4'])
      const answer = addN4(images, conf, () => 0)
      const stalls = new LearnerStalls(10_000)
      expect(stalls.note(1, 'n4', await answer(), 0)).toBe(false)
      expect(stalls.note(1, 'n4', await answer(), 10_000)).toBe(true)
    } finally {
      await images.close()
      vi.useRealTimers()
    }
  })
})

describe('LearnerStalls over a real Raft leader and learner (the install acknowledged before it runs)', () => {
  it('does not find stalled a learner whose install of its whole image runs past the timeout, its match at the image’s index', async () => {
    // n1 leads group 1 alone; n2 is its learner, cut off while n1 compacts: it needs n1's
    // snapshot. In mq the learner fetches the image's pages first (n1's node then counts it
    // served whole, at the image's index: NodeImages.wholeImageServed), then its replica takes
    // the Snap and installs it for minutes (a large group). Raft answers the Snap with the
    // snapshot's index as soon as it is stored, before the state machine installs it (the
    // Ready carrying it is sent at its flush, then restored): n1 sees n2's match at the image's
    // index for the whole install, while the group goes on committing.
    const conf = { voters: ['n1'], learners: ['n2'], votersOutgoing: [], learnersNext: [] }
    const queue: { groupId: number; m: Message }[] = []
    let cut = true
    let release = (): void => {}
    const held = new Promise<void>((r) => {
      release = r
    })
    let restoring: Snapshot | undefined
    class Machine implements StateMachine {
      count = 0
      constructor(readonly slow = false) {}
      apply(entries: readonly Entry[]): readonly unknown[] {
        for (const e of entries) if (e.type === EntryType.Normal && e.data.length > 0) this.count++
        return entries.map(() => undefined)
      }
      snapshot(): Uint8Array {
        return new TextEncoder().encode(String(this.count))
      }
      async restore(s: Snapshot): Promise<void> {
        restoring = s
        if (this.slow) await held
        this.count = Number(new TextDecoder().decode(s.data))
      }
    }
    const hosts = new Map<string, RaftHost>()
    for (const [i, id] of ['n1', 'n2'].entries()) {
      const storage = new MemoryLogStorage(conf)
      const durability = new MemoryDurability()
      durability.register(storage)
      const host = new RaftHost({
        transport: { send: (groupId, ms) => queue.push(...ms.map((m) => ({ groupId, m }))) },
        durability,
        clock: { nowMs: () => 1_000 },
      })
      host.addGroup({
        groupId: 1,
        raft: { id, prng: new Prng(i + 1), electionTicks: 10, joinBySnapshot: false },
        storage,
        stateMachine: new Machine(id === 'n2'),
        limits: { compactEntries: 20, compactKeepEntries: 2 },
      })
      hosts.set(id, host)
    }
    const n1 = hosts.get('n1') as RaftHost
    const pump = async (until: () => boolean = () => false, rounds = 300) => {
      for (let round = 0; round < rounds && !until(); round++) {
        await new Promise((r) => setImmediate(r))
        if (round % 5 === 0) for (const h of hosts.values()) h.tick()
        for (const { groupId, m } of queue.splice(0))
          if (!(cut && m.to === 'n2')) hosts.get(m.to)?.receive(groupId, m)
      }
    }
    n1.campaign(1)
    await pump(() => n1.status(1).role === Role.Leader)
    const propose = async (n: number) => {
      const done = Array.from({ length: n }, (_, i) => n1.propose(1, Uint8Array.of(i + 1)))
      await pump(() => false, 20)
      await Promise.all(done)
    }
    await propose(60)
    await pump(() => n1.status(1).firstIndex > 2)
    expect(n1.status(1).firstIndex).toBeGreaterThan(2) // compacted: n2 needs the snapshot
    cut = false
    await pump(() => restoring !== undefined)
    const image = restoring?.meta.index ?? 0
    expect(image).toBeGreaterThan(0)
    await pump(() => n1.matchIndex(1, 'n2') === image, 50)
    // Acknowledged at the image's index while n2 installs it.
    expect(n1.matchIndex(1, 'n2')).toBe(image)
    // The group goes on: n2 is more than CAUGHT_UP_ENTRIES behind while it installs.
    await propose(150)
    const answer = () =>
      changeReplicas(
        n1,
        { assertLeader: () => 1 },
        { groupId: 1, add: 'n2', remove: '', removeFirst: false, replicas: ['n1'] },
        () => undefined,
        () => 3, // its pages, all served before it took the Snap
        () => image, // served whole, at the image's index
      )
    const stalls = new LearnerStalls(10_000)
    const first = await answer()
    expect(first.done).toBe(false)
    expect(first.step).toBe('')
    expect(stalls.note(1, 'n2', first, 0)).toBe(false)
    // The install takes longer than the timeout: n2 is healthy, not stalled.
    expect(stalls.note(1, 'n2', await answer(), 10_000)).toBe(false)
    expect(stalls.stalled(10_000)).toEqual(new Map())
    // Installed: it acknowledges the entries after the image, and is timed again.
    release()
    await pump(() => (n1.matchIndex(1, 'n2') ?? 0) > image)
    expect(n1.matchIndex(1, 'n2')).toBeGreaterThan(image)
    for (const h of hosts.values()) await h.stop()
  })
})
