import { partitionConfigOf, storedQueueName } from '@mq/data-service'
import {
  type ControllerPort,
  controlActions,
  isStoreId,
  LeaderBalanceCache,
  type Liveness,
  type MetaCommand,
  type MetaResult,
  type MetaState,
  MovePhase,
  metaChangeAction,
  ReplicaChangeReason,
  type ReplicaChangeRecord,
  removedNodeMessage,
  replicaActions,
  replicasFor,
  scaleProgress,
  storeConflict,
} from '@mq/meta-service'
import {
  belowClusterLevelMessage,
  type ChangeReplicasRequest,
  type ChangeReplicasResponse,
  FORMAT_LEVEL_ABANDON_CHANGE,
  FORMAT_LEVEL_CREATE_GROUP_ID,
  FORMAT_LEVEL_DATA_GROUPS,
  FORMAT_LEVEL_GROW_DATA_GROUPS,
  FORMAT_LEVEL_META_MEMBERS,
  FORMAT_LEVEL_META_SIZE,
  FORMAT_LEVEL_MOVE_ABORT,
  FORMAT_LEVEL_REMOVE_NODE,
  FORMAT_LEVEL_REPLICA_RETARGET,
  FORMAT_LEVEL_REPLICATION_FACTOR,
  FORMAT_LEVEL_SILENCE,
  FORMAT_LEVEL_STORE_ID,
  FORMAT_LEVEL_UNDRAIN,
  formatLevelOf,
  type GroupAssignment,
  type GroupReport,
  type HeartbeatRequest,
  type HeartbeatResponse,
  InvalidArgumentError,
  type MovePartitionRequest,
  type MovePartitionResponse,
  mqError,
  type NodeAddress,
} from '@mq/protocol'
import { throttledCount } from '../grpc-listener'
import { type Logger, silentLogger } from '../log'
import { NODE_ID_PATTERN, NODE_ID_RULE, parseAddress } from '../members'
import { LearnerStalls } from './learner-stalls'
import type { PeerCalls, ReplicaAddress } from './peer-calls'

/** A node not heard from for this long counts as dead. */
export const NODE_DEAD_MS = 5_000
/** Leadership is handed only to a node heard from this recently (3 heartbeats). */
const TRANSFER_TARGET_FRESH_MS = 1_500
/** A heartbeat gap longer than this (two heartbeats) makes a node unstable again. */
const HEARTBEAT_GAP_MS = 1_000
/** Balancing hands leadership only to a node heard from regularly for this long. */
const TRANSFER_TARGET_STABLE_MS = 10_000
/** One MovePartition call's deadline; a longer copy goes on and the next round joins it. */
const MOVE_CALL_MS = 60_000
/** Partition moves the controller keeps under way at once. */
const MOVES_CONCURRENT_MAX = 2
/**
 * Data-group membership changes the controller keeps under way at once (in different groups,
 * each onto a different node: replica-plan.ts). A dead node's replicas are replaced this many
 * at a time: each change takes a few controller rounds, more for a group with much data.
 */
const REPLICA_CHANGES_MAX = 3
/** One ChangeReplicas call's deadline (it proposes at most one membership change). */
const CHANGE_CALL_MS = 5_000
/**
 * How long a DeleteQueue waits for the data groups to fence the queue's partitions (a Raft
 * entry per partition, the groups at once; milliseconds when they are up); a group that takes
 * longer goes on in the background, and the orphan sweeper drops the partitions anyway. Well
 * under a client's attempt (the SDK's and the CLI's 5 s, the console's 3 s), so that the
 * answer is not lost to a deadline and the call sent again.
 */
const FENCE_WAIT_MS = 2_000

/**
 * A move or replica change that keeps failing (its group without a majority, a leader that
 * does not answer) is retried every round, and was logged every round: two lines a second per
 * move or group for as long as the outage lasted. Now at most once per RETRY_WARN_MS each,
 * counting the retries between.
 */
const RETRY_WARN_MS = 10_000
/** Moves and groups whose retry warnings are throttled apart, at most (then they start again). */
const RETRY_WARNED_MAX = 1_024

/**
 * Throws InvalidArgumentError unless `nodeId`, the request's field `field`, is a node id
 * (NODE_ID_PATTERN, as every node's own is): one that is none is named as such, quoted. Told
 * "node <id> is not registered", an empty id read "node  is not registered", " n1" read as if n1
 * were not, and control characters reached the caller's terminal as they were.
 */
function checkNodeId(field: string, nodeId: string): void {
  if (nodeId === '') throw new InvalidArgumentError(`the request names no node (${field})`)
  if (!NODE_ID_PATTERN.test(nodeId)) {
    throw new InvalidArgumentError(
      `${field} ${JSON.stringify(nodeId)} is no node id: node ids are ${NODE_ID_RULE}`,
    )
  }
}

/** One replica change as the controller asks a group's leader to step it. */
export type ReplicaStep = Pick<ChangeReplicasRequest, 'add' | 'remove' | 'removeFirst' | 'replicas'>

/** What the controller needs from the node it runs on. */
export interface ControllerHost {
  readonly nodeId: string
  /** Replicas of a new data group, at least (the founders' count, up to the replication factor). */
  readonly replicas: number
  /**
   * Replicas wanted per data group (default `replicas`): a new group gets as many as live
   * nodes allow, and one created with fewer (a cluster founded by fewer nodes) grows to it as
   * nodes join (from format level 25).
   */
  readonly replicationFactor?: number
  /** Data groups wanted while no scale plan was asked for (0: one per live node). */
  readonly dataGroups: number
  /** A node not heard from for this long has its data-group replicas replaced. */
  readonly replaceDeadAfterMs: number
  /**
   * A learner making no progress for this long on a live node has its change retargeted
   * (learner-stalls.ts; default replaceDeadAfterMs).
   */
  readonly replicaStallMs?: number
  readonly calls: PeerCalls
  /** The meta state when this node leads the meta group, else undefined. */
  leaderState(): MetaState | undefined
  /**
   * Resolves once the meta state holds every entry committed before the call (ReadIndex):
   * a new leader may not have applied its predecessor's last entries yet.
   */
  barrier(): Promise<void>
  /** Proposes a meta command; rejects with NOT_LEADER (hint) or UNAVAILABLE. */
  propose(command: MetaCommand): Promise<MetaResult>
  /** The error telling a caller where the meta leader is. */
  notLeader(): Error
  /** Starts a leadership transfer of the meta group (this node must lead it). */
  transferMetaLeader(toNodeId: string): void
  /** The meta group's Raft configuration as this node knows it. */
  metaMembership(): { readonly voters: readonly string[]; readonly learners: readonly string[] }
  /**
   * The meta group's current Raft term on this node. The controller's soft state (liveness,
   * its takeover time, leader overrides) belongs to one term of leading: a node elected again
   * in a later term forgets it, even when no call saw it follow in between. Without it, only a
   * call that sees this node not leading does.
   */
  metaTerm?(): number
  /**
   * The controller's clock, ms since the epoch (default Date.now): when nodes were last heard
   * from, and for how long they have been silent. mq-server gives it a steady clock
   * (steady-clock.ts): with the wall clock, a forward step on the meta leader made every node
   * look silent for the step, and past --replace-dead-after-ms had healthy nodes' replicas
   * replaced (the clock audit).
   */
  nowMs?(): number
  /**
   * One step of replacing meta voter `remove` by `add` on this node's meta replica (it must
   * lead): add a learner, promote it once caught up, hand the leadership over when `remove`
   * leads, remove (before the promotion, with `removeFirst`: a dead voter); `replicas` are the members the
   * meta state records (replica-changer.ts). Rejects with NOT_LEADER (hint) or UNAVAILABLE.
   */
  changeMetaMembers(change: ReplicaStep): Promise<ChangeReplicasResponse>
  /**
   * Where the controller's events go (default: nowhere). The node's logger: written with
   * console.log and console.error, they were plain-text lines among the JSON ones on stdout,
   * without level or node.
   */
  readonly log?: Logger
}

