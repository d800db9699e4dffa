import type { DataGroupPort } from '@mq/data-service'
import { MemoryEngine, stateMachineKey } from '@mq/kv-storage'
import { type RaftHost, type RaftStatus, Role } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
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
  it('does not find stalled a learner served its whole image that installs it for longer than the timeout', async () => {
    // n1 leads group 1; n4 is its learner, which needs a snapshot: n1's node serves it the
    // image, whole (one page, `done`). n4 then installs it: every key of the group written
    // again under the group's range and every partition opened (data-machine.ts #install),
    // minutes for a large group, during which n1 sees neither its match move (the install is
    // not acknowledged yet) nor a page asked for (it has them all). n4 is healthy throughout.
    const engine = new MemoryEngine()
    await engine.write([{ type: 'put', key: stateMachineKey(1, ['a']), value: Uint8Array.of(1) }], {
      sync: false,
    })
    const conf = { voters: ['n1', 'n2', 'n3'], learners: ['n4'], votersOutgoing: [], learnersNext: [] }
    const raftStatus = { id: 'n1', role: Role.Leader, commit: 6_000, confIndex: 0, applied: 6_000, conf }
    const images = new NodeImages({
      nodeId: 'n1',
      engine,
      write: (ops) => engine.write(ops, { sync: false }),
      calls: new PeerCalls(''),
      addressOf: () => undefined,
      raft: () => ({ status: () => raftStatus, refreshImage: () => {} }) as unknown as RaftHost,
      onFetchError: () => {},
      onStaged: () => {},
    })
    try {
      let n4Match = 0 // its install not acknowledged yet
      const raft: ReplicaChangeRaft = {
        status: () => raftStatus as unknown as RaftStatus,
        matchIndex: (_groupId, id) => (id === 'n4' ? n4Match : 6_000),
        recentlyActive: () => true,
        proposeConfChange: async () => ({ index: 1, result: undefined }),
        transferLeader: () => {},
      }
      const port = { assertLeader: () => {} } as unknown as DataGroupPort
      const request = {
        groupId: 1,
        add: 'n4',
        remove: 'n3',
        removeFirst: false,
        replicas: ['n1', 'n2', 'n3'],
      }
      const answer = () =>
        changeReplicas(
          raft,
          port,
          request,
          () => undefined,
          (g, id) => images.pagesServed(g, id),
          (g, id) => images.wholeImageServed(g, id),
        )
      const stalls = new LearnerStalls(10_000)
      const imageId = decodeImageHandle(await images.store.take(1, 4_990, []))?.imageId ?? 0
      const page = await images.fetch({
        groupId: 1,
        imageId,
        after: new Uint8Array(0),
        maxBytes: 0,
        nodeId: 'n4',
      })
      expect(page.done).toBe(true) // n4 has the whole image: it installs it now
      expect(stalls.note(1, 'n4', await answer(), 0)).toBe(false)
      // The install takes longer than the timeout (a large group; or a short --replica-stall-ms).
      expect(stalls.note(1, 'n4', await answer(), 10_000)).toBe(false)
      expect(stalls.stalled(10_000)).toEqual(new Map())
      // Installed (its match at the image's index), then no further: timed again, and found.
      n4Match = 4_990
      expect(stalls.note(1, 'n4', await answer(), 20_000)).toBe(false)
      expect(stalls.note(1, 'n4', await answer(), 30_000)).toBe(true)
    } finally {
      await images.close()
    }
  })
})
