/**
 * The format level of the entries replicated through Raft that this version reads and writes.
 * A cluster runs at the lowest level among the nodes that hold replicas (the meta leader
 * computes it from their heartbeats), and leaders write nothing above it, so during a rolling
 * upgrade every replica can read every entry; the level rises once every such node runs a
 * version of the higher level. Levels:
 *
 * 1. the formats before levels existed;
 * 2. an idempotent enqueue may carry its producer's lowest sequence in flight (weighted-queue's
 *    enqueue command, producer form 2): pipelined batches of one producer are kept in order;
 * 3. the meta group's membership commands (`initMetaMembers`, `startMetaChange`,
 *    `retargetMetaChange`, `finishMetaChange`): a meta replica of an earlier version rejects them, so its state
 *    would lack the meta group's members;
 * 4. `retargetReplicaChange`: a data group's replica change whose new node was lost before it
 *    became a voter goes to another node (a meta replica of an earlier version rejects it);
 * 5. `markSilent`, `markHeard`: the meta state keeps since when a node has been silent, so a
 *    new meta leader does not restart the replacement timeout;
 * 6. `setMetaVoters` and the meta changes that grow or shrink the meta group;
 * 7. a data group's `drop` of a partition it is still importing (a move abandoned when its queue
 *    was deleted): a replica of an earlier version refuses it and would keep the partial copy
 *    and the import session;
 * 8. a queue's message TTL (`messageTtlMs` in the partition config of `open`, `import` and
 *    `configure` entries): a replica of an earlier version cannot read it;
 * 9. a queue's partition count grows (`updateQueue` with `partitions`, and routes that carry
 *    `partitionsEpoch`): a meta replica of an earlier version would ignore the new partitions
 *    and route the queue without them;
 * 10. a `purgeDead` limited to a span of the dead-letter list (`through`, `after`), which the
 *    dead-letter forwarder proposes once it copied that span to the queue's dead-letter queue: a
 *    replica of an earlier version cannot read it;
 * 11. `removeNode`: the meta state forgets a stopped node that holds nothing (RemoveNode); a meta
 *    replica of an earlier version rejects it and would keep the node.
 * 12. a paused queue (`paused` in a queue's config, CreateQueue and UpdateQueue): a meta
 *    replica of an earlier version ignores it and would route the queue as not paused, and a
 *    data-group leader of an earlier version would go on handing its messages out;
 * 13. a data group's `retire` of a deleted queue's partition (a fence of which the group keeps
 *    only its latest retirements): a replica of an earlier version cannot read it (below it, a
 *    deleted queue's partitions get a plain, permanent `fence`).
 * 14. a queue with ordered keys (`orderedKeys` in a queue's config and in its partition config,
 *    ordered messages' records and the partition's turn and line keys): a replica of an earlier
 *    version cannot read them, and a meta replica of an earlier version would drop the setting.
 * 15. a queue's delivery rate limit (`deliveryRate` in its config, CreateQueue and
 *    UpdateQueue): a meta replica of an earlier version would drop it, and a data-group leader
 *    of an earlier version would hand messages out at any rate.
 * 16. a queue's retry backoff (`retryBackoffMinMs`, `retryBackoffMaxMs` in its config and in its
 *    partition config of `open`, `import` and `configure` entries): a replica of an earlier
 *    version cannot read the partition config, and a meta replica of an earlier version would
 *    drop the setting; a lease's byte budget (`bytesMax` of a `lease` entry) and a nack's
 *    `release` flag (a give-back), which a replica of an earlier version cannot read.
 * 17. a move's `fence` and `drop` name the move, and its import chunks say the target must not
 *    serve the partition (`fresh`): only that move's drop drops a partition it fenced, and a
 *    stale chunk 0 does not clear a partition served; a replica of an earlier version would
 *    drop any partition a late drop names.
 * 18. the meta state places new partitions on no data group being removed, also once some of
 *    the groups to remove are gone (below it, placement counted the removed ones and, with
 *    fewer groups left than named, placed on groups being removed, which the scale-down then
 *    had to move off again): a meta replica of an earlier version would place them elsewhere.
 * 19. a redrive that restarts its messages' TTL (`restartTtl`, and the `ttlFromMs` of the
 *    message records it writes) and a tick that deletes an ordered key's outlived line
 *    (`ttlWaiting`): a replica of an earlier version cannot read them.
 * 20. the meta state records each node's store id (`storeId` of `registerNode`, made at random
 *    when the node's data dir was created) and refuses a registration of the same node id
 *    with another store: a node that lost its data dir, or a second process under the same
 *    id, must not take part as the node it claims to be. A meta replica of an earlier version
 *    would drop the store id. Lease ids on the wire carry their partition and its queue's
 *    incarnation (`<queueId>.<partition>.<messageId>.<delivery>`; data-service lease-tag.ts),
 *    which a leader of an earlier version cannot settle.
 * 21. a move's last import chunk carries the partition's clock at the source (`clockMs`), and
 *    the target keeps the partition's offset from its own group clock (its `clock-offset` key):
 *    a replica of an earlier version would apply the partition's entries at the group's time,
 *    its leases ending sooner or later than on the other replicas.
 * 22. a client token's lifetime (`ttlMs` of a `putToken` entry, `expiresAtMs` of the token
 *    records in the meta state and its images, and of the tokens a heartbeat answer carries):
 *    a meta replica of an earlier version would keep the token for ever, and a meta leader of
 *    an earlier version would send it to the nodes without its expiry.
 * 23. the `viewer:PATTERN` role of a client token (`putToken`): a meta replica of an earlier
 *    version would refuse the entry the others apply.
 * 24. a `redriveDead` bounded to a place in the dead-letter list (`through`: the messages dead
 *    when the Redrive began), which a replica of an earlier version cannot read.
 * 25. a data group's replica change that adds a replica and removes none (`startReplicaChange`
 *    with reason `grow` and no `remove`): a group created with fewer replicas than the
 *    replication factor (a cluster founded by fewer nodes) grows as nodes join. A meta replica
 *    of an earlier version would refuse the entry the others apply.
 * 26. a lease's attempt id (`attempt` of a `lease` entry, and the partition's attempt records
 *    and their expiry entries): a consumer that did not get a lease's answer asks again under
 *    the same attempt and gets the leases still held. A replica of an earlier version cannot
 *    read the entry.
 * 27. a lease that only repeats its attempt (the `repeat` flag 2 of a `lease` entry: answer the
 *    attempt's leases still held, lease nothing new): a repeat to a paused queue, or to one out
 *    of delivery tokens, gets its lost answer at once instead of when the pause or the tokens
 *    end. A replica of an earlier version cannot read the entry.
 * 28. the meta state's apply refuses what its handlers already refuse, for an entry from another
 *    source: a meta group grown past 7 voters (`startMetaChange` of reason `grow`), and an
 *    `updateQueue` naming a dead-letter queue that is no queue name. A meta replica of an
 *    earlier version would apply what the others refuse.
 * 29. a `createGroup` names the group id it is to take (`groupId`, the meta state's next one
 *    when the controller decided it), and the meta state refuses it when another group took
 *    that id: a create whose proposal timed out (outcome unknown) and committed late made one
 *    group more than wanted, each time. A meta replica of an earlier version would create it.
 * 30. a queue created records the route epoch of its creation as the epoch of its partitions
 *    (`partitionsEpoch`), as adding partitions does: a client that routed a deleted queue of
 *    the same name is answered STALE_ROUTE and learns the new queue's partitions (its requests
 *    to the partitions placed where the old ones were were served, and it never learnt of the
 *    others). A meta replica of an earlier version would record none (its routes differ).
 * 31. a replica created with nothing (one being added: a data group's on a node given the group,
 *    a meta replica) votes for nobody, takes no entries, and takes as its first state only a
 *    snapshot listing it as a learner (raft-core's `joinBySnapshot`): it may be a replica
 *    created again on a node that hosted the group, under the node's id, which a voter cut off
 *    since before that node's removal still counts as a voter. A leader of an earlier version
 *    does not know the refusal and would probe such a replica again and again.
 * 32. a move's import chunks and its drop ask the data group's state machine to refuse them
 *    when the group took part in a later move of the partition since (`ordered`: fenced by a
 *    later move, imported by one, or importing one): a late request of an earlier move (a
 *    deposed meta leader's) cannot restart a later move's import, nor import stale keys over a
 *    partition moved away since, even when it passed the target leader's check before the
 *    later move's entry applied. A replica of an earlier version would take it while the others
 *    refuse it.
 * 33. a drain can be undone (`undrainNode`): the node takes new replicas again. A meta replica
 *    of an earlier version would not know the command (it would keep the node draining while
 *    the others do not).
 * 34. the cluster's replication factor is kept in the meta state (`setReplicationFactor`; the
 *    first meta leader records its own setting), and a data group shrinks to it (a
 *    `startReplicaChange` of reason `shrink`, adding nobody): a meta replica of an earlier
 *    version would refuse both entries the others apply.
 * 35. the cluster's initial data group count is kept in the meta state (`recordDataGroups`: the
 *    first meta leader records its own `"dataGroups"`, 0 for as many as live nodes): a meta
 *    replica of an earlier version would refuse the entry the others apply.
 * 36. a data group's replica change whose node being added was lost before it became a voter,
 *    when no other node can take its place, is given up
 *    (`abandonReplicaChange`: it goes on adding and removing nobody, so its leader removes the
 *    lost node's learner and the change finishes), and so is the meta group's
 *    (`abandonMetaChange`, finished naming the voter removed before, `finishMetaChange{removed}`,
 *    which records the size the group had as the size wanted unless one was set):
 *    a meta replica of an earlier version would refuse the entries the others apply.
 * 37. a partition move still copying whose target group lost its majority for good is given up
 *    (`abortMove`: the meta state records the move as aborting, and no longer routes the
 *    partition to that group), and the source group lifts the move's fence (`unfence`: the
 *    partition serves there again, and a late fence or copy of that move is refused); a chunk 0
 *    of a later move replaces an aborted move's copy the target still holds (`replaces`); a
 *    deleted queue's `retire` is `final`: a fence a move set no longer names the move, so an
 *    `unfence` landing after it lifts nothing. A replica of an earlier version would refuse
 *    the entries the others apply.
 * 38. a give-back under a lease attempt (a nack with `release` and `attempt`) whose attempt's
 *    record is gone (the leases' first deadline passed) changes nothing, as one whose attempt
 *    answered its leases again does (`lapses`): a lease still held then was extended, by the
 *    consumer a repeat of the attempt answered, and releasing it let another consumer lease
 *    the message while that one held it. A replica of an earlier version would release it.
 * 39. a move's fence may be `ordered` (its body `{"moveId":…,"ordered":true}`, as an ordered
 *    drop's): refused when the group took part in a later move of the partition since. An
 *    aborted move's mark goes with a later move's drop, and the aborted move's late fence then
 *    fenced for good a partition that a move after it brought back. A replica of an earlier
 *    version would refuse the body as malformed.
 */
