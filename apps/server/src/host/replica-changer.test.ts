import type { DataGroupPort } from '@mq/data-service'
import type { ChangeReplicasRequest } from '@mq/protocol'
import { type ConfChange, ConfChangeType, type RaftStatus, Role } from '@mq/raft-core'
import { describe, expect, it } from 'vitest'
import { CAUGHT_UP_ENTRIES } from './caught-up'
import { changeReplicas, type ReplicaChangeRaft } from './replica-changer'

/** A leader of group 1 with voters n1..n3 and learner n4, whose log matches up to `match`. */
function leader(commit: number, match: Record<string, number>) {
  const proposed: ConfChange[] = []
  const raft: ReplicaChangeRaft = {
    status: () =>
      ({
        id: 'n1',
        role: Role.Leader,
        commit,
        conf: { voters: ['n1', 'n2', 'n3'], learners: ['n4'], votersOutgoing: [], learnersNext: [] },
      }) as unknown as RaftStatus,
    matchIndex: (_groupId, id) => match[id],
    proposeConfChange: async (_groupId, change) => {
      proposed.push(change)
      return { index: 1, result: undefined }
    },
    transferLeader: () => {},
  }
  return { raft, proposed }
}

const port = { assertLeader: () => {} } as unknown as DataGroupPort
const request: ChangeReplicasRequest = {
  groupId: 1,
  add: 'n4',
  remove: 'n3',
  addCaughtUp: false,
  removeFirst: false,
  replicas: ['n1', 'n2', 'n3'],
}

/** A leader (`id`) of group 1 whose configuration is `conf`; every node's log matches `commit`. */
function member(id: string, conf: { voters: string[]; learners: string[] }) {
  const proposed: ConfChange[] = []
  const transfers: string[] = []
  const raft: ReplicaChangeRaft = {
    status: () => ({ id, role: Role.Leader, commit: 100, conf }) as unknown as RaftStatus,
    matchIndex: () => 100,
    proposeConfChange: async (_groupId, change) => {
      proposed.push(change)
      return { index: 1, result: undefined }
    },
    transferLeader: (_groupId, to) => {
      transfers.push(to)
    },
  }
  return { raft, proposed, transfers }
}

