import type { ChangeReplicasRequest, ChangeReplicasResponse } from '@mq/protocol'
import { UnavailableError } from '@mq/protocol'
import { type ConfChange, ConfChangeType, type RaftHost } from '@mq/raft-core'
import { caughtUp } from './caught-up'
import { toWireError } from './wire-errors'

/** What of the Raft host a replica change uses. */
export type ReplicaChangeRaft = Pick<
  RaftHost,
  'status' | 'matchIndex' | 'proposeConfChange' | 'transferLeader'
>

/** The group's replica on this node: `assertLeader` throws NOT_LEADER (with the hint) on a non-leader. */
export interface ReplicaLeader {
  assertLeader(): unknown
}

/**
 * A group leader's side of replacing a replica: one step per
 * call, decided from the group's current configuration, so a repeated or resumed request
 * simply continues (Raft §6, single-server changes, one at a time):
 *
 * 1. `add` is no member: propose AddLearner(add) — it receives the log (or a snapshot) but
 *    does not count towards a quorum;
 * 2. `add` is a learner: once it caught up, propose AddVoter(add). This leader judges that
 *    from its own replication progress (the learner's log matches to within
 *    `CAUGHT_UP_ENTRIES` of the commit index), not from heartbeat reports: the learner's and
 *    the leader's reports are taken up to a heartbeat apart, and under load that gap alone
 *    can exceed any fixed margin, so a learner judged that way might never be promoted;
 * 3. `remove` is a member: when it is this leader, hand the leadership to `add` first
 *    (the next call goes to the new leader); else propose Remove(remove);
 * 4. otherwise: done.
 *
 * Growing or shrinking the meta group is the same with one side empty (''): no `remove` (steps
 * 1-2, then done) or no `add` (step 3, the leadership going to another voter).
 *
 * Before all: a member left by a change whose new node was lost and replaced by another is
 * removed — one outside `replicas` (the meta state's record) and `add`, voter or learner (a
 * promotion the meta leader did not hear of, or that committed late, leaves a voter), or
 * without `replicas` (an older meta leader) a learner that is neither `add` nor `remove`.
 * When that member leads, it hands the leadership to another voter first.
 *
 * With `removeFirst` (replacing a dead replica) step 3 comes first, and a leader that is
 * `remove` hands the leadership to another voter: the group never needs the new replica for
 * a majority while the dead one still counts (with add-first, voters {dead, a, b, new} need
 * three, so the new node failing in that window stops a group that {dead, a, b} kept running).
 *
 * Every answer carries the group's voters as the configuration named them before the step:
 * the meta leader retargets a change whose new node was lost before it became one.
 *
 * A data group's leader runs it for Peer.ChangeReplicas; the meta leader runs it on the meta
 * group (id 0) for its own controller.
 *
 * Throws NOT_LEADER (with the hint) on a non-leader, UNAVAILABLE when a change cannot be
 * proposed yet (another change uncommitted, no entry of the leader's term committed yet).
 */
export async function changeReplicas(
  raft: ReplicaChangeRaft,
  port: ReplicaLeader | undefined,
  req: Pick<ChangeReplicasRequest, 'groupId' | 'add' | 'remove' | 'removeFirst' | 'replicas'>,
  addressOf: (nodeId: string) => string | undefined,
): Promise<ChangeReplicasResponse> {
  const groupId = req.groupId
  if (!port) throw new UnavailableError(`this node hosts no replica of group ${groupId}`, { groupId })
  port.assertLeader()
  const status = raft.status(groupId)
  const { learners } = status.conf
  const voters = [...status.conf.voters]
  const propose = async (change: ConfChange, step: string): Promise<ChangeReplicasResponse> => {
    try {
      await raft.proposeConfChange(groupId, change)
    } catch (error) {
      throw toWireError(error, groupId, addressOf)
    }
    return { done: false, step, voters }
  }
  const member = (id: string) => voters.includes(id) || learners.includes(id)
  const transfer = (to: string): ChangeReplicasResponse => {
    try {
      raft.transferLeader(groupId, to)
    } catch (error) {
      throw toWireError(error, groupId, addressOf)
    }
    return { done: false, step: 'transfer-leader', voters }
  }
  const otherVoter = (than: string) => voters.find((v) => v !== than)
  // A member added for a node that was then lost and replaced (a retargeted change) goes first.
  const stale =
    req.replicas.length > 0
      ? [...learners, ...voters].find((m) => m !== req.add && !req.replicas.includes(m))
      : learners.find((l) => l !== req.add && l !== req.remove)
  if (stale !== undefined) {
    const other = otherVoter(stale)
    if (stale === status.id && other !== undefined) return transfer(other)
    return propose({ type: ConfChangeType.Remove, id: stale }, 'remove-stale-member')
  }
  if (req.removeFirst && member(req.remove)) {
    if (req.remove !== status.id) return propose({ type: ConfChangeType.Remove, id: req.remove }, 'remove')
    const other = otherVoter(req.remove)
    if (other !== undefined) return transfer(other)
  }
  // Shrinking the meta group adds nobody ('').
  if (req.add !== '' && !member(req.add))
    return propose({ type: ConfChangeType.AddLearner, id: req.add }, 'add-learner')
  if (learners.includes(req.add)) {
    if (!caughtUp(raft.matchIndex(groupId, req.add), status.commit)) return { done: false, step: '', voters }
    return propose({ type: ConfChangeType.AddVoter, id: req.add }, 'promote')
  }
  if (member(req.remove)) {
    if (req.remove === status.id) {
      // Hand the leadership to the new voter, or (shrinking) to another one.
      const to = req.add !== '' ? req.add : otherVoter(req.remove)
      if (to !== undefined) return transfer(to)
    }
    return propose({ type: ConfChangeType.Remove, id: req.remove }, 'remove')
  }
  return { done: true, step: '', voters }
}
