import type { ChangeReplicasRequest, ChangeReplicasResponse } from '@mq/protocol'
import { UnavailableError } from '@mq/protocol'
import { type ConfChange, ConfChangeType, type RaftHost } from '@mq/raft-core'
import { caughtUp } from './caught-up'
import { toWireError } from './wire-errors'

/** What of the Raft host a replica change uses. */
export type ReplicaChangeRaft = Pick<
  RaftHost,
  'status' | 'matchIndex' | 'recentlyActive' | 'proposeConfChange' | 'transferLeader'
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
 *    `CAUGHT_UP_ENTRIES` of the commit index, and it answered lately), not from heartbeat
 *    reports: the learner's and the leader's reports are taken up to a heartbeat apart, and
 *    under load that gap alone can exceed any fixed margin, so a learner judged that way
 *    might never be promoted;
 * 3. `remove` is a member: when it is this leader, hand the leadership over first (the next
 *    call goes to the new leader); else propose Remove(remove);
 * 4. otherwise: done, once the configuration read here is committed (a new leader's log may
 *    end with its predecessor's uncommitted Remove, which a later leader could still drop).
 *
 * A leadership goes only to a voter whose log this leader sees caught up (`caughtUp`): the
 * one a pending transfer names, else `add`, else the one matching the most (`remove`, when it
 * is not the one leaving, last); with none, the step waits: a transfer to a dead or
 * far-behind voter would refuse every proposal of the group while it is pending, and the next
 * call would start it again.
 *
 * Growing or shrinking a group is the same with one side empty (''): no `remove` (steps 1-2,
 * then done) or no `add` (step 3, the leadership going to another voter; the removal waits
 * while the voters left, counting those caught up, are no majority of them, but a data group's
 * removes a voter that is not current instead when the others are a majority without it, and
 * is done once it has one voter fewer than `replicas`: the meta leader finishes the change with
 * the one gone, from the answer's voters).
 *
 * Before all: a member left by a change whose new node was lost and replaced by another is
 * removed — one outside `replicas` (the meta state's record) and `add`, voter or learner (a
 * promotion the meta leader did not hear of, or that committed late, leaves a voter), or
 * without `replicas` (an older meta leader) a learner that is neither `add` nor `remove`.
 * When that member leads, it hands the leadership to another voter first.
 *
 * With `removeFirst` (replacing a dead replica) step 3 comes between 1 and 2: the new node is
 * added as a learner (it counts for nothing), and once it has caught up `remove` goes (a
 * leader that is `remove` hands the leadership to another voter), then the learner is
 * promoted. The group never needs the new replica for a majority while the dead one still
 * counts (added first, voters {dead, a, b, new} need three: the new node failing right after
 * its promotion stops a group that {dead, a, b} kept running), and while the learner catches
 * up — the long part — the dead one stays a voter: if a or b is lost for good meanwhile, the
 * dead one coming back restores a majority (removed before the learner was added, {a, b}
 * could never elect again: fault run 25004). Only while the voters left, counting those this
 * leader itself sees caught up, are a majority of the configuration without `remove`: the
 * meta leader's view of who is dead may be wrong (a node cut off from it alone), and removing
 * a live replica while another voter died would leave a group that needs the dead one.
 * Otherwise the change goes add-first.
 *
 * Every answer carries the group's voters as the configuration named them before the step:
 * the meta leader retargets a change whose new node was lost before it became one. An answer
 * that waits for the learner to catch up also says how far it has come (`addMatch`, its match
 * index here; `addImagePages`, the image pages this node served it: `imagePagesServed`): the
 * meta leader retargets a change whose live learner makes no progress for its replacement
 * timeout too.
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
  req: Pick<ChangeReplicasRequest, 'groupId' | 'add' | 'remove' | 'removeFirst' | 'replicas'> &
    Partial<Pick<ChangeReplicasRequest, 'away'>>,
  addressOf: (nodeId: string) => string | undefined,
  imagePagesServed: (groupId: number, nodeId: string) => number = () => 0,
  wholeImageServed: (groupId: number, nodeId: string) => number | undefined = () => undefined,
): Promise<ChangeReplicasResponse> {
  const groupId = req.groupId
  if (!port) throw new UnavailableError(`this node hosts no replica of group ${groupId}`, { groupId })
  port.assertLeader()
  const status = raft.status(groupId)
  const { learners } = status.conf
  const voters = [...status.conf.voters]
  const wait: ChangeReplicasResponse = { done: false, step: '', voters }
  // Caught up, and heard from lately: in an idle group a voter that died still matches the
  // commit index for ever, and counting it removed a live replica a quorum then needed, or
  // handed a leaving leadership to a dead voter round after round (an audit; the leadership
  // transfer's own check allows for it likewise). Right after a quorum check a live voter may
  // count as silent until its next answer: a step waits a round then.
  const current = (id: string) =>
    id === status.id ||
    (caughtUp(raft.matchIndex(groupId, id), status.commit) && raft.recentlyActive(groupId, id) !== false)
  const propose = async (change: ConfChange, step: string): Promise<ChangeReplicasResponse> => {
    try {
      await raft.proposeConfChange(groupId, change)
    } catch (error) {
      throw toWireError(error, groupId, addressOf)
    }
    return { done: false, step, voters }
  }
  const member = (id: string) => voters.includes(id) || learners.includes(id)
  /**
   * Hands this leader's leadership to a caught-up voter other than `leaving`, or waits. A
   * transfer already pending keeps its target while that qualifies: another would start the
   * transfer's timeout again.
   */
  const handOver = (leaving: string): ChangeReplicasResponse => {
    const rank = (id: string) =>
      id === status.leadTransferee ? 0 : id === req.add ? 1 : id === req.remove ? 3 : 2
    const to = voters
      .filter((v) => v !== leaving && current(v))
      .sort(
        (a, b) =>
          rank(a) - rank(b) || (raft.matchIndex(groupId, b) ?? 0) - (raft.matchIndex(groupId, a) ?? 0),
      )[0]
    if (to === undefined) return wait
    try {
      raft.transferLeader(groupId, to)
    } catch (error) {
      throw toWireError(error, groupId, addressOf)
    }
    return { done: false, step: 'transfer-leader', voters }
  }
  /** Whether the voters left without `id`, counting those caught up, are a majority of them. */
  const majorityWithout = (id: string) => {
    const left = voters.filter((v) => v !== id)
    return left.filter(current).length >= Math.floor(left.length / 2) + 1
  }
  // A member added for a node that was then lost and replaced (a retargeted change) goes first.
  const stale =
    req.replicas.length > 0
      ? [...learners, ...voters].find((m) => m !== req.add && !req.replicas.includes(m))
      : learners.find((l) => l !== req.add && l !== req.remove)
  if (stale !== undefined) {
    if (stale === status.id) return handOver(stale)
    return propose({ type: ConfChangeType.Remove, id: stale }, 'remove-stale-member')
  }
  // Shrinking the meta group adds nobody ('').
  if (req.add !== '' && !member(req.add))
    return propose({ type: ConfChangeType.AddLearner, id: req.add }, 'add-learner')
  // Caught up and heard from lately, as a voter counts (`current`): in an idle group a learner
  // that died once caught up matches the commit index for ever, and promoted it is a voter the
  // group needs for a majority, which the meta leader no longer retargets.
  const learnerBehind = learners.includes(req.add) && !current(req.add)
  // A data group's shrink whose removal is done (of `remove`, or of the voter taken instead:
  // below) is done once committed: the meta leader finishes it with the one gone. Also before
  // `removeFirst`: `remove` found dead after another went instead must not go too.
  const shrunk =
    req.add === '' && req.groupId !== 0 && req.replicas.length > 0 && voters.length < req.replicas.length
  if (req.removeFirst && member(req.remove) && !shrunk && !learnerBehind && majorityWithout(req.remove)) {
    if (req.remove !== status.id) return propose({ type: ConfChangeType.Remove, id: req.remove }, 'remove')
    return handOver(req.remove)
  }
  if (learners.includes(req.add)) {
    if (learnerBehind) {
      const match = raft.matchIndex(groupId, req.add) ?? 0
      // Served an image whole that its match has not passed: it installs it (every key of the
      // group written again, every partition opened: minutes for a large group), which shows
      // no progress here; nothing is timed until it acknowledges an entry after the image (a
      // mark frozen by the install retargeted a healthy learner, again at each new one for a
      // group that large). Its match is at the image's index for the whole install: its Raft
      // replica answers the Snap with the snapshot's index once it is stored, before its state
      // machine installs it (until 2026-12-07 only a match below the index was waited for, and
      // the install was timed after all).
      const whole = wholeImageServed(groupId, req.add)
      if (whole !== undefined && match <= whole) return wait
      return { ...wait, addMatch: match, addImagePages: imagePagesServed(groupId, req.add) }
    }
    return propose({ type: ConfChangeType.AddVoter, id: req.add }, 'promote')
  }
  if (member(req.remove) && !shrunk) {
    if (req.remove === status.id) return handOver(req.remove)
    // A shrink adds nobody: it removes a voter only while the voters left, counting those
    // caught up, are a majority of them (removing a live one while another is away would
    // leave a group that needs the away one). A data group's removes an away voter instead
    // when the rest are a majority without it (else it would wait for as long as that one
    // stays away: for good when its node is lost): one the meta leader has not heard from
    // lately either (`away`), since right after a quorum check a healthy voter looks silent
    // here until it answers again.
    if (req.add === '' && !majorityWithout(req.remove)) {
      const away = new Set(req.away ?? [])
      const instead =
        req.groupId === 0
          ? undefined
          : voters
              .filter((v) => v !== status.id && away.has(v) && !current(v) && majorityWithout(v))
              .sort()[0]
      if (instead === undefined) return wait
      return propose({ type: ConfChangeType.Remove, id: instead }, 'remove')
    }
    return propose({ type: ConfChangeType.Remove, id: req.remove }, 'remove')
  }
  if (status.confIndex > status.commit) return wait
  return { done: true, step: '', voters }
}