/**
 * The meta leader's controller (claims 2 and 3 of the seed). Every node's heartbeat comes
 * here: it records liveness, registers the node, records which node leads each data group,
 * and answers with the groups the node must host, the removed groups it must delete, and the
 * leadership transfers that spread leaders evenly. Every round it carries out the plan
 * (meta-service's `controlActions`: create groups, start partition moves, remove emptied
 * groups, finish the plan) and drives each move recorded in the meta state through its
 * phases: Peer.MovePartition "copy" on the source group's leader, `completeMove` (the route
 * flips, the epoch bumps), "drop" on the source group's leader, `finishMove`. A move still
 * copying into a group that lost its majority is aborted (`abortMove`), then "abort" on the
 * source group's leader lifts its fence, and `finishMove`. Moves are
 * persisted in the meta state, so a new meta leader resumes them; every step is idempotent.
 *
 * Liveness and operator leader overrides are soft state of the current meta leader, kept for
 * one term of leading (`ControllerHost.metaTerm`), but for one fact: a node that counts as
 * dead is recorded as silent since its last heartbeat (`markSilent`, cleared by `markHeard`),
 * so that a new meta leader goes on counting its replacement timeout instead of starting it
 * again. A new leader makes no choice that depends on liveness (a meta group change, a
 * replica removed first because its node is silent) before it has heard from every node.
 */
export class Controller {
  readonly #host: ControllerHost
  readonly #log: Logger
  readonly #lastSeenMs = new Map<string, number>()
  /** Since when each node's heartbeats came without a long gap. */
  readonly #stableSinceMs = new Map<string, number>()
  /** Operators' TransferLeader choices (group → node). */
  readonly #leaderOverrides = new Map<number, string>()
  readonly #balance = new LeaderBalanceCache()
  readonly #driving = new Map<number, Promise<void>>()
  /** Each move's and group's retry warning, throttled (RETRY_WARN_MS). */
  readonly #retryWarnings = new Map<string, (line: string) => void>()
  /** Each node's last report of each group it hosts (applied and commit indexes). */
  readonly #reports = new Map<string, Map<number, GroupReport>>()
  /** Groups with a membership change step in flight (0: the meta group). */
  readonly #changing = new Set<number>()
  /**
   * The voters each group's leader named in its last answer to a step of the change adding
   * `add` (after a promotion: with `add`); forgotten when a step fails, since its answer may
   * be lost after the step was taken.
   */
  readonly #changeVoters = new Map<number, { readonly add: string; readonly voters: readonly string[] }>()
  /** The replicas being added that make no progress (a live node that never catches up). */
  readonly #stalls: LearnerStalls
  /** Since when this node leads the meta group (0: not leading), for lost-node timing. */
  #leaderSinceMs = 0
  /** The meta term the soft state belongs to (-1: not leading; 0: leading, term unknown). */
  #term = -1
  /** The term in which this leader's meta state was last brought up to its commit (a barrier). */
  #caughtUpTerm = -1
  /** The settings (config file) this node told are not the cluster's. */
  readonly #toldSettings = new Set<'replicationFactor' | 'dataGroups'>()
  #busy = false
  /** What runs in turn (#inTurn): a round, the ScaleDataGroups RPC's proposal. */
  #turn: Promise<void> = Promise.resolve()

  constructor(host: ControllerHost) {
    this.#host = host
    this.#log = host.log ?? silentLogger()
    this.#stalls = new LearnerStalls(host.replicaStallMs ?? host.replaceDeadAfterMs)
  }