export const FORMAT_LEVEL = 39

/** The level that lets a partition keep an idempotent producer's pipelined batches in order. */
export const FORMAT_LEVEL_PIPELINING = 2

/** The level from which the meta leader records and changes the meta group's members. */
export const FORMAT_LEVEL_META_MEMBERS = 3

/** The level from which the meta leader retargets a data group's stuck replica change. */
export const FORMAT_LEVEL_REPLICA_RETARGET = 4

/** The level from which the meta leader records which nodes are silent, and since when. */
export const FORMAT_LEVEL_SILENCE = 5

/** The level from which the meta group's size can be changed (SetMetaVoters). */
export const FORMAT_LEVEL_META_SIZE = 6

/** The level from which a data group's leader drops an abandoned import (the orphan sweeper). */
export const FORMAT_LEVEL_DROP_IMPORT = 7

/** The level from which a queue can have a message TTL (and partition configs carry it). */
export const FORMAT_LEVEL_MESSAGE_TTL = 8

/** The level from which a queue's partition count can grow (UpdateQueue with `partitions`). */
export const FORMAT_LEVEL_GROW_PARTITIONS = 9

/** The level from which leaders move dead-lettered messages to their queue's dead-letter queue. */
export const FORMAT_LEVEL_DEAD_LETTER_QUEUE = 10

