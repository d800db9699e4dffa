import {
  FORMAT_LEVEL_DELIVERY_RATE,
  FORMAT_LEVEL_GROW_PARTITIONS,
  FORMAT_LEVEL_MESSAGE_TTL,
  FORMAT_LEVEL_ORDERED_KEYS,
  FORMAT_LEVEL_PAUSE,
  FORMAT_LEVEL_RETRY_BACKOFF,
  InvalidArgumentError,
  LimitExceededError,
  type MetaServer,
  mqError,
  PermissionDeniedError,
  QueueNotFoundError,
  QueueRoute,
  queueNameProblem,
  type UnaryCallContext,
  unaryHandler as unary,
} from '@mq/protocol'
import { requireFormatLevel } from './format-gate'
import type { MetaCommand } from './meta-commands'
import {
  META_LIMITS,
  type MetaResult,
  type MetaState,
  type QueueRecord,
  type QueueScope,
  replicationFactorError,
} from './meta-state'
import { applyQueueConfigUpdate, QUEUE_DEFAULTS, QUEUE_LIMITS, sameSettings } from './queue-config'
import { changeOf, groupStatusesOf, type Liveness, nodeStatusesOf, routeOf } from './routes'
import { scaleProgress } from './scale-plan'
import { tokenHandlers } from './token-handlers'

/** What the meta RPCs need from the meta group replica they run on. */
export interface MetaGroupPort {
  /**
   * Proposes `command` and resolves with its result once applied on this replica. Rejects
   * with NotLeaderError (with the leader hint) on a follower, UnavailableError without a leader.
   */
  propose(command: MetaCommand): Promise<MetaResult>
  /**
   * Resolves with the state once this replica has applied everything committed before the
   * call (a linearizable read through ReadIndex). Rejects like `propose`.
   */
  read(): Promise<MetaState>
  /**
   * The meta group's Raft term as this replica knows it: once `read()` resolved, at least the
   * term of every leader elected before that read began (the read was confirmed by a quorum
   * that had heard of them).
   */
  term(): number
  /** The meta leader's node id as this replica knows it ('' when unknown). */
  leaderId(): string
  liveness(): Liveness
  /** The meta group's Raft configuration as this replica knows it. */
  membership(): { readonly voters: readonly string[]; readonly learners: readonly string[] }
}

/** The cluster operations the meta leader's controller performs (scaling, moves, transfers). */
export interface ControllerPort {
  scaleDataGroups(
    groups: number,
  ): Promise<{ targetGroups: number; movesTotal: number; movesDone: number; state: string }>
  transferLeader(groupId: number, toNodeId: string): Promise<void>
  drainNode(nodeId: string): Promise<number>
  /** Undoes a drain (FORMAT_LEVEL_UNDRAIN); resolves with whether the node was draining. */
  undrainNode(nodeId: string): Promise<boolean>
  /** Forgets a stopped node that holds nothing (refused while it is alive or holds anything). */
  removeNode(nodeId: string): Promise<void>
  /** Sets the meta group's size; resolves with its voters now and the size wanted. */
  setMetaVoters(voters: number): Promise<{ voters: string[]; votersWanted: number }>
  /**
   * Sets the replication factor (FORMAT_LEVEL_REPLICATION_FACTOR); resolves with the one before
   * (0: none recorded).
   */
  setReplicationFactor(factor: number): Promise<number>
  /**
   * Has the data groups that held a deleted queue's partitions fence them, so that none of
   * them serves that incarnation again (a route cached from before the deletion); resolves
   * when done or when it gave up on a group (the orphan sweeper drops the partitions anyway).
   */
  fenceDeletedQueue(queue: QueueRecord): Promise<void>
}

const LIST_LIMIT_MAX = 1000
/**
 * Queue names one GetRoutes may ask for: as many as the cluster may have queues (nodes before
 * 2026-12-02 ask in one call for the routes of every queue their data groups hold); the
 * answer's bytes are bounded too (ROUTES_BYTES_MAX).
 */
export const GET_ROUTES_QUEUES_MAX = META_LIMITS.queuesMax
/**
 * Routes a GetRoutes that names no queue answers: the first queues by name, at most this many.
 * That form asked for every queue's route (SDKs before 2026-12-02 send it on every connect, and
 * ignore the answer), an answer that grew with the cluster past what a call may carry; the
 * routes of every queue are ListQueues's pages.
 */
export const GET_ROUTES_UNNAMED_MAX = 100
/**
 * Bytes of routes a ListQueues page carries at most (a GetRoutes, three times that): under
 * the 64 MiB a call may carry. A node asks for its hosted queues' routes 1,000 at a time
 * (apps/server node.ts).
 */