  /** The controller's clock (ControllerHost.nowMs). */
  #now(): number {
    return this.#host.nowMs?.() ?? Date.now()
  }

  /** Warns `line` about the retried work `key` (a move, a group) at most once per RETRY_WARN_MS. */
  #warnRetry(key: string, line: string): void {
    let warn = this.#retryWarnings.get(key)
    if (warn === undefined) {
      if (this.#retryWarnings.size >= RETRY_WARNED_MAX) this.#retryWarnings.clear()
      warn = throttledCount(
        RETRY_WARN_MS,
        (count, last) =>
          this.#log.warn(count > 1 ? `${last} (failed ${count} times since the last such line)` : last),
        () => this.#now(),
      )
      this.#retryWarnings.set(key, warn)
    }
    warn(line)
  }

  liveness(): Liveness {
    return {
      alive: (id: string) => this.#now() - (this.#lastSeenMs.get(id) ?? 0) < NODE_DEAD_MS,
      // Not heard since this leader took over: when the node went silent, as recorded.
      lastHeartbeatMs: (id: string) =>
        this.#lastSeenMs.get(id) ?? this.#host.leaderState()?.node(id)?.silentSinceMs ?? 0,
      groupIndexes: (id: string, groupId: number) => this.#reports.get(id)?.get(groupId),
    }
  }

  /**
   * The meta state while this node leads the meta group, else undefined. Whenever that changes
   * (a new term, or not leading), the soft state of the term before is forgotten: a node
   * re-elected after another led meanwhile would otherwise count a node it heard from long
   * ago as alive, and apply an operator's leader override its successor may have undone.
   */
  /**
   * Whether `nodeId` is registered in the meta state, read again past a barrier when the
   * leader's applied state does not know it (a new leader may not have applied its
   * predecessor's last entries yet: a registration among them).
   */
  async #registered(state: MetaState, nodeId: string): Promise<boolean> {
    if (state.node(nodeId)) return true
    await this.#host.barrier()
    return Boolean(state.node(nodeId))
  }

  #leading(): MetaState | undefined {
    const state = this.#host.leaderState()
    const term = state === undefined ? -1 : (this.#host.metaTerm?.() ?? 0)
    if (term !== this.#term) {
      this.#term = term
      this.#leaderSinceMs = state === undefined ? 0 : this.#now()
      this.#lastSeenMs.clear()
      this.#stableSinceMs.clear()
      this.#leaderOverrides.clear()
      this.#reports.clear()
      this.#changeVoters.clear()
      this.#stalls.clear()
    }
    return state
  }

  #alive(state: MetaState): Set<string> {
    const liveness = this.liveness()
    return new Set(
      state
        .nodes()
        .map((n) => n.nodeId)
        .filter((id) => liveness.alive(id)),
    )
  }

  /** The Meta RPCs that act on the cluster (scale, drain, transfer leader). */
  port(): ControllerPort {
    return {
      scaleDataGroups: async (groups) => {
        if (!this.#leading()) throw this.#host.notLeader()
        // In turn with the rounds: a round's actions, computed from the plan it read, landed
        // after a new plan and ended it (its finishScale) or outlived it (its createGroup)
        // when this proposal came between its reading and its proposals (an audit).
        const r = await this.#inTurn(() => this.#host.propose({ type: 'scaleDataGroups', groups }))
        if (!r.ok) throw mqError(r.code, r.message)
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        void this.round()
        return scaleProgress(state)
      },
      setMetaVoters: async (voters) => {
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        this.#requireLevel(state, FORMAT_LEVEL_META_SIZE, "the meta group's size can be set")
        const r = await this.#host.propose({ type: 'setMetaVoters', voters })
        if (!r.ok) throw mqError(r.code, r.message)
        void this.round()
        return { voters: [...(this.#leading()?.metaMembers() ?? [])], votersWanted: voters }
      },
      setReplicationFactor: async (factor) => {
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        this.#requireLevel(
          state,
          FORMAT_LEVEL_REPLICATION_FACTOR,
          'the replication factor can be set',
          ' (until then each meta leader goes by its own "replicationFactor", config file)',
        )
        // In turn with the rounds: a round's first record of the factor lands before this.
        const r = await this.#inTurn(() => this.#host.propose({ type: 'setReplicationFactor', factor }))
        if (!r.ok) throw mqError(r.code, r.message)
        void this.round()
        return r.value as number
      },
      undrainNode: async (nodeId) => {
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        checkNodeId('node_id', nodeId)
        if (!(await this.#registered(state, nodeId)))
          throw new InvalidArgumentError(`node ${nodeId} is not registered`)
        this.#requireLevel(state, FORMAT_LEVEL_UNDRAIN, 'a drain can be undone')
        // In turn with the rounds, as a drain: a round computed while the node was draining
        // lands before this, not after.
        const r = await this.#inTurn(() => this.#host.propose({ type: 'undrainNode', nodeId }))
        if (!r.ok) throw mqError(r.code, r.message)
        void this.round()
        return r.value as boolean
      },
      drainNode: async (nodeId) => {
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        checkNodeId('node_id', nodeId)
        // Checked before proposing, as removeNode: an unknown id would cost a Raft entry.
        if (!(await this.#registered(state, nodeId)))
          throw new InvalidArgumentError(`node ${nodeId} is not registered`)
        // In turn with the rounds, as scaleDataGroups: a round's createGroup or replica change
        // computed before the drain landed after it, on the node just answered drained.
        const r = await this.#inTurn(() => this.#host.propose({ type: 'drainNode', nodeId }))
        if (!r.ok) throw mqError(r.code, r.message)
        void this.round()
        // The meta state counts a meta vote only once it records the members (format level 3):
        // before, the vote is in the meta group's Raft configuration alone, and it does not move.
        // Answered 0 ("drained, it can be shut down"), the operator stopped a meta voter (an
        // audit). The configuration counts as removeNode reads it (a member it names and the
        // state does not: a learner or voter a retargeted change left, removed at its next step).
        const now = this.#leading()
        const counted = now?.metaMembers()?.includes(nodeId) || now?.metaChange()?.add === nodeId
        const { voters, learners } = this.#host.metaMembership()
        const uncounted = !counted && (voters.includes(nodeId) || learners.includes(nodeId))
        return (r.value as number) + Number(uncounted)
      },
      removeNode: async (nodeId) => {
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        this.#requireLevel(state, FORMAT_LEVEL_REMOVE_NODE, 'a node can be removed')
        checkNodeId('node_id', nodeId)
        if (!(await this.#registered(state, nodeId)))
          throw new InvalidArgumentError(`node ${nodeId} is not registered`)
        // The meta group's Raft configuration may name it before the meta state does (a change
        // under way): the state's own check covers the rest.
        const { voters, learners } = this.#host.metaMembership()
        if (voters.includes(nodeId) || learners.includes(nodeId)) {
          throw new InvalidArgumentError(
            `node ${nodeId} still holds a meta group vote: drain it first (mq node drain ${nodeId}) and wait until it holds nothing`,
          )
        }
        // Only a node this leader has not heard from for as long as it takes to count as dead,
        // having led that long itself: a silence recorded before it took over says nothing of
        // a node that came back since and has not reached this leader yet (as round()'s heardAll).
        const now = this.#now()
        if (
          this.#leaderSinceMs === 0 ||
          now - this.#leaderSinceMs < NODE_DEAD_MS ||
          now - this.#silentSinceMs(state, nodeId) < NODE_DEAD_MS
        ) {
          const heardMs = this.#lastSeenMs.get(nodeId)
          const why =
            heardMs !== undefined && now - heardMs < NODE_DEAD_MS
              ? `is alive (heard from ${((now - heardMs) / 1000).toFixed(1)} s ago)`
              : 'may be alive (this meta leader took over too recently to tell)'
          throw new InvalidArgumentError(
            `node ${nodeId} ${why}: stop its process, then remove it once it has been silent for ${NODE_DEAD_MS / 1000} s`,
          )
        }
        const r = await this.#host.propose({ type: 'removeNode', nodeId })
        if (!r.ok) throw mqError(r.code, r.message)
        this.#forget(nodeId)
      },
      fenceDeletedQueue: async (queue) => {
        const state = this.#leading()
        if (!state) return
        const storedAs = storedQueueName(queue.name, queue.queueId)
        const byGroup = new Map<number, number[]>()
        for (const p of queue.partitions)
          byGroup.set(p.groupId, [...(byGroup.get(p.groupId) ?? []), p.partition])
        const fenced = Promise.all(
          [...byGroup].map(async ([groupId, partitions]) => {
            const group = state.group(groupId)
            if (!group) return
            try {
              await this.#host.calls.callLeader(
                leaderFirst(state, group.leaderId, group.replicas),
                (c, md, opts, cb) => c.peer.fencePartitions({ groupId, storedAs, partitions }, md, opts, cb),
                FENCE_WAIT_MS,
                { attemptsMax: group.replicas.length + 1 },
              )
            } catch (error) {
              // A group of an older version (UNIMPLEMENTED), or one without a leader: the orphan
              // sweeper drops the partitions within its period; until then a route cached from
              // before the deletion may still reach them.
              this.#log.warn(
                { group: groupId, err: error },
                `mq-server: deleted queue ${queue.name}: group ${groupId} did not fence its partitions (the orphan sweeper will drop them): ${(error as Error).message}`,
              )
            }
          }),
        )
        let timer: NodeJS.Timeout | undefined
        const waited = new Promise<void>((resolve) => {
          timer = setTimeout(resolve, FENCE_WAIT_MS)
        })
        await Promise.race([fenced, waited]).finally(() => clearTimeout(timer))
      },
      transferLeader: async (groupId, toNodeId) => {
        const state = this.#leading()
        if (!state) throw this.#host.notLeader()
        checkNodeId('to_node_id', toNodeId)
        // A node no one registered is named as such, as drain and remove name it: `mq` tells
        // a missing thing by that message (exit 2); "not a replica" read as a bad value (1).
        if (!state.node(toNodeId)) throw new InvalidArgumentError(`node ${toNodeId} is not registered`)
        // The drain moves its leaderships away (and leader balancing leaves it none): a transfer
        // to it was accepted and never carried out.
        if (state.draining(toNodeId)) {
          throw new InvalidArgumentError(
            `node ${toNodeId} is being drained: it is to lead nothing (mq node undrain ${toNodeId} first)`,
          )
        }
        if (groupId === 0) {
          const { voters } = this.#host.metaMembership()
          if (!voters.includes(toNodeId)) {
            throw new InvalidArgumentError(
              `node ${toNodeId} is not a voter of the meta group (${[...voters].sort().join(', ')})`,
            )
          }
          this.#host.transferMetaLeader(toNodeId)
          return
        }
        // A data group: the choice is recorded here; the group's leader carries it out when
        // its next heartbeat is answered (and leader balancing keeps it there).
        const group = state.group(groupId)
        if (!group) throw new InvalidArgumentError(`data group ${groupId} does not exist`)
        if (!group.replicas.includes(toNodeId)) {
          throw new InvalidArgumentError(
            `node ${toNodeId} is not a replica of data group ${groupId} (${group.replicas.join(', ')})`,
          )
        }
        this.#leaderOverrides.set(groupId, toNodeId)
      },
    }
  }

  /** Forgets the liveness and the reports of `nodeId` (no longer a member). */
  #forget(nodeId: string): void {
    this.#lastSeenMs.delete(nodeId)
    this.#stableSinceMs.delete(nodeId)
    this.#reports.delete(nodeId)
  }

  /** The meta leader's side of a node heartbeat: liveness, registration, leader reports, assignments. */
  async onHeartbeat(req: HeartbeatRequest): Promise<Omit<HeartbeatResponse, 'tokens' | 'tokensFingerprint'>> {
    let state = this.#leading()
    if (!state) throw this.#host.notLeader()
    // From FORMAT_LEVEL_STORE_ID a node id answers only from the store it registered with: a
    // wiped data dir or a second process under the id is refused (the node stops on it) before
    // its heartbeat counts as the node's liveness or its reports as the node's.
    const clusterLevel = this.#formatLevel(state)
    const claim =
      clusterLevel >= FORMAT_LEVEL_STORE_ID && isStoreId(req.storeId)
        ? { storeId: req.storeId, fresh: req.freshStore }
        : undefined
    const seenMs = this.#now()
    const conflict = claim && storeConflict(req.nodeId, state.node(req.nodeId), claim, seenMs)
    if (conflict) throw new InvalidArgumentError(conflict)
    // Nor does a node below the cluster's level count (an older version, or pinned lower after
    // the level rose): registered, it would lower the level after entries of it were written,
    // and its replicas would refuse what they cannot read while the others apply it. Refused,
    // it stops (a version that knows this refusal).
    const formatLevel = formatLevelOf(req.formatLevel)
    if (formatLevel < clusterLevel)
      throw new InvalidArgumentError(belowClusterLevelMessage(req.nodeId, formatLevel, clusterLevel))
    // A removed node may not register again: refused here, without an entry per heartbeat (and
    // before it counts: its liveness and report were kept for the rest of the term).
    if (state.wasRemovedNode(req.nodeId)) throw new InvalidArgumentError(removedNodeMessage(req.nodeId))
    // Every node dials a member's address (peer-transport) and clients get it in routes: one
    // that is no host:port (a line break, a space) is refused before it is registered. Taken,
    // grpc-js threw where a node dialed it (until 2026-12-07, an audit: out of the transport's
    // flush, ending the process). A registered address is not checked again.
    if (state.node(req.nodeId)?.address !== req.address) {
      try {
        parseAddress(req.address)
      } catch (error) {
        throw new InvalidArgumentError(`cannot register node ${req.nodeId}: ${(error as Error).message}`)
      }
    }
    const lastMs = this.#lastSeenMs.get(req.nodeId)
    // A node not heard from for a while (restarted, paused, cut off) is stable again only after
    // TRANSFER_TARGET_STABLE_MS of regular heartbeats: it is still catching up its groups.
    if (lastMs === undefined || seenMs - lastMs > HEARTBEAT_GAP_MS)
      this.#stableSinceMs.set(req.nodeId, seenMs)
    this.#lastSeenMs.set(req.nodeId, seenMs)
    this.#reports.set(req.nodeId, new Map(req.groups.map((g) => [g.groupId, g])))
    const known = state.node(req.nodeId)
    if (
      known?.address !== req.address ||
      (known.formatLevel ?? 1) !== formatLevel ||
      (claim !== undefined && known.storeId !== claim.storeId)
    ) {
      const r = await this.#host.propose({
        type: 'registerNode',
        nodeId: req.nodeId,
        address: req.address,
        formatLevel,
        ...(claim ? { storeId: claim.storeId, freshStore: claim.fresh } : {}),
      })
      if (!r.ok) {
        // One the meta state refuses to register is not a member: none of it is kept (one
        // entry per node id heard, for the rest of the term, as nodes come and go).
        if (!state.node(req.nodeId)) this.#forget(req.nodeId)
        throw new InvalidArgumentError(`cannot register node ${req.nodeId}: ${r.message}`)
      }
    } else if (known.silentSinceMs !== undefined && clusterLevel >= FORMAT_LEVEL_SILENCE) {
      await this.#host.propose({ type: 'markHeard', nodeId: req.nodeId })
    }
    for (const g of req.groups) {
      const known = state.group(g.groupId)
      if (
        known &&
        g.leaderId === req.nodeId &&
        (g.term > known.leaderTerm || known.leaderId !== g.leaderId)
      ) {
        await this.#host.propose({
          type: 'reportLeader',
          groupId: g.groupId,
          leaderId: g.leaderId,
          term: g.term,
        })
      }
    }
    state = this.#leading()
    if (!state) throw this.#host.notLeader()
    // Leadership goes only to nodes heard from within a few heartbeats: a transfer to a node
    // that just died would hold its group's proposals until an election timeout passes.
    // A live node keeps the leaderships it holds even when its heartbeat is a little late.
    const now = this.#now()
    const keepers = new Set([...this.#alive(state)].filter((id) => !state?.draining(id)))
    const leaders = new Set(
      [...keepers].filter((id) => now - (this.#lastSeenMs.get(id) ?? 0) < TRANSFER_TARGET_FRESH_MS),
    )
    const stable = new Set(
      [...leaders].filter((id) => now - (this.#stableSinceMs.get(id) ?? now) >= TRANSFER_TARGET_STABLE_MS),
    )
    // A group being copied from or into keeps its leader: a transfer would restart the copy.
    // Not against an operator's TransferLeader, which does not wait (README).
    const moving = new Set(state.moves().flatMap((m) => [m.fromGroup, m.toGroup]))
    let hosted = new Set(state.groupsOf(req.nodeId).map((g) => g.groupId))
    const replaced = (s: MetaState, id: number) => s.group(id) !== undefined && !hosted.has(id)
    if (req.groups.some((g) => replaced(state as MetaState, g.groupId)) || leavesMeta(state, req)) {
      // Deleting a replica is final: decide it only on a state that has every committed entry.
      await this.#host.barrier()
      state = this.#leading()
      if (!state) throw this.#host.notLeader()
      hosted = new Set(state.groupsOf(req.nodeId).map((g) => g.groupId))
    }
    const current = state
    const metaMembers = current.metaMembers() ?? this.#host.metaMembership().voters
    return {
      transfers: this.#balance
        .transfersFor(state, req.nodeId, { leaders, keepers, stable, overrides: this.#leaderOverrides })
        .filter((t) => !moving.has(t.groupId) || this.#leaderOverrides.get(t.groupId) === t.toNodeId),
      metaLeaderId: this.#host.nodeId,
      routeEpoch: state.routeEpoch,
      // Left out for a node that holds this list already.
      nodes:
        req.nodesFingerprint === current.nodesFingerprint()
          ? []
          : current.nodes().map((n) => ({ nodeId: n.nodeId, address: n.address })),
      nodesFingerprint: current.nodesFingerprint(),
      // A founder that never left bootstraps with the founding membership (its log's first
      // entries); any other replica (one being added) starts with none and learns it from the
      // leader's log.
      groups: state.groupsOf(req.nodeId).map((g): GroupAssignment => {
        const founders = g.founders ?? g.replicas
        const founder = founders.includes(req.nodeId) && g.replicas.includes(req.nodeId)
        return { groupId: g.groupId, replicas: founder ? [...founders] : [] }
      }),
      // Only what the meta state says is gone: a removed group, or a replica replaced.
      removedGroupIds: req.groups
        .map((g) => g.groupId)
        .filter((id) => current.wasRemoved(id) || replaced(current, id)),
      formatLevel: this.#formatLevel(current),
      growEpoch: current.growEpoch(),
      changedEpoch: current.changedEpoch(),
      hostMeta: current.metaChange()?.add === req.nodeId,
      leaveMeta: leavesMeta(current, req),
      metaMembers: metaMembers.flatMap((nodeId): NodeAddress[] => {
        const address = current.node(nodeId)?.address
        return address ? [{ nodeId, address }] : []
      }),
    }
  }

  /**
   * The cluster's format level: the meta state's (the nodes holding replicas), and the meta
   * group's own members as its Raft configuration names them, which a new cluster's state does
   * not record yet (a founder not registered yet counts as level 1).
   */
  /**
   * Replicas per data group: the meta state's (from format level 34, once recorded), else this
   * node's setting. Tells once when this node's setting is not the cluster's.
   */
  #replicationFactor(state: MetaState, level: number): number {
    const recorded = level >= FORMAT_LEVEL_REPLICATION_FACTOR ? state.replicationFactor() : undefined
    return this.#setting(
      'replicationFactor',
      recorded,
      this.#host.replicationFactor ?? this.#host.replicas,
      `the cluster keeps ${recorded} replicas per data group (\`mq cluster replication\` sets it)`,
    )
  }

  /**
   * The data groups wanted while no scale plan was asked for (0: as many as live nodes): the
   * meta state's (from format level 35, once recorded), else this node's setting. Tells once
   * when this node's setting is not the cluster's.
   */
  #dataGroups(state: MetaState, level: number): number {
    const recorded = level >= FORMAT_LEVEL_DATA_GROUPS ? state.dataGroups() : undefined
    const count = recorded === 0 ? 'as many data groups as live nodes' : `${recorded} data groups`
    return this.#setting(
      'dataGroups',
      recorded,
      this.#host.dataGroups,
      `the cluster wants ${count} until a scale plan (\`mq group scale\`) sets the count`,
    )
  }

  /** `recorded`, the cluster's, when there is one, else `own`; tells once when they differ. */
  #setting(
    name: 'replicationFactor' | 'dataGroups',
    recorded: number | undefined,
    own: number,
    says: string,
  ): number {
    if (recorded === undefined) return own
    if (recorded !== own && !this.#toldSettings.has(name)) {
      this.#toldSettings.add(name)
      this.#log.info(`${says}; this node's "${name}" ${own} (config file) is not used`)
    }
    return recorded
  }

  /**
   * Throws INVALID_ARGUMENT when the cluster runs below `needed`: `what` (…can be done) needs a
   * level some node's version does not read yet.
   */
  #requireLevel(state: MetaState, needed: number, what: string, note = ''): void {
    const level = this.#formatLevel(state)
    if (level < needed) {
      throw new InvalidArgumentError(
        `the cluster runs format level ${level}: ${what} from level ${needed}, once every node runs a version of it${note}`,
      )
    }
  }

  #formatLevel(state: MetaState): number {
    const { voters, learners } = this.#host.metaMembership()
    let level = state.formatLevel()
    for (const id of [...voters, ...learners]) level = Math.min(level, state.nodeFormatLevel(id))
    return level
  }

  /** One round of the controller (on a timer): drive the moves, then the plan's next steps. */
  async round(): Promise<void> {
    if (!this.#leading()) return
    if (this.#busy) return
    this.#busy = true
    try {
      await this.#inTurn(() => this.#roundInTurn())
    } finally {
      this.#busy = false
    }
  }

  /** Runs `fn` once what runs in turn before it ended (however it ended). */
  #inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(fn)
    this.#turn = run.then(
      () => {},
      () => {},
    )
    return run
  }

  /** A round's work: what it reads and proposes (in turn: see port().scaleDataGroups). */
  async #roundInTurn(): Promise<void> {
    try {
      if (!(await this.#caughtUp())) return
      this.#driveMoves()
      const state = this.#leading()
      if (!state) return
      const term = this.#term
      const level = this.#formatLevel(state)
      const heard = this.#alive(state)
      // A node registered below the level (heard before it rose, refused since) takes nothing:
      // a replica would make it a holder and lower the level after entries of it were written.
      const alive = new Set([...heard].filter((id) => state.nodeFormatLevel(id) >= level))
      // New groups go to live nodes that are not being drained.
      const placeable = new Set([...alive].filter((id) => !state.draining(id)))
      const factor = this.#replicationFactor(state, level)
      const now = this.#now()
      const silentSince = new Map(state.nodes().map((n) => [n.nodeId, this.#silentSinceMs(state, n.nodeId)]))
      // A new leader first hears who is alive (a node back from a long silence may not have
      // told any meta leader yet: its recorded silence alone would have it replaced).
      const heardAll = now - this.#leaderSinceMs >= NODE_DEAD_MS
      const lost = new Set(
        [...silentSince]
          .filter(([, since]) => heardAll && now - since > this.#host.replaceDeadAfterMs)
          .map(([id]) => id),
      )
      const actions: MetaCommand[] = controlActions(state, {
        alive: placeable,
        // A cluster founded by fewer nodes than the replication factor: as many as the live
        // nodes allow (no even count below the factor), never fewer than the founders (a new
        // leader has not heard from every node yet), nor more than the factor.
        replicas: Math.max(Math.min(this.#host.replicas, factor), replicasFor(factor, placeable.size)),
        defaultGroups: this.#dataGroups(state, level) || Math.max(heard.size, 1),
        movesMax: MOVES_CONCURRENT_MAX,
        namesGroupIds: level >= FORMAT_LEVEL_CREATE_GROUP_ID,
        // Until it has heard every node, a new leader plans no move into or out of a group whose
        // majority it has not heard from yet (it would move into a group its predecessor gave
        // up, and abort again); it aborts nothing meanwhile.
        lost: heardAll ? lost : unheard(state, heard),
        // Aborting a move needs every meta and data replica to read it (format level 37).
        abortsMoves: heardAll && level >= FORMAT_LEVEL_MOVE_ABORT,
        // Giving a change up needs every meta replica to read it (format level 36).
        closesHopelessChanges: heardAll && level >= FORMAT_LEVEL_ABANDON_CHANGE,
      })
      // A node that counts as dead is recorded as silent, so that the next meta leader goes on
      // counting its replacement timeout instead of starting it again (format level 5).
      if (level >= FORMAT_LEVEL_SILENCE) {
        for (const [nodeId, sinceMs] of silentSince) {
          if (now - sinceMs >= NODE_DEAD_MS && state.node(nodeId)?.silentSinceMs === undefined)
            actions.push({ type: 'markSilent', nodeId, sinceMs })
        }
      }
      const stalled = this.#stalls.stalled(now)
      actions.push(
        ...replicaActions(state, {
          alive,
          lost,
          stalled,
          changesMax: REPLICA_CHANGES_MAX,
          // Retargeting a stuck change needs every meta replica to read it (format level 4).
          ...(level >= FORMAT_LEVEL_REPLICA_RETARGET ? { groupVoters: this.#knownVoters(state) } : {}),
          // Giving a stuck change up needs every meta replica to read it (format level 36), and
          // a leader that has heard from every node: one being drained counts as gone when not
          // alive, and a node not heard yet by a new leader is no sign of that.
          abandon: heardAll && level >= FORMAT_LEVEL_ABANDON_CHANGE,
          // A change that removes nobody needs every meta replica to read it (format level 25).
          ...(level >= FORMAT_LEVEL_GROW_DATA_GROUPS ? { replicasWanted: factor } : {}),
          // A change that adds nobody needs every meta replica to read it (format level 34).
          ...(level >= FORMAT_LEVEL_REPLICATION_FACTOR && state.replicationFactor() !== undefined
            ? { replicasMax: factor }
            : {}),
        }),
      )
      // The first meta leader of format level 34 records its own setting as the cluster's: from
      // then on every meta leader goes by the one recorded (a node started with another
      // setting, once it led, grew or shrank every group to its own).
      if (level >= FORMAT_LEVEL_REPLICATION_FACTOR && state.replicationFactor() === undefined)
        actions.unshift({ type: 'setReplicationFactor', factor, initial: true })
      // Likewise its data group count (format level 35): a node with another "dataGroups", once
      // it led, created groups up to its own count (nothing removes them but a scale plan).
      if (level >= FORMAT_LEVEL_DATA_GROUPS && state.dataGroups() === undefined)
        actions.unshift({ type: 'recordDataGroups', count: this.#host.dataGroups })
      // The first meta leader records the founders (its Raft configuration: no change of the
      // meta group can have happened before); from then on a lost or drained voter is replaced.
      // Only once every node holding a replica reads these commands (format level 3).
      if (level >= FORMAT_LEVEL_META_MEMBERS) {
        if (!state.metaMembers())
          actions.unshift({ type: 'initMetaMembers', voters: this.#host.metaMembership().voters })
        // Its choices (which voter to shrink away, whether all are alive to grow) read `alive`
        // as complete: a voter not heard from yet is not a silent one.
        const metaChange = heardAll
          ? metaChangeAction(state, {
              alive,
              lost,
              stalled,
              voters: this.#host.metaMembership().voters,
              leaderId: this.#host.nodeId,
              abandon: level >= FORMAT_LEVEL_ABANDON_CHANGE,
            })
          : undefined
        if (metaChange) actions.push(metaChange)
      }
      // Each action is checked by the meta state on its own: one refused (its group changed
      // meanwhile, say) does not hold up the others (a refused removal once held up every
      // replica change after it, round after round). Only in the term they were decided in: a
      // proposal that outlasted it (another node led meanwhile, and this one again) has the
      // rest land after that leader's entries, which they never saw (a new scale plan's group
      // removed as the old plan's, an audit); the next round decides again.
      for (const action of actions) {
        if (!this.#leading() || this.#term !== term) return
        const abandoned =
          action.type === 'abandonReplicaChange'
            ? state.replicaChange(action.groupId)
            : action.type === 'abandonMetaChange'
              ? state.metaChange()
              : undefined
        const r = await this.#host.propose(action)
        if (action.type === 'abortMove' && r.ok) {
          const m = state.move(action.moveId)
          this.#log.warn(
            { group: m?.toGroup },
            `mq-server: move ${action.moveId}${m ? ` (${m.queue}/${m.partition} from group ${m.fromGroup} to group ${m.toGroup})` : ''} aborted: its target group lost its majority (its nodes are gone); the partition stays in its source group, which lifts its fence`,
          )
        }
        if (abandoned && r.ok)
          this.#log.warn(
            { group: abandoned.groupId },
            state.scale?.removing.includes(abandoned.groupId)
              ? `mq-server: group ${abandoned.groupId}: gave up adding a replica on ${abandoned.add}: the group is being removed (its replicas go with it)`
              : `mq-server: group ${abandoned.groupId}: gave up adding a replica on ${abandoned.add}: that node is gone and no other node can take its place (the group keeps the replicas it has; its learner there is removed)`,
          )
      }
      this.#driveMoves()
      this.#driveReplicaChanges(heardAll ? alive : undefined)
    } catch {
      // Not the leader any more, or the meta group is busy: the next round tries again.
    }
  }

  /**
   * Whether this leader's meta state holds every entry committed before its term's first round:
   * a new leader may not have applied its predecessor's last entries yet, and a round on that
   * state would step a replica change already finished (its group's leader then removing the
   * learner of the change after it) or start one the predecessor started. One barrier a term.
   */
  async #caughtUp(): Promise<boolean> {
    // The term this round runs in: round() read it before waiting its turn, which may have
    // outlasted that term (a ScaleDataGroups proposal failing once this node led again).
    if (!this.#leading()) return false
    const term = this.#term
    if (this.#caughtUpTerm === term) return true
    await this.#host.barrier()
    if (!this.#leading() || this.#term !== term) return false
    this.#caughtUpTerm = term
    return true
  }

  #driveMoves(): void {
    const state = this.#leading()
    if (!state) return
    for (const m of state.moves()) {
      if (this.#driving.has(m.moveId)) continue
      const driving = this.#drive(m.moveId)
        .catch((error: unknown) => {
          this.#warnRetry(
            `move ${m.moveId}`,
            `mq-server: move ${m.moveId} (${m.queue}/${m.partition}) will be retried: ${(error as Error).message}`,
          )
        })
        .finally(() => this.#driving.delete(m.moveId))
      this.#driving.set(m.moveId, driving)
    }
  }

  /**
   * One step of each replica change under way (one call per change per round): a data
   * group's on its leader (Peer.ChangeReplicas), the meta group's on this node, its leader.
   * `alive`: the nodes alive, once this leader has heard from every node (else undefined).
   */
  #driveReplicaChanges(alive: ReadonlySet<string> | undefined): void {
    const state = this.#leading()
    if (!state) return
    for (const change of state.replicaChanges()) {
      const group = state.group(change.groupId)
      if (!group) continue
      // A shrink adds nobody ('').
      const replicas = leaderFirst(
        state,
        group.leaderId,
        [...group.replicas, change.add].filter((r) => r !== ''),
      )
      const finish = (voters: readonly string[]): MetaCommand => {
        const removed = removedBesides(change, group.replicas, voters)
        return { type: 'finishReplicaChange', groupId: change.groupId, ...(removed ? { removed } : {}) }
      }
      this.#stepChange(change, finish, () =>
        this.#host.calls.callLeader<ChangeReplicasResponse>(
          replicas,
          (c, md, opts, cb) =>
            c.peer.changeReplicas(
              {
                groupId: change.groupId,
                add: change.add,
                remove: change.remove,
                addCaughtUp: false,
                removeFirst: this.#removeFirst(change, group.replicas, alive),
                replicas: [...group.replicas],
                // A shrink's leader may remove one of these instead of `remove` (none until
                // this leader has heard from every node).
                away: change.add === '' && alive ? group.replicas.filter((r) => !alive.has(r)) : [],
                metaTerm: this.#host.metaTerm?.() ?? 0,
              },
              md,
              opts,
              cb,
            ),
          CHANGE_CALL_MS,
          // Not sent again to another replica once the change was retargeted or finished.
          { stillWanted: () => this.#underWay(change) },
        ),
      )
    }
    const meta = state.metaChange()
    if (meta) {
      const finish = (voters: readonly string[]): MetaCommand => {
        const removed = removedBesides(meta, state.metaMembers() ?? [], voters)
        return { type: 'finishMetaChange', ...(removed ? { removed } : {}) }
      }
      this.#stepChange(meta, finish, () =>
        this.#host.changeMetaMembers({
          add: meta.add,
          remove: meta.remove,
          removeFirst: this.#removeFirst(meta, state.metaMembers() ?? [], alive),
          replicas: [...(state.metaMembers() ?? [])],
        }),
      )
    }
  }

  /**
   * Whether `change`'s next step removes its replica before promoting the new one (added as a
   * learner first, then the removal once it caught up: replica-changer.ts), decided at each
   * step: when its node is not alive, whatever the change's reason (a dead node drained,
   * or one that died during a drain or a balance: added first, {a, b, dead, new} would need
   * the new node for a majority), and the other `members` alive are a majority without it
   * (removing a live node cut off from this leader alone while another member is dead would
   * leave a group that needs the dead one; the group's leader checks it too, from its own
   * replication progress). `alive` undefined (this leader has not heard from every node yet):
   * by the reason recorded, as the leader that started the change judged it.
   */
  #removeFirst(
    change: ReplicaChangeRecord,
    members: readonly string[],
    alive: ReadonlySet<string> | undefined,
  ): boolean {
    if (change.remove === '') return false
    if (!alive) return change.reason === ReplicaChangeReason.Dead
    const up = (id: string) => id === this.#host.nodeId || alive.has(id)
    if (up(change.remove)) return false
    const left = members.filter((m) => m !== change.remove)
    return left.filter(up).length >= Math.floor(left.length / 2) + 1
  }

  /** Whether replica change `change` is still the one under way for its group (0: the meta group's). */
  #underWay(change: ReplicaChangeRecord): boolean {
    const state = this.#host.leaderState()
    const now =
      change.groupId === 0
        ? state?.metaChange()
        : state?.replicaChanges().find((c) => c.groupId === change.groupId)
    return now?.add === change.add && now.remove === change.remove
  }

  /**
   * Takes `change`'s next step unless one is in flight; proposes `finish` (of the done answer's
   * voters) once it is done.
   */
  #stepChange(
    change: ReplicaChangeRecord,
    finish: (voters: readonly string[]) => MetaCommand,
    step: () => Promise<ChangeReplicasResponse>,
  ): void {
    const groupId = change.groupId
    if (this.#changing.has(groupId)) return
    this.#changing.add(groupId)
    void step()
      .then(async (r) => {
        if (r.voters.length === 0) this.#changeVoters.delete(groupId)
        else {
          const voters = r.step === 'promote' ? [...r.voters, change.add] : r.voters
          this.#changeVoters.set(groupId, { add: change.add, voters })
        }
        if (this.#stalls.note(groupId, change.add, r, this.#now()))
          this.#log.warn(
            { group: groupId },
            `mq-server: group ${groupId}: the replica being added on ${change.add} made no progress for ${this.#stalls.stallMs} ms (match ${r.addMatch}, ${r.addImagePages ?? 0} image pages served); the change goes to another node if one can take it`,
          )
        if (r.step)
          this.#log.info(
            { group: groupId },
            `mq-server: group ${groupId}: ${r.step} (${change.remove || '∅'} → ${change.add || '∅'})`,
          )
        // Only the change stepped: an answer that came late (this node leads again, another
        // leader having finished that change and started the group's next) finished the next.
        if (!r.done || !this.#underWay(change)) return
        const command = finish(r.voters)
        const finished = await this.#host.propose(command)
        if (finished.ok) {
          const what = finishedChange(
            change,
            command.type === 'finishReplicaChange' || command.type === 'finishMetaChange'
              ? command.removed
              : undefined,
          )
          this.#log.info(
            { group: groupId },
            `mq-server: group ${groupId} ${what} (${change.reason}) in ${Date.now() - change.startedAtMs} ms`,
          )
        }
      })
      .catch((error: unknown) => {
        this.#changeVoters.delete(groupId)
        // Its learner's progress is timed over answers in a row: no stall is found across a
        // silence of the group's leader, which may be what holds the learner up.
        this.#stalls.forget(groupId)
        this.#warnRetry(
          `group ${groupId}`,
          `mq-server: replica change of group ${groupId} will be retried: ${(error as Error).message}`,
        )
      })
      .finally(() => this.#changing.delete(groupId))
  }

  /**
   * Since when node `id` has been silent as far as this leader knows: its last heartbeat here,
   * or the silence a meta leader recorded (`markSilent`), whichever is later; without a record,
   * not before this leader took over (it cannot know what the node did before).
   */
  #silentSinceMs(state: MetaState, id: string): number {
    const heard = this.#lastSeenMs.get(id) ?? 0
    const recorded = state.node(id)?.silentSinceMs
    return Math.max(heard, recorded ?? this.#leaderSinceMs)
  }

  /** The voters of the data groups whose change under way their leader last answered about. */
  #knownVoters(state: MetaState): Map<number, readonly string[]> {
    const known = new Map<number, readonly string[]>()
    for (const [groupId, answer] of this.#changeVoters) {
      if (state.replicaChange(groupId)?.add === answer.add) known.set(groupId, answer.voters)
      else this.#changeVoters.delete(groupId)
    }
    return known
  }

  /** Carries move `moveId` from the phase the meta state records to its end. */
  async #drive(moveId: number): Promise<void> {
    const startedMs = Date.now()
    let copy: { ms: number; response: MovePartitionResponse } | undefined
    // At most two phases: copy, then drop (or abort alone).
    for (let step = 0; step < 2; step++) {
      const state = this.#leading()
      const move = state?.move(moveId)
      const queue = move ? state?.queue(move.queue) : undefined
      const source = move ? state?.group(move.fromGroup) : undefined
      const target = move ? state?.group(move.toGroup) : undefined
      if (!state || !move || !queue || !source || !target) return
      const request: MovePartitionRequest = {
        moveId,
        storedAs: storedQueueName(move.queue, move.queueId),
        partition: move.partition,
        fromGroup: move.fromGroup,
        toGroup: move.toGroup,
        phase: move.phase,
        targetReplicas: leaderFirst(state, target.leaderId, target.replicas),
        configJson: JSON.stringify(partitionConfigOf(queue.config, this.#formatLevel(state))),
      }
      // A move abandoned meanwhile (its queue deleted) is not sent again to a new source leader:
      // it would copy the whole partition of a deleted queue for nothing.
      const underWay = () => this.#leading()?.move(moveId)?.phase === move.phase
      const response = await this.#host.calls.callLeader<MovePartitionResponse>(
        leaderFirst(state, source.leaderId, source.replicas),
        (c, md, opts, cb) => c.peer.movePartition(request, md, opts, cb),
        MOVE_CALL_MS,
        { stillWanted: underWay },
      )
      const next: MetaCommand =
        move.phase === MovePhase.Copy ? { type: 'completeMove', moveId } : { type: 'finishMove', moveId }
      const r = await this.#host.propose(next)
      if (!r.ok) throw new Error(`${next.type} of move ${moveId}: ${r.message}`)
      if (move.phase === MovePhase.Abort) {
        this.#log.info(
          `mq-server: move ${moveId} of ${move.queue}/${move.partition} ended aborted: the partition serves in group ${move.fromGroup} again`,
        )
        return
      }
      if (move.phase === MovePhase.Copy) {
        copy = { ms: Date.now() - startedMs, response }
      } else {
        const copied = copy
          ? `copied ${copy.response.chunks} chunks (${copy.response.bytes} bytes) in ${copy.ms} ms, `
          : ''
        this.#log.info(
          `mq-server: moved ${move.queue}/${move.partition} from group ${move.fromGroup} to group ${move.toGroup}: ${copied}done in ${Date.now() - startedMs} ms`,
        )
        return
      }
    }
  }
}

/**
 * Whether the node sending `req` must drop its meta replica: it reports one, the meta state
 * has recorded the members and the node is none of them, nor the one being added. The
 * members change only when a finished change is applied (after its Raft configuration
 * change committed), so a node told to leave is out of the meta group for good.
 */
function leavesMeta(state: MetaState, req: HeartbeatRequest): boolean {
  const members = state.metaMembers()
  return (
    req.hostsMeta &&
    members !== undefined &&
    !members.includes(req.nodeId) &&
    state.metaChange()?.add !== req.nodeId
  )
}

/** The registered nodes not among `alive`: those a new meta leader has not heard from yet. */
function unheard(state: MetaState, alive: ReadonlySet<string>): Set<string> {
  return new Set(
    state
      .nodes()
      .map((n) => n.nodeId)
      .filter((id) => !alive.has(id)),
  )
}

/** A group's replicas with their addresses, its last reported leader first. */
function leaderFirst(state: MetaState, leaderId: string, replicas: readonly string[]): ReplicaAddress[] {
  const ordered = [...replicas].sort((a, b) => Number(b === leaderId) - Number(a === leaderId))
  return ordered.map((nodeId) => ({ nodeId, address: state.node(nodeId)?.address ?? '' }))
}

/**
 * The member a done change that adds nobody took out other than its `remove`, by the done
 * answer's voters: a data group's shrink may remove an away voter instead (replica-changer.ts),
 * and a change given up finds the one a replacement removed first gone. One group's rule and
 * the meta group's alike (the meta group's shrink never removes another voter: none found).
 */
function removedBesides(
  change: ReplicaChangeRecord,
  recorded: readonly string[],
  voters: readonly string[],
): string | undefined {
  if (change.add !== '') return undefined
  const gone = recorded.filter((r) => !voters.includes(r))
  return gone.length === 1 && gone[0] !== change.remove ? gone[0] : undefined
}

/** What a finished replica change did, for the log (`removed`: the voter a shrink's or a given-up change's finish names). */
function finishedChange(change: ReplicaChangeRecord, removed: string | undefined): string {
  if (change.add === '' && change.remove === '')
    return `gave up a replica change (its node was gone)${removed ? `, without replica ${removed}, removed before` : ''}`
  if (change.remove === '') return `added voter ${change.add}`
  if (change.add === '') return `removed voter ${removed ?? change.remove}`
  return `replaced replica ${change.remove} by ${change.add}`
}