/** The level from which a stopped node that holds nothing can be removed (RemoveNode). */
export const FORMAT_LEVEL_REMOVE_NODE = 11

/** The level from which a queue's delivery can be paused (`paused` in its config). */
export const FORMAT_LEVEL_PAUSE = 12

/** The level from which a deleted queue's partitions are retired (bounded fences), not fenced. */
export const FORMAT_LEVEL_RETIRE = 13

/** The level from which a queue can order its keys (`orderedKeys` in its config). */
export const FORMAT_LEVEL_ORDERED_KEYS = 14

/** The level from which a queue's deliveries can be rate limited (`deliveryRate` in its config). */
export const FORMAT_LEVEL_DELIVERY_RATE = 15

/** The level from which a queue's failed deliveries can be backed off (`retryBackoffMinMs`). */
export const FORMAT_LEVEL_RETRY_BACKOFF = 16

/** The level from which a lease stops at a byte budget (`bytesMax` of the lease entry). */
export const FORMAT_LEVEL_LEASE_BYTES = 16

/** The level from which a nack may be a give-back (`release`: not counted, no backoff). */
export const FORMAT_LEVEL_RELEASE = 16

/** The level from which a move's fence and drop name the move, and its chunks ask for `fresh`. */
export const FORMAT_LEVEL_MOVE_IDS = 17

/** The level from which placement skips every group still being removed (see level 18 above). */
export const FORMAT_LEVEL_PLACE_LIVE_REMOVING = 18