export const ROUTES_BYTES_MAX = 16 * 1024 * 1024

export interface MetaHandlerOptions {
  /** Bytes of routes one answer carries at most (tests make it small). Default ROUTES_BYTES_MAX. */
  readonly routesBytesMax?: number
  /**
   * The queues a call's caller may see, from its credentials (`ctx.metadata`); undefined: all
   * of them. ListQueues, GetRoutes and ClusterStatus's moves show only those, and
   * DescribeQueue refuses the others; a page of ListQueues is filled from further on (read
   * under the scope's prefixes alone), so its next-page token is a name the caller sees.
   */
  readonly queueScope?: (ctx: UnaryCallContext) => QueueScope | undefined
  /**
   * Why CreateToken may not give a token `name` here (undefined: it may): mq-server refuses the
   * names of its own token file's tokens, which would otherwise name two callers alike.
   */
  readonly tokenNameTaken?: (name: string) => string | undefined
}

/** The Meta service's gRPC handlers over a meta group replica. */
export function metaHandlers(
  meta: MetaGroupPort,
  controller: ControllerPort,
  options: MetaHandlerOptions = {},
): MetaServer {
  const routesBytesMax = options.routesBytesMax ?? ROUTES_BYTES_MAX
  const scopeOf = options.queueScope ?? (() => undefined)
  const committed = async (command: MetaCommand): Promise<unknown> => {
    const r = await meta.propose(command)
    if (!r.ok) throw mqError(r.code, r.message)
    return r.value
  }
  const routeNow = async (name: string): Promise<QueueRoute> => {
    const state = await meta.read()
    const q = state.queue(name)
    if (!q) throw new QueueNotFoundError(`queue ${name} does not exist`)
    return routeOf(state, q)
  }
  /**
   * Refuses what `update` or a new queue's config asks for that not every replica could read
   * or apply yet (below its format level), naming the level: a message TTL (level 8), more
   * partitions (level 9; the count the queue has already is no change), a pause (level 12;
   * resuming is always allowed), ordered keys (level 14), a delivery rate limit (level 15;
   * lifting one is always allowed), a retry backoff or its maximum (level 16; turning it off
   * is always allowed). One read at most. While a node that
   * holds a replica has not registered (a new cluster's founder before its first heartbeat),
   * the level is not known: UNAVAILABLE, which clients retry, not a refusal.
   */
  const checkLevel = async (
    name: string,
    wanted: {
      readonly messageTtlMs?: number | undefined
      readonly partitions?: number | undefined
      readonly paused?: boolean | undefined
      readonly orderedKeys?: boolean | undefined
      readonly deliveryRate?: number | undefined
      readonly retryBackoffMinMs?: number | undefined
      readonly retryBackoffMaxMs?: number | undefined
    },
  ): Promise<void> => {
    if (
      !wanted.messageTtlMs &&
      wanted.partitions === undefined &&
      !wanted.paused &&
      !wanted.orderedKeys &&
      !wanted.deliveryRate &&
      !wanted.retryBackoffMinMs &&
      !wanted.retryBackoffMaxMs
    )
      return
    const state = await meta.read()
    const refuse = (what: string, needed: number): void => requireFormatLevel(state, what, needed)
    if (wanted.messageTtlMs) refuse('a message TTL can be set', FORMAT_LEVEL_MESSAGE_TTL)
    if (wanted.partitions !== undefined && wanted.partitions !== state.queue(name)?.config.partitions)
      refuse('partitions can be added', FORMAT_LEVEL_GROW_PARTITIONS)
    if (wanted.paused) refuse('a queue can be paused', FORMAT_LEVEL_PAUSE)
    if (wanted.orderedKeys) refuse('a queue can order its keys', FORMAT_LEVEL_ORDERED_KEYS)
    if (wanted.deliveryRate) refuse("a queue's deliveries can be rate limited", FORMAT_LEVEL_DELIVERY_RATE)
    // The maximum alone too: a meta replica of an earlier version would drop it, others keep it.
    if (wanted.retryBackoffMinMs || wanted.retryBackoffMaxMs)
      refuse("a queue's failed deliveries can be backed off", FORMAT_LEVEL_RETRY_BACKOFF)
  }
  /**
   * A dead-letter queue must be a valid name and not the queue itself (its dead letters would
   * go round). Checked here, before the command: an update's name is not checked when applied,
   * and a replica of an earlier version would not refuse a queue of its own.
   */
  /**
   * A queue's name, checked before its command is proposed: a name no queue can have (of
   * megabytes, say) is refused without being replicated and fsynced on every meta voter.
   */
  const checkName = (name: string): void => {
    const problem = queueNameProblem(name)
    if (problem) throw new InvalidArgumentError(problem)
  }
  const checkDeadLetterQueue = (name: string, deadLetterQueue: string | undefined): void => {
    if (!deadLetterQueue) return
    const problem = queueNameProblem(deadLetterQueue)
    if (problem) throw new InvalidArgumentError(`dead-letter ${problem}`)
    if (deadLetterQueue === name) {
      throw new InvalidArgumentError(
        `queue ${name} cannot be its own dead-letter queue; name another queue, or "" for its own dead-letter list`,
      )
    }
  }
  /**
   * Refuses `partitions` for queue `name` (which has `had` now) when they would take the
   * cluster past META_LIMITS.partitionsMax (all queues together, in `state`). A count past a
   * queue's own bound is refused as such, INVALID_ARGUMENT: as LIMIT_EXCEEDED (retriable) it
   * sent the SDK retrying until its deadline, for a count no queue may have.
   */
  const checkPartitionsRoom = (state: MetaState, name: string, partitions: number, had: number): void => {
    const [min, max] = QUEUE_LIMITS.partitions
    if (partitions > max)
      throw new InvalidArgumentError(`partitions must be an integer from ${min} to ${max}, got ${partitions}`)
    const adding = partitions - had
    if (adding <= 0) return
    let total = 0
    for (const n of state.partitionCounts().values()) total += n
    if (total + adding > META_LIMITS.partitionsMax) {
      throw new LimitExceededError(
        `queue ${name} would take the cluster's partitions to ${total + adding}, past the limit of ${META_LIMITS.partitionsMax} (all queues together): delete queues, or give this one fewer`,
      )
    }
  }
  return {
    getRoutes: unary(async (req, ctx) => {
      // Counted as sent, answered once per name: a name repeated would repeat its route.
      if (req.queues.length > GET_ROUTES_QUEUES_MAX) {
        throw new InvalidArgumentError(
          `GetRoutes names ${req.queues.length} queues; the limit is ${GET_ROUTES_QUEUES_MAX}: ask in parts`,
        )
      }
      const state = await meta.read()
      const scope = scopeOf(ctx)
      const queues =
        req.queues.length > 0
          ? [...new Set(req.queues)].flatMap((n) => (scope && !scope.sees(n) ? [] : (state.queue(n) ?? [])))
          : state.queues('', '', GET_ROUTES_UNNAMED_MAX, scope)
      const routes = queues.map((q) => routeOf(state, q))
      // Three pages' worth (48 MiB by default, still under the 64 MiB a call carries): nodes
      // before 2026-12-02 ask for every hosted queue's route in one call.
      const bytes = routes.reduce((n, r) => n + QueueRoute.encode(r).finish().length, 0)
      if (bytes > 3 * routesBytesMax) {
        throw new LimitExceededError(
          `the routes of the ${routes.length} queues asked for take ${bytes} bytes, over the ${3 * routesBytesMax} an answer carries: ask for fewer queues at once`,
        )
      }
      return { routeEpoch: state.routeEpoch, routes, metaTerm: meta.term() }
    }),
    createQueue: unary(async (req) => {
      checkName(req.name)
      await checkLevel(req.name, {
        messageTtlMs: req.config?.messageTtlMs,
        paused: req.config?.paused,
        orderedKeys: req.config?.orderedKeys,
        deliveryRate: req.config?.deliveryRate,
        retryBackoffMinMs: req.config?.retryBackoffMinMs,
        retryBackoffMaxMs: req.config?.retryBackoffMaxMs,
      })
      checkDeadLetterQueue(req.name, req.config?.deadLetterQueue)
      checkPartitionsRoom(await meta.read(), req.name, req.config?.partitions || QUEUE_DEFAULTS.partitions, 0)
      const record = (await committed({
        type: 'createQueue',
        name: req.name,
        config: req.config ?? {},
      })) as QueueRecord
      return routeOf(await meta.read(), record)
    }),
    updateQueue: unary(async (req) => {
      checkName(req.name)
      await checkLevel(req.name, req.update ?? {})
      checkDeadLetterQueue(req.name, req.update?.deadLetterQueue)
      // One read for the queue and the count (a read is a ReadIndex round on the meta group).
      const state = await meta.read()
      const queue = state.queue(req.name)
      if (queue) {
        const wanted = req.update?.partitions
        if (wanted !== undefined && wanted > 0)
          checkPartitionsRoom(state, req.name, wanted, queue.partitions.length)
        // An update that changes nothing is answered with the queue as it is: proposed, it
        // moved the route epoch, and every client's cached routes of every queue went stale
        // (a STALE_ROUTE round trip each). The meta state refuses what it would refuse.
        const next = applyQueueConfigUpdate(queue.config, req.update ?? {})
        if (typeof next !== 'string' && sameSettings(next, queue.config)) return routeOf(state, queue)
      }
      // The queue as this update left it (a later change, read back, would misreport this one).
      const record = (await committed({
        type: 'updateQueue',
        name: req.name,
        update: req.update ?? {},
      })) as QueueRecord
      return routeOf(await meta.read(), record)
    }),
    deleteQueue: unary(async (req) => {
      checkName(req.name)
      const deleted = (await committed({ type: 'deleteQueue', name: req.name })) as QueueRecord
      // Answered once no data group serves the queue any more: a producer routed before the
      // deletion cannot have a message acknowledged into it after this answer (into a queue
      // created again under the name, say, where it belongs).
      await controller.fenceDeletedQueue(deleted)
      return {}
    }),
    describeQueue: unary(async (req, ctx) => {
      // A name no queue can have is told as such (as every other call by name does), not as a
      // queue that does not exist, which sends the caller looking for one to create.
      checkName(req.name)
      // The server refuses a queue the caller may not see before this runs; this is the
      // handler's own guard, whatever calls it.
      if (scopeOf(ctx)?.sees(req.name) === false)
        throw new PermissionDeniedError(
          `queue ${JSON.stringify(req.name)} is not among the queues this caller may see`,
        )
      return routeNow(req.name)
    }),
    listQueues: unary(async (req, ctx) => {
      const limit = Math.min(req.limit || LIST_LIMIT_MAX, LIST_LIMIT_MAX)
      const state = await meta.read()
      const page = state.queues(req.prefix, req.pageToken, limit + 1, scopeOf(ctx))
      // A page ends at `limit` queues or ROUTES_BYTES_MAX bytes of routes (1,000 queues of 256
      // partitions passed the 64 MiB a call carries), whichever comes first; one route at least.
      const routes: QueueRoute[] = []
      let bytes = 0
      for (const q of page.slice(0, limit)) {
        const route = routeOf(state, q)
        bytes += QueueRoute.encode(route).finish().length
        if (routes.length > 0 && bytes > routesBytesMax) break
        routes.push(route)
      }
      const more = page.length > routes.length
      return {
        queues: routes,
        nextPageToken: more ? (routes[routes.length - 1]?.queue ?? '') : '',
      }
    }),
    clusterStatus: unary(async (_req, ctx) => {
      const state = await meta.read()
      const scope = scopeOf(ctx)
      const liveness = meta.liveness()
      const { voters, learners } = meta.membership()
      const metaChange = state.metaChange()
      return {
        metaLeaderId: meta.leaderId(),
        formatLevel: state.formatLevel(),
        metaVoters: [...voters].sort(),
        metaLearners: [...learners].sort(),
        metaVotersWanted: state.metaVotersWanted() ?? 0,
        replicationFactor: state.replicationFactor() ?? 0,
        ...(metaChange ? { metaChange: changeOf(metaChange) } : {}),
        routeEpoch: state.routeEpoch,
        nodes: nodeStatusesOf(state, liveness),
        groups: groupStatusesOf(state, liveness),
        ...(state.scale ? { scale: scaleProgress(state) } : {}),
        moves: state
          .moves()
          .filter((m) => !scope || scope.sees(m.queue))
          .map((m) => ({
            moveId: m.moveId,
            queue: m.queue,
            partition: m.partition,
            fromGroup: m.fromGroup,
            toGroup: m.toGroup,
            phase: m.phase,
            startedAtMs: m.startedAtMs,
          })),
      }
    }),
    scaleDataGroups: unary(async (req) => {
      if (!Number.isInteger(req.groups) || req.groups < 1) {
        throw new InvalidArgumentError(`groups must be a positive integer, got ${req.groups}`)
      }
      return { plan: await controller.scaleDataGroups(req.groups) }
    }),
    transferLeader: unary(async (req) => {
      await controller.transferLeader(req.groupId, req.toNodeId)
      return {}
    }),
    drainNode: unary(async (req) => ({ replicasRemaining: await controller.drainNode(req.nodeId) })),
    undrainNode: unary(async (req) => ({ wasDraining: await controller.undrainNode(req.nodeId) })),
    removeNode: unary(async (req) => {
      await controller.removeNode(req.nodeId)
      return {}
    }),
    setMetaVoters: unary(async (req) => controller.setMetaVoters(req.voters)),
    setReplicationFactor: unary(async (req) => {
      const wrong = replicationFactorError(req.factor)
      if (wrong !== undefined) throw new InvalidArgumentError(wrong)
      return { previous: await controller.setReplicationFactor(req.factor), factor: req.factor }
    }),
    ...tokenHandlers(meta, options.tokenNameTaken),
  }
}
