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
        confIndex: 0,
        conf: { voters: ['n1', 'n2', 'n3'], learners: ['n4'], votersOutgoing: [], learnersNext: [] },
      }) as unknown as RaftStatus,
    matchIndex: (_groupId, id) => match[id],
    recentlyActive: () => true,
    proposeConfChange: async (_groupId, change) => {
      proposed.push(change)
      return { index: 1, result: undefined }
    },
    transferLeader: () => {},
  }
  return { raft, proposed }
}

/**
 * A leader (`id`) of a group whose configuration is `voters` and `learners`, at commit index
 * `commit`, whose replicas' logs match up to `match` (unknown when missing), and whose last
 * configuration entry is at `confIndex` (committed: 0 by default).
 */
function group(o: {
  id: string
  voters: string[]
  learners?: string[]
  commit: number
  match: Record<string, number>
  confIndex?: number
  /** Voters the leader has not heard from lately (default none). */
  silent?: string[]
}) {
  const proposed: ConfChange[] = []
  const transfers: string[] = []
  const raft: ReplicaChangeRaft = {
    status: () =>
      ({
        id: o.id,
        role: Role.Leader,
        commit: o.commit,
        confIndex: o.confIndex ?? 0,
        conf: { voters: o.voters, learners: o.learners ?? [], votersOutgoing: [], learnersNext: [] },
      }) as unknown as RaftStatus,
    matchIndex: (_groupId, id) => (id === o.id ? o.commit : o.match[id]),
    recentlyActive: (_groupId, id) => !(o.silent ?? []).includes(id),
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

const port = { assertLeader: () => {} } as unknown as DataGroupPort
const request: ChangeReplicasRequest = {
  groupId: 1,
  add: 'n4',
  remove: 'n3',
  addCaughtUp: false,
  removeFirst: false,
  metaTerm: 0,
  replicas: ['n1', 'n2', 'n3'],
  away: [],
}

/** A leader (`id`) of group 1 whose configuration is `conf`; every node's log matches `commit`. */
function member(id: string, conf: { voters: string[]; learners: string[] }) {
  const proposed: ConfChange[] = []
  const transfers: string[] = []
  const raft: ReplicaChangeRaft = {
    status: () => ({ id, role: Role.Leader, commit: 100, confIndex: 0, conf }) as unknown as RaftStatus,
    matchIndex: () => 100,
    recentlyActive: () => true,
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
    // Waiting, it says how far the learner has come: its match, and the image pages served it.
    const waiting = {
      done: false,
      step: '',
      voters: ['n1', 'n2', 'n3'],
      addMatch: 5_000 - CAUGHT_UP_ENTRIES - 1,
      addImagePages: 0,
    }
    expect(await changeReplicas(behind.raft, port, request, () => undefined)).toEqual(waiting)
    const pages = (groupId: number, id: string) => (groupId === 1 && id === 'n4' ? 7 : 0)
    expect(await changeReplicas(behind.raft, port, request, () => undefined, pages)).toEqual({
      ...waiting,
      addImagePages: 7,
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
    ).toEqual(waiting)
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
        addMatch: 0,
        addImagePages: 0,
      })
      expect(l.proposed).toEqual([])
    }
  })

  it('replaces a dead replica adding a learner, removing the dead one once it caught up, then promoting it', async () => {
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
    // The group never needs the new one for a majority while the dead one counts, and keeps the
    // dead one while the learner catches up (it may come back: fault run 25004).
    expect(steps).toEqual(['add-learner', 'remove', 'promote', 'done'])
    // Each answer names the voters as they were before its step: the last, the new ones.
    expect(answers).toEqual([
      ['n1', 'n2', 'n3'],
      ['n1', 'n2', 'n3'],
      ['n1', 'n2'],
      ['n1', 'n2', 'n4'],
    ])
    expect(conf.voters).toEqual(['n1', 'n2', 'n4'])
    // A learner that has not caught up: the dead voter stays, the step waits.
    const catchingUp = group({
      id: 'n1',
      voters: ['n1', 'n2', 'n3'],
      learners: ['n4'],
      commit: 5_000,
      match: { n2: 5_000, n4: 5_000 - CAUGHT_UP_ENTRIES - 1 },
    })
    expect(await changeReplicas(catchingUp.raft, port, dead, () => undefined)).toEqual({
      done: false,
      step: '',
      voters: ['n1', 'n2', 'n3'],
      addMatch: 5_000 - CAUGHT_UP_ENTRIES - 1,
      addImagePages: 0,
    })
    expect(catchingUp.proposed).toEqual([])
    // A live replica (drain, balance) still goes last: the new one is added first.
    const live = member('n1', { voters: ['n1', 'n2', 'n3'], learners: [] })
    expect(await changeReplicas(live.raft, port, request, () => undefined)).toEqual({
      done: false,
      step: 'add-learner',
      voters: ['n1', 'n2', 'n3'],
    })
  })

  it('hands the leadership to another voter, not the new replica, when the dead one leads', async () => {
    const l = member('n3', { voters: ['n1', 'n2', 'n3'], learners: ['n4'] })
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

  it('steps a given-up change (adding and removing nobody): the lost learner goes, then it is done', async () => {
    // A balance adding n4 beside n1..n3: n4 died a learner, and no other node could take it.
    const given = { ...request, add: '', remove: '', replicas: ['n1', 'n2', 'n3'] }
    const learner = member('n1', { voters: ['n1', 'n2', 'n3'], learners: ['n4'] })
    expect(await changeReplicas(learner.raft, port, given, () => undefined)).toEqual({
      done: false,
      step: 'remove-stale-member',
      voters: ['n1', 'n2', 'n3'],
    })
    expect(learner.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n4' }])
    // Then nothing is left to do: done with the voters as they are (nobody removed).
    const after = member('n1', { voters: ['n1', 'n2', 'n3'], learners: [] })
    expect(await changeReplicas(after.raft, port, given, () => undefined)).toEqual({
      done: true,
      step: '',
      voters: ['n1', 'n2', 'n3'],
    })
    expect(after.proposed).toEqual([])
    // A replacement of the dead n3 that had removed it before n4 died: once n4's learner is
    // gone, done with n3 missing from the voters (the meta leader finishes it without n3), and
    // no other voter removed, though the group has one voter fewer than its replicas.
    const removedFirst = member('n1', { voters: ['n1', 'n2'], learners: ['n4'] })
    expect(await changeReplicas(removedFirst.raft, port, given, () => undefined)).toMatchObject({
      step: 'remove-stale-member',
    })
    const short = member('n1', { voters: ['n1', 'n2'], learners: [] })
    expect(await changeReplicas(short.raft, port, given, () => undefined)).toEqual({
      done: true,
      step: '',
      voters: ['n1', 'n2'],
    })
    expect(short.proposed).toEqual([])
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

  it('shrinks a data group only while the voters left, counting those caught up, are a majority of them', async () => {
    // Voters n1-n3, n2 and n3 silent: without n3, {n1, n2} need n2; without n2, {n1, n3}
    // need n3. Nothing goes.
    const shrink = { ...request, add: '', remove: 'n3', replicas: ['n1', 'n2', 'n3'] }
    const match = { n2: 10, n3: 10 }
    const away = group({ id: 'n1', voters: ['n1', 'n2', 'n3'], commit: 10, match, silent: ['n2', 'n3'] })
    expect(await changeReplicas(away.raft, port, shrink, () => undefined)).toMatchObject({
      done: false,
      step: '',
    })
    expect(away.proposed).toEqual([])
    // n2 back: {n1, n2} are current without n3.
    const back = group({ id: 'n1', voters: ['n1', 'n2', 'n3'], commit: 10, match, silent: ['n3'] })
    expect(await changeReplicas(back.raft, port, shrink, () => undefined)).toMatchObject({ step: 'remove' })
    expect(back.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n3' }])
  })

  it('shrinks a data group by an away voter instead when the planned one cannot go, then is done', async () => {
    // Voters n1-n3, shrinking by n3; n2 went away after the plan: without n3, {n1, n2} would
    // need n2. n2 goes instead ({n1, n3} are current), and the change is then done: one voter
    // fewer than the replicas recorded.
    const shrink = { ...request, add: '', remove: 'n3', replicas: ['n1', 'n2', 'n3'], away: ['n2'] }
    const match = { n2: 10, n3: 10 }
    // Only one the meta leader has not heard from lately either: silent here alone (right
    // after a quorum check, before its next answer), n2 stays, and the shrink waits.
    const unanswered = group({ id: 'n1', voters: ['n1', 'n2', 'n3'], commit: 10, match, silent: ['n2'] })
    expect(
      await changeReplicas(unanswered.raft, port, { ...shrink, away: [] }, () => undefined),
    ).toMatchObject({
      done: false,
      step: '',
    })
    expect(unanswered.proposed).toEqual([])
    const away = group({ id: 'n1', voters: ['n1', 'n2', 'n3'], commit: 10, match, silent: ['n2'] })
    expect(await changeReplicas(away.raft, port, shrink, () => undefined)).toMatchObject({ step: 'remove' })
    expect(away.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n2' }])
    const after = group({ id: 'n1', voters: ['n1', 'n3'], commit: 11, match: { n3: 11 }, confIndex: 11 })
    expect(await changeReplicas(after.raft, port, shrink, () => undefined)).toEqual({
      done: true,
      step: '',
      voters: ['n1', 'n3'],
    })
    expect(after.proposed).toEqual([])
    // Not yet committed: it waits.
    const uncommitted = group({
      id: 'n1',
      voters: ['n1', 'n3'],
      commit: 10,
      match: { n3: 10 },
      confIndex: 11,
    })
    expect(await changeReplicas(uncommitted.raft, port, shrink, () => undefined)).toMatchObject({
      done: false,
    })
    // The meta group's shrink takes no other voter (its finish names no other): it waits.
    const meta = group({ id: 'n1', voters: ['n1', 'n2', 'n3'], commit: 10, match, silent: ['n2'] })
    expect(await changeReplicas(meta.raft, port, { ...shrink, groupId: 0 }, () => undefined)).toMatchObject({
      done: false,
      step: '',
    })
    expect(meta.proposed).toEqual([])
  })

  it('removes no second voter once a shrink took an away one instead, though the planned one is now dead', async () => {
    // n2 went instead of n3 ({n1, n3} left, one fewer than the replicas recorded); then the
    // meta leader finds n3 dead and asks to remove it first. Removing n3 too would leave one
    // voter for a shrink by one, and the finish (two gone) would keep n2 in the replicas.
    const shrink = { ...request, add: '', remove: 'n3', replicas: ['n1', 'n2', 'n3'], removeFirst: true }
    const after = group({
      id: 'n1',
      voters: ['n1', 'n3'],
      commit: 11,
      match: { n3: 11 },
      confIndex: 11,
      silent: ['n3'],
    })
    expect(await changeReplicas(after.raft, port, shrink, () => undefined)).toEqual({
      done: true,
      step: '',
      voters: ['n1', 'n3'],
    })
    expect(after.proposed).toEqual([])
  })

  it('hands a leaving leadership only to a caught-up voter, preferring the new one, else waits', async () => {
    // n3 leads the meta group and is drained; n4 was added, caught up and promoted, then died.
    const drain = { ...request, groupId: 0, add: 'n4', remove: 'n3' }
    const voters = ['n1', 'n2', 'n3', 'n4']
    const behind = group({ id: 'n3', voters, commit: 5_000, match: { n1: 4_990, n2: 5_000, n4: 10 } })
    expect(await changeReplicas(behind.raft, port, drain, () => undefined)).toEqual({
      done: false,
      step: 'transfer-leader',
      voters,
    })
    // The caught-up voter with the highest match, not the dead n4.
    expect(behind.transfers).toEqual(['n2'])
    // The new voter, caught up, is preferred.
    const live = group({ id: 'n3', voters, commit: 5_000, match: { n1: 5_000, n2: 5_000, n4: 4_950 } })
    await changeReplicas(live.raft, port, drain, () => undefined)
    expect(live.transfers).toEqual(['n4'])
    // A transfer under way keeps its target while it qualifies.
    const pending = group({ id: 'n3', voters, commit: 5_000, match: { n1: 4_990, n2: 5_000, n4: 5_000 } })
    const status = pending.raft.status
    pending.raft.status = (groupId) => ({ ...status(groupId), leadTransferee: 'n1' })
    await changeReplicas(pending.raft, port, drain, () => undefined)
    expect(pending.transfers).toEqual(['n1'])
    // Nobody caught up (or heard from): no transfer (it would refuse every proposal while
    // pending), no removal of the leader itself.
    const none = group({ id: 'n3', voters, commit: 5_000, match: { n1: 10, n4: 10 } })
    expect(await changeReplicas(none.raft, port, drain, () => undefined)).toEqual({
      done: false,
      step: '',
      voters,
    })
    expect(none.transfers).toEqual([])
    expect(none.proposed).toEqual([])
    // The same for a leader that is a dead replica removed first, or a stale member.
    const dead = group({
      id: 'n5',
      voters: ['n1', 'n2', 'n3', 'n4', 'n5'],
      learners: ['n6'],
      commit: 5_000,
      match: { n1: 10, n2: 4_990, n3: 5_000, n4: 4_995, n6: 5_000 },
    })
    const five = {
      ...request,
      add: 'n6',
      remove: 'n5',
      removeFirst: true,
      replicas: ['n1', 'n2', 'n3', 'n4', 'n5'],
    }
    await changeReplicas(dead.raft, port, five, () => undefined)
    expect(dead.transfers).toEqual(['n3'])
    const stale = group({ id: 'n4', voters, commit: 5_000, match: { n1: 10, n2: 10, n3: 10 } })
    const retargeted = { ...request, add: 'n5', replicas: ['n1', 'n2', 'n3'] }
    expect(await changeReplicas(stale.raft, port, retargeted, () => undefined)).toMatchObject({
      done: false,
      step: '',
    })
    expect(stale.transfers).toEqual([])
    expect(stale.proposed).toEqual([])
  })

  it('removes a replica first only while the voters left that this leader sees caught up are a majority', async () => {
    // n3 is cut off from the meta leader only (it looks dead there); n2 just died: removing n3
    // first would leave {n1, n2}, which needs n2. Added first instead.
    const cutOff = { ...request, removeFirst: true }
    const voters = ['n1', 'n2', 'n3']
    const l = group({ id: 'n1', voters, commit: 5_000, match: { n2: 10, n3: 5_000 } })
    expect(await changeReplicas(l.raft, port, cutOff, () => undefined)).toEqual({
      done: false,
      step: 'add-learner',
      voters,
    })
    expect(l.proposed).toEqual([{ type: ConfChangeType.AddLearner, id: 'n4' }])
    // Once n4 is a voter, {n1, n4} of {n1, n2, n4} is a majority: n3 goes.
    const after = group({
      id: 'n1',
      voters: ['n1', 'n2', 'n3', 'n4'],
      commit: 5_000,
      match: { n2: 10, n3: 5_000, n4: 5_000 },
    })
    expect(await changeReplicas(after.raft, port, cutOff, () => undefined)).toMatchObject({ step: 'remove' })
    expect(after.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n3' }])
    // Every other voter caught up, and the learner n4 too: removed before the promotion.
    const fine = group({
      id: 'n1',
      voters,
      learners: ['n4'],
      commit: 5_000,
      match: { n2: 4_990, n3: 10, n4: 5_000 },
    })
    expect(await changeReplicas(fine.raft, port, cutOff, () => undefined)).toMatchObject({ step: 'remove' })
    expect(fine.proposed).toEqual([{ type: ConfChangeType.Remove, id: 'n3' }])
  })

  it('answers done only once the configuration it reads is committed', async () => {
    // A new leader whose log holds its predecessor's Remove(n3), not committed yet.
    const voters = ['n1', 'n2', 'n4']
    const match = { n2: 5_000, n4: 5_000 }
    const pending = group({ id: 'n1', voters, commit: 5_000, match, confIndex: 5_001 })
    expect(await changeReplicas(pending.raft, port, request, () => undefined)).toEqual({
      done: false,
      step: '',
      voters,
    })
    const committed = group({ id: 'n1', voters, commit: 5_001, match, confIndex: 5_001 })
    expect(await changeReplicas(committed.raft, port, request, () => undefined)).toEqual({
      done: true,
      step: '',
      voters,
    })
  })

  it('counts a voter the leader has not heard from lately as down, however far its log matches (an idle group)', async () => {
    // n3 is cut off from the meta leader only (removeFirst), and alive; n2 died a moment ago.
    // Idle, n2's log still matches the commit index: removing n3 would leave {n1, n2}, which
    // needs the dead n2.
    const cut = group({
      id: 'n1',
      voters: ['n1', 'n2', 'n3'],
      learners: ['n4'],
      commit: 5_000,
      match: { n2: 5_000, n3: 5_000, n4: 5_000 },
      silent: ['n2'],
    })
    await changeReplicas(cut.raft, port, { ...request, removeFirst: true }, () => undefined)
    expect(cut.proposed).not.toContainEqual({ type: ConfChangeType.Remove, id: 'n3' })
    // A drained leader does not hand its leadership to the new voter that crashed after its
    // promotion (each round would start that transfer again); it hands it to a live one.
    const drained = group({
      id: 'n3',
      voters: ['n1', 'n2', 'n3', 'n4'],
      commit: 5_000,
      match: { n1: 5_000, n2: 5_000, n4: 5_000 },
      silent: ['n4'],
    })
    for (let round = 0; round < 3; round++)
      await changeReplicas(drained.raft, port, { ...request, add: 'n4', remove: 'n3' }, () => undefined)
    expect(drained.transfers).not.toContain('n4')
    expect(drained.transfers.length).toBeGreaterThan(0)
  })

  it('does not promote a learner the leader has not heard from lately, however far its log matches (an idle group)', async () => {
    // n4 caught up, then died; idle, its log still matches the commit index. Promoted, the
    // group {n1, n2, n3, n4} needs three of n1..n3 (one more failure stops it), and the meta
    // leader, which retargets a change only while its new node is no voter, can no longer
    // replace n4 by a live node.
    for (const removeFirst of [false, true]) {
      const idle = group({
        id: 'n1',
        voters: ['n1', 'n2', 'n3'],
        learners: ['n4'],
        commit: 5_000,
        match: { n2: 5_000, n3: 5_000, n4: 5_000 },
        silent: ['n4'],
      })
      expect(await changeReplicas(idle.raft, port, { ...request, removeFirst }, () => undefined)).toEqual({
        done: false,
        step: '',
        voters: ['n1', 'n2', 'n3'],
        addMatch: 5_000,
        addImagePages: 0,
      })
      expect(idle.proposed).toEqual([])
    }
  })
})