/** The level from which a redrive restarts the TTL and a tick reaches ordered keys' lines (level 19 above). */
export const FORMAT_LEVEL_TTL_REDRIVE_LINES = 19

/** The level from which the meta state records node store ids and refuses another store (level 20 above). */
export const FORMAT_LEVEL_STORE_ID = 20

/** The level from which lease ids on the wire name their partition and its queue's incarnation (level 20 above). */
export const FORMAT_LEVEL_LEASE_TAGS = 20

/** The level from which a moved partition keeps its clock in the group it moves into (level 21 above). */
export const FORMAT_LEVEL_PARTITION_CLOCK = 21

/** The level from which a client token may have a lifetime (level 22 above). */
export const FORMAT_LEVEL_TOKEN_TTL = 22

/** The level from which a client token may have a `viewer:PATTERN` role (level 23 above). */
export const FORMAT_LEVEL_VIEWER_ROLE = 23

/** The level from which a redrive moves only the messages dead when it began (level 24 above). */
export const FORMAT_LEVEL_REDRIVE_SPAN = 24

/** The level from which a data group grows to the replication factor (level 25 above). */
export const FORMAT_LEVEL_GROW_DATA_GROUPS = 25

/** The level from which a lease may carry its consumer's attempt id (level 26 above). */
export const FORMAT_LEVEL_LEASE_ATTEMPTS = 26

/** The level from which a lease may only repeat its attempt, leasing nothing new (level 27 above). */
export const FORMAT_LEVEL_REPEAT_ONLY = 27

/** The level from which the meta state's apply re-checks a grow's size and a dead-letter name (level 28 above). */
export const FORMAT_LEVEL_META_APPLY_CHECKS = 28

/** The level from which a `createGroup` names the group id it is to take (level 29 above). */
export const FORMAT_LEVEL_CREATE_GROUP_ID = 29

/** The level from which a queue created records its creation's route epoch as its partitions' (level 30 above). */
export const FORMAT_LEVEL_CREATE_PARTITIONS_EPOCH = 30

/** The level from which a replica created with nothing joins by a snapshot (level 31 above). */
export const FORMAT_LEVEL_JOIN_BY_SNAPSHOT = 31

/** The level from which a data group's state machine refuses a move's request older than the partition's latest move there (level 32 above). */
export const FORMAT_LEVEL_MOVE_ORDER = 32

/** The level from which a node's drain can be undone (level 33 above). */
export const FORMAT_LEVEL_UNDRAIN = 33

/** The level from which the replication factor is the meta state's, and data groups shrink to it (level 34 above). */
export const FORMAT_LEVEL_REPLICATION_FACTOR = 34

/** The level from which the data group count wanted before any scale plan is the meta state's (level 35 above). */
export const FORMAT_LEVEL_DATA_GROUPS = 35

/** The level from which a change whose node being added is gone, with no other to take its place, is given up (level 36 above). */
export const FORMAT_LEVEL_ABANDON_CHANGE = 36

/** The level from which a move whose target group lost its majority is given up, its fence lifted (level 37 above). */
export const FORMAT_LEVEL_MOVE_ABORT = 37

/** The level from which a give-back under an attempt whose record is gone changes nothing (level 38 above). */
export const FORMAT_LEVEL_LATE_GIVE_BACK = 38

/** The level from which a move's fence is refused once the group took part in a later move of the partition (level 39 above). */
export const FORMAT_LEVEL_FENCE_ORDER = 39

/** A level as a peer sent it: 0 (a version before levels) is level 1. */
export function formatLevelOf(sent: number): number {
  return Math.max(1, sent)
}

const BELOW_LEVEL_PHRASE = 'is below the cluster format level'

/**
 * The refusal of a node reporting `level` to a cluster at `clusterLevel` (above it): a node of
 * an older version, or pinned lower (--format-level) after the level rose, cannot read entries
 * the cluster writes (its replicas would refuse them and drift from the others'). The node
 * stops on it (saysBelowClusterLevel).
 */
export function belowClusterLevelMessage(nodeId: string, level: number, clusterLevel: number): string {
  return `node ${nodeId} reports format level ${level}, which ${BELOW_LEVEL_PHRASE} (${clusterLevel}): its version cannot read what the cluster writes. Run a version of level ${clusterLevel} or above, without a lower --format-level (a cluster's level never goes down)`
}

/** Whether an error's message is belowClusterLevelMessage's (as a heartbeat's refusal carries it). */
export function saysBelowClusterLevel(message: string): boolean {
  return message.includes(BELOW_LEVEL_PHRASE)
}