describe('changeReplicas (the data-group leader’s side)', () => {
  it('promotes a learner once its log matches to within CAUGHT_UP_ENTRIES of the commit index, by the leader’s own progress', async () => {
    const behind = leader(5_000, { n4: 5_000 - CAUGHT_UP_ENTRIES - 1 })
    expect(await changeReplicas(behind.raft, port, request, () => undefined)).toEqual({
      done: false,
      step: '',
      voters: ['n1', 'n2', 'n3'],
    })
    expect(behind.proposed).toEqual([])
    // The controller's word (a deprecated field) no longer promotes a learner that lags.
    expect(
      await changeReplicas(
        behind.raft,
        port,
        { ...request, addCaughtUp: true } as ChangeReplicasRequest,
        () => undefined,
      ),
    ).toEqual({
      done: false,
      step: '',
      voters: ['n1', 'n2', 'n3'],
    })
    const close = leader(5_000, { n4: 5_000 - CAUGHT_UP_ENTRIES })
    expect(await changeReplicas(close.raft, port, request, () => undefined)).toEqual({
      done: false,
      step: 'promote',
      voters: ['n1', 'n2', 'n3'],
    })
    expect(close.proposed).toEqual([{ type: ConfChangeType.AddVoter, id: 'n4' }])
  })

  it('never promotes a learner the leader has not heard from (match 0 or unknown)', async () => {
    for (const match of [{ n4: 0 }, {}] as Record<string, number>[]) {
      const l = leader(50, match)
      expect(await changeReplicas(l.raft, port, request, () => undefined)).toEqual({
        done: false,
        step: '',
        voters: ['n1', 'n2', 'n3'],
      })
      expect(l.proposed).toEqual([])
    }
  })

  it('replaces a dead replica removing it first, so the group never needs the new one for a majority', async () => {
    const dead = { ...request, removeFirst: true }
    const steps: string[] = []
    const answers: string[][] = []
    let conf = { voters: ['n1', 'n2', 'n3'], learners: [] as string[] }
    for (let i = 0; i < 5; i++) {
      const l = member('n1', conf)
      const r = await changeReplicas(l.raft, port, dead, () => undefined)
      steps.push(r.done ? 'done' : r.step)
      answers.push(r.voters)
      const change = l.proposed[0]
      if (change?.type === ConfChangeType.Remove)
        conf = { ...conf, voters: conf.voters.filter((v) => v !== change.id) }
      if (change?.type === ConfChangeType.AddLearner) conf = { ...conf, learners: [change.id] }
      if (change?.type === ConfChangeType.AddVoter)
        conf = { voters: [...conf.voters, change.id], learners: [] }
      if (r.done) break
    }
    expect(steps).toEqual(['remove', 'add-learner', 'promote', 'done'])
    // Each answer names the voters as they were before its step: the last, the new ones.
    expect(answers).toEqual([
      ['n1', 'n2', 'n3'],
      ['n1', 'n2'],
      ['n1', 'n2'],
      ['n1', 'n2', 'n4'],
    ])
    expect(conf.voters).toEqual(['n1', 'n2', 'n4'])
    // A live replica (drain, balance) still goes last: the new one is added first.
    const live = member('n1', { voters: ['n1', 'n2', 'n3'], learners: [] })
    expect(await changeReplicas(live.raft, port, request, () => undefined)).toEqual({
      done: false,
      step: 'add-learner',
      voters: ['n1', 'n2', 'n3'],
    })
  })

  it('hands the leadership to another voter, not the new replica, when the dead one leads', async () => {
    const l = member('n3', { voters: ['n1', 'n2', 'n3'], learners: [] })
    expect(await changeReplicas(l.raft, port, { ...request, removeFirst: true }, () => undefined)).toEqual({
      done: false,
      step: 'transfer-leader',
      voters: ['n1', 'n2', 'n3'],
    })
    expect(l.transfers).toEqual(['n1'])
    expect(l.proposed).toEqual([])
  })

  it('first removes a member left by a change whose new node was lost and replaced, voter or learner', async () => {
    // n4 was added as a learner, then lost; the change now adds n5 instead.
    const retargeted = { ...request, add: 'n5', removeFirst: true, replicas: ['n1', 'n2', 'n3'] }
    const learner = member('n1', { voters: ['n1', 'n2'], learners: ['n4'] })
    expect(await changeReplicas(learner.raft, port, retargeted, () => undefined)).toEqual({
      done: false,
      step: 'remove-stale-member',
      voters: ['n1', 'n2'],
    })
    expect(learner.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n4' }])
    // Its promotion committed although the meta leader never heard of it: a voter, removed too.
    const voter = member('n1', { voters: ['n1', 'n2', 'n4'], learners: [] })
    expect(await changeReplicas(voter.raft, port, retargeted, () => undefined)).toMatchObject({
      step: 'remove-stale-member',
    })
    expect(voter.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n4' }])
    // Leading, it hands the leadership to another voter first.
    const leading = member('n4', { voters: ['n1', 'n2', 'n4'], learners: [] })
    expect(await changeReplicas(leading.raft, port, retargeted, () => undefined)).toMatchObject({
      step: 'transfer-leader',
    })
    expect(leading.transfers).toEqual(['n1'])
    // From an older meta leader (no replicas named): only a learner is known to be stale.
    const older = { ...retargeted, replicas: [] }
    expect(await changeReplicas(voter.raft, port, older, () => undefined)).toMatchObject({
      step: 'add-learner',
    })
    const olderLearner = member('n1', { voters: ['n1', 'n2'], learners: ['n4'] })
    expect(await changeReplicas(olderLearner.raft, port, older, () => undefined)).toMatchObject({
      step: 'remove-stale-member',
    })
  })

  it('grows (no remove) and shrinks (no add) the meta group, a leaving leader handing over first', async () => {
    const grow = { ...request, groupId: 0, add: 'n4', remove: '', replicas: ['n1', 'n2', 'n3'] }
    const steps: string[] = []
    let conf = { voters: ['n1', 'n2', 'n3'], learners: [] as string[] }
    for (let i = 0; i < 4; i++) {
      const l = member('n1', conf)
      const r = await changeReplicas(l.raft, port, grow, () => undefined)
      steps.push(r.done ? 'done' : r.step)
      const change = l.proposed[0]
      if (change?.type === ConfChangeType.AddLearner) conf = { ...conf, learners: [change.id] }
      if (change?.type === ConfChangeType.AddVoter)
        conf = { voters: [...conf.voters, change.id], learners: [] }
      if (r.done) break
    }
    expect(steps).toEqual(['add-learner', 'promote', 'done'])
    expect(conf.voters).toEqual(['n1', 'n2', 'n3', 'n4'])
    const shrink = { ...request, groupId: 0, add: '', remove: 'n4', replicas: ['n1', 'n2', 'n3', 'n4'] }
    const follower = member('n1', conf)
    expect(await changeReplicas(follower.raft, port, shrink, () => undefined)).toMatchObject({
      step: 'remove',
    })
    expect(follower.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n4' }])
    const leading = member('n4', conf)
    expect(await changeReplicas(leading.raft, port, shrink, () => undefined)).toMatchObject({
      step: 'transfer-leader',
    })
    expect(leading.transfers).toEqual(['n1'])
    const gone = member('n1', { voters: ['n1', 'n2', 'n3'], learners: [] })
    expect(await changeReplicas(gone.raft, port, shrink, () => undefined)).toMatchObject({ done: true })
  })
})
