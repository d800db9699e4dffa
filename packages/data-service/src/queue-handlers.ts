import { setTimeout as sleep } from 'node:timers/promises'
import {
  FORMAT_LEVEL_LATE_GIVE_BACK,
  FORMAT_LEVEL_LEASE_ATTEMPTS,
  FORMAT_LEVEL_LEASE_TAGS,
  FORMAT_LEVEL_PIPELINING,
  FORMAT_LEVEL_REDRIVE_SPAN,
  FORMAT_LEVEL_RELEASE,
  FORMAT_LEVEL_TTL_REDRIVE_LINES,
  InternalError,
  InvalidArgumentError,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseRequest,
  type LeaseResponse,
  type LeaseResult,
  LimitExceededError,
  LONG_POLL_MS_MAX,
  type PartitionStats,
  type PartitionTarget,
  QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS,
  type QueueConfig,
  type QueueServer,
  SequenceGapError,
  StaleRouteError,
  type UnaryCallContext,
  UnavailableError,
  unaryHandler as unary,
} from '@mq/protocol'
import {
  type Command,
  type CommandResult,
  type Lease,
  type LeaseStatus,
  QUEUE_CONFIG_DEFAULT,
} from '@mq/weighted-queue'
import type { DataCommand } from './data-command'
import type { DataGroupMachine, DataResult } from './data-group'
import { DeliveryBuckets } from './delivery-rate'
import { tagLeaseId, untagLeaseId } from './lease-tag'
import {
  type LongPoll,
  type LongPollRefusal,
  type LongPollTally,
  LongPollWaiters,
  type PartitionLook,
} from './long-poll-waiters'
import { parseStoredQueueName } from './partition-key'
import { ProducerOrder } from './producer-order'
import {
  checkAck,
  checkExtend,
  checkLease,
  checkLeaseAcks,
  checkMessageSizes,
  checkNack,
  checkProduce,
  checkTarget,
} from './request-checks'
import { canOnlyRepeat, enqueueOf, errorOf, leasedMessageOf, leaseOf, listedOf, outcomeOf } from './wire-map'

/** A data group replica as the queue RPCs see it. */
export interface DataGroupPort {
  readonly groupId: number
  readonly machine: DataGroupMachine
  /**
   * Proposes `command` and resolves with its result once applied here. Rejects with
   * NotLeaderError (leader hint) when this replica is not the leader, or UnavailableError.
   */
  propose(command: DataCommand): Promise<DataResult>
  /**
   * Throws NotLeaderError (with the leader hint) unless this replica leads the group; returns
   * the term it leads in.
   */
  assertLeader(): number
  /** Resolves once every entry applied here so far has its writes in the engine. */
  settled(): Promise<void>
  /**
   * A read barrier (Raft's ReadIndex): resolves once this replica, confirmed by a quorum as the
   * leader, has applied every entry committed before the call, so that a read of `machine` then
   * sees every acknowledged change (a new leader may still be applying what it committed).
   * Rejects like `propose`.
   */
  readBarrier(): Promise<void>
  /**
   * The group's clock on its leader (ms since the epoch): the time it would stamp an entry with
   * now (mq-server: raft-core's group clock, which can be behind the leader's wall clock after
   * a leader change, while it catches up). The handlers fix delays into absolute times, and
   * look at due times, with `leaderNowMs` (this clock, or the group's applied time when that is
   * ahead).
   */
  nowMs(): number
}

/** What the queue RPCs need from the node they run on. */
export interface DataNodePort {
  /**
   * The local replica of the group that holds `queue`'s `partition` (opening the partition
   * in its group first if the group has not yet), the name the partition is stored under
   * in that group (the queue's name and its incarnation, so that a queue deleted and created
   * again never sees the old one's messages) and the queue's config in the route it was
   * found by (visibility default, paused); undefined when no local group holds it.
   */
  groupFor(
    queue: string,
    partition: number,
    routeEpoch: number,
  ): Promise<{ group: DataGroupPort; storedAs: string; config: QueueConfig | undefined } | undefined>
  /** The route epoch this node knows. */
  routeEpoch(): number
  /**
   * The route this node holds for `queue` (its epoch and its partitions), without fetching
   * one; undefined when it holds none. Read before `groupFor` and again when it found no local
   * replica (it may have just fetched the route): a partition that the route of the request's
   * own epoch lacks is refused as INVALID_ARGUMENT naming the range, instead of a
   * STALE_ROUTE that the client retries and that fetches the route again each time. Optional:
   * without it such a request is answered STALE_ROUTE.
   */
  knownRoute?(
    queue: string,
  ):
    | { readonly routeEpoch: number; readonly partitions: readonly { readonly partition: number }[] }
    | undefined
  /**
   * The cluster's format level as this node last heard it (protocol FORMAT_LEVEL; 1 until
   * known): no entry above it is written, so every replica can read it during an upgrade.
   */
  formatLevel(): number
}

export interface QueueHandlerLimits {
  /** Longest long poll a Lease may ask for. */
  readonly leaseWaitMsMax: number
  /**
   * While long-polling, look again at least this often: a safety net (a poll is woken when
   * its partition's messages become ready or fall due).
   */
  readonly leaseRecheckMs: number
  /**
   * Long polls (Leases with a wait) under way on one partition, at most: past it a poll is
   * answered what is ready at once, without waiting, or LIMIT_EXCEEDED when nothing is.
   */
  readonly waitersPerPartitionMax: number
  /** Long polls under way on all the partitions of one data group, at most (the same way). */
  readonly waitersPerGroupMax: number
  /**
   * How long a Purge, PurgeDead or Redrive call commits batches before it answers with `more`
   * (well within a client's attempt deadline, 5 s in the SDK: a call that ran past it would be
   * sent again while the first still ran).
   */
  readonly batchCallMs: number
}

export const DEFAULT_QUEUE_HANDLER_LIMITS: QueueHandlerLimits = {
  leaseWaitMsMax: LONG_POLL_MS_MAX,
  leaseRecheckMs: 1_000,
  waitersPerPartitionMax: 1_000,
  waitersPerGroupMax: 10_000,
  batchCallMs: 2_000,
}

/**
 * Leases a long poll commits at once, one after another, when one comes back empty with
 * messages still leasable (it found only messages past their TTL), before it waits.
 */
export const LEASE_QUICK_RETRIES_MAX = 8

/**
 * The time `group`'s next entry applies at, at the earliest: the leader's clock, or the latest
 * time the group applied when that is ahead (DataGroupMachine.clockMs). A leader whose clock is
 * behind its predecessor's must not fix a delay from it: the partition applies the entry at
 * its own, later, time, and the delay would be cut short (3 s behind: a 2-s delay is none).
 */
function leaderNowMs(group: DataGroupPort): number {
  return Math.max(group.nowMs(), group.machine.clockMs())
}

/**
 * The time of `queue`'s partition `index` (DataGroupMachine.partitionTimeMs) at which `group`'s
 * next entry applies to it, at the earliest: what a leader puts in its commands (a delay's end)
 * and what a move hands on to the group the partition moves into.
 */
export function partitionNowMs(group: DataGroupPort, queue: string, index: number): number {
  return group.machine.partitionTimeMs(queue, index, leaderNowMs(group))
}

/** Messages one ListDead or ListReady answers, at most (and 4 MiB of bodies: LIST_BYTES_MAX). */
const LIST_LIMIT_MAX = 1000
/**
 * Messages one purge, dead-letter purge or redrive entry takes (the partitions' limit on one
 * of them, their default lease batch limit).
 */
const BATCH_MAX = QUEUE_CONFIG_DEFAULT.leaseBatchMax
/** Stops a batch located at another incarnation of its queue than its call's first (runBatch). */
const ANOTHER_INCARNATION = new Error('the queue was deleted and created again during the call')

/**
 * Runs `entry(n)` (one entry that takes up to n messages, answering how many it took) for
 * batches of at most BATCH_MAX until `max` messages are taken, a batch takes fewer than it
 * asked for (done), or — with more to take — `callMs` passed or the caller gave up (`more`).
 * The first batch always runs.
 */
async function inBatches(
  max: number,
  callMs: number,
  signal: AbortSignal,
  entry: (n: number) => Promise<number>,
): Promise<{ taken: number; more: boolean }> {
  // A monotonic clock: a wall clock stepped back would let the call run past its bound.
  const started = performance.now()
  let taken = 0
  while (taken < max) {
    if (taken > 0 && (performance.now() - started >= callMs || signal.aborted)) return { taken, more: true }
    const asked = Math.min(BATCH_MAX, max - taken)
    const n = await entry(asked)
    taken += n
    if (n < asked) break
  }
  return { taken, more: false }
}

/**
 * A give-back's fields of a nack entry: `release` from the level that reads it (the delivery
 * does not count, no backoff), a plain nack below it.
 */
function released(formatLevel: number): { readonly release?: true } {
  return formatLevel >= FORMAT_LEVEL_RELEASE ? { release: true } : {}
}

/**
 * A give-back's flag under a lease attempt from FORMAT_LEVEL_LATE_GIVE_BACK: applied once the
 * attempt's record is gone (past its leases' first deadline), it changes nothing (below it, it
 * released leases that a repeat's consumer had extended).
 */
function lapses(formatLevel: number): { readonly lapses?: true } {
  return formatLevel >= FORMAT_LEVEL_LATE_GIVE_BACK ? { lapses: true } : {}
}

/**
 * A redrive's flag from FORMAT_LEVEL_TTL_REDRIVE_LINES: the redriven messages' TTL counts from
 * the redrive (below it, from their enqueue: a redrive of dead letters older than the TTL
 * deleted them all at the next lease).
 */
function ttlRestarted(formatLevel: number): { restartTtl?: true } {
  return formatLevel >= FORMAT_LEVEL_TTL_REDRIVE_LINES ? { restartTtl: true } : {}
}

/**
 * The LIMIT_EXCEEDED (retriable) of a long poll refused because `reached` (the limit on polls
 * per partition, or per group) is full and nothing is ready for it: the client backs off.
 */
function pollsLimitError(
  target: PartitionTarget,
  group: DataGroupPort,
  reached: LongPollRefusal,
  limits: QueueHandlerLimits,
): LimitExceededError {
  const where =
    reached === 'partition'
      ? `partition ${target.queue}/${target.partition} (waitersPerPartitionMax ${limits.waitersPerPartitionMax})`
      : `data group ${group.groupId} (waitersPerGroupMax ${limits.waitersPerGroupMax})`
  return new LimitExceededError(
    `too many long polls wait on ${where} and no message is ready: retry after a backoff, or run fewer consumers per partition`,
    { groupId: group.groupId },
  )
}

/**
 * The Queue service's gRPC handlers over the data groups of one node. Each request is checked
 * (request-checks.ts) before anything is proposed or kept for it; `parts` lets a test see the
 * leader-side state.
 */
export function queueHandlers(
  node: DataNodePort,
  given: Partial<QueueHandlerLimits> = {},
  parts: {
    readonly producerOrder?: ProducerOrder
    /** Counts the lease long polls open on the node (its metrics read it). */
    readonly longPolls?: LongPollTally
  } = {},
): QueueServer {
  const limits: QueueHandlerLimits = { ...DEFAULT_QUEUE_HANDLER_LIMITS, ...given }
  /**
   * Throws InvalidArgumentError when the route the node holds for the target's queue, of the
   * request's own epoch, has no such partition: the client's route says so itself. A newer
   * route lacking it means a stale client (the queue deleted and created again with fewer
   * partitions), answered STALE_ROUTE as before, so that it refreshes instead of failing; a
   * request without a route epoch (0) is not refused so either.
   */
  const checkPartitionInRoute = (target: PartitionTarget): void => {
    const route = node.knownRoute?.(target.queue)
    if (!route || !(target.routeEpoch > 0) || route.routeEpoch !== target.routeEpoch) return
    if (route.partitions.some((p) => p.partition === target.partition)) return
    const n = route.partitions.length
    throw new InvalidArgumentError(
      `target.partition ${target.partition} is out of range: queue ${target.queue} has ${n} partition${n === 1 ? '' : 's'}${n > 0 ? ` (0 to ${n - 1})` : ''} in route epoch ${route.routeEpoch}`,
    )
  }
  const locate = async (
    target: PartitionTarget | undefined,
  ): Promise<{ group: DataGroupPort; queue: string; partition: number; config: QueueConfig | undefined }> => {
    checkTarget(target)
    checkPartitionInRoute(target)
    const found = await node.groupFor(target.queue, target.partition, target.routeEpoch)
    if (!found) {
      checkPartitionInRoute(target)
      throw new StaleRouteError(
        `this node holds no replica of ${target.queue}/${target.partition}; refresh the route (epoch ${node.routeEpoch()})`,
        { epoch: node.routeEpoch() },
      )
    }
    found.group.assertLeader()
    return { group: found.group, queue: found.storedAs, partition: target.partition, config: found.config }
  }
  /** `locate`, for a read of the partition's state: once past the group's read barrier. */
  const locateRead = async (target: PartitionTarget | undefined) => {
    const found = await locate(target)
    await found.group.readBarrier()
    // Located by the state applied before the barrier: a new leader may apply a move's fence
    // only now, and the partition's frozen copy here is stale (the target took writes since).
    if (found.group.machine.fenced(found.queue, found.partition)) {
      throw new StaleRouteError(
        `${target?.queue}/${found.partition} moved or is moving away from group ${found.group.groupId}; refresh the route (epoch ${node.routeEpoch()})`,
        { epoch: node.routeEpoch(), groupId: found.group.groupId },
      )
    }
    return found
  }
  /** Pipelining producers' batches, put back in sequence order before they are proposed. */
  const producerOrder = parts.producerOrder ?? new ProducerOrder()
  /** The pace of rate-limited queues' deliveries, per partition this node leads. */
  const buckets = new DeliveryBuckets()
  const run = async (
    target: PartitionTarget | undefined,
    command: (
      /** The partition's time the entry applies at, at the earliest (partitionNowMs). */
      nowMs: number,
      config: QueueConfig | undefined,
      /** The partition the request was located at (its group, stored queue name and index). */
      at: { readonly group: DataGroupPort; readonly queue: string; readonly partition: number },
    ) => Command,
    options: {
      /** A pipelining producer's batch: proposed in its sequence order (producerOrder). */
      readonly producer?: { readonly id: string; readonly seq: number; readonly base: number } | undefined
      /** Checks of the request that need the queue's config (or where it was located): before the lane or the proposal. */
      readonly check?: (config: QueueConfig | undefined, at: { readonly queue: string }) => void
      /** Told once the entry is proposed (an entry proposed after it follows it in the log). */
      readonly proposed?: (() => void) | undefined
    } = {},
  ): Promise<CommandResult> => {
    const { producer, check, proposed } = options
    const { group, queue, partition, config } = await locate(target)
    check?.(config, { queue })
    const lane = producer ? `${producer.id} ${queue}/${partition}` : ''
    const wait = producer && producerOrder.turn(lane, producer.seq, producer.base)
    if (wait) await wait
    const proposal = group.propose({
      type: 'apply',
      queue,
      partition,
      command: command(partitionNowMs(group, queue, partition), config, { group, queue, partition }),
    })
    proposed?.()
    if (producer) producerOrder.proposed(lane, producer.seq)
    const result = await proposal
    if (result.type === 'refused') {
      throw new StaleRouteError(`${result.message}; refresh the route`, {
        epoch: node.routeEpoch(),
        groupId: group.groupId,
      })
    }
    if (result.type !== 'applied') throw new InternalError(`unexpected data-group result ${result.type}`)
    if (result.result.type === 'rejected') throw errorOf(result.result.error)
    return result.result
  }
  const settle = async (
    target: PartitionTarget | undefined,
    command: Command,
    /** Told once the entry is proposed (run). */
    proposed?: () => void,
  ): Promise<{ results: LeaseResult[] }> => {
    const leaseIds = (command as { leaseIds: readonly string[] }).leaseIds
    let settledAt:
      | { readonly group: DataGroupPort; readonly queue: string; readonly partition: number }
      | undefined
    // Tagged ids settle only in the partition and queue incarnation that leased them.
    const r = await run(
      target,
      (_nowMs, _config, at) => {
        settledAt = at
        const queueId = parseStoredQueueName(at.queue)?.queueId
        return {
          ...command,
          leaseIds: leaseIds.map((id) => untagLeaseId(id, queueId, at.partition)),
        } as Command
      },
      { proposed },
    )
    if (r.type !== 'ack' && r.type !== 'nack' && r.type !== 'extend')
      throw new InternalError(`unexpected result ${r.type}`)
    // An extend may bring a lease's deadline before the partition's due timer (set for the old
    // one; an extend wakes no poll: wakesLongPolls): set it again, so that the polls asleep there
    // get the message when the shortened lease expires, not at their recheck.
    if (r.type === 'extend' && settledAt)
      waiters.get(settledAt.group.machine)?.handOn(settledAt.queue, settledAt.partition)
    const deadlines = r.type === 'extend' ? r.deadlinesMs : []
    return {
      results: r.statuses.map((s: LeaseStatus, i: number) => ({
        leaseId: leaseIds[i] ?? '',
        outcome: outcomeOf(s),
        deadlineMs: deadlines[i] ?? 0,
      })),
    }
  }
  /**
   * One batch of a call that proposes several (Purge, PurgeDead, Redrive): `run`, only in the
   * partition `batches.storedAs` names (the stored queue name the call located first, else
   * this batch's, recorded). A queue deleted and created again while the call runs is another
   * partition under the same name: the batch proposes nothing there and answers undefined, and
   * the call ends with what it did (it purged the new queue's messages, or redrove its dead
   * letters up to the old list's place).
   */
  const runBatch = async (
    target: PartitionTarget | undefined,
    batches: { storedAs?: string },
    command: (nowMs: number) => Command,
  ): Promise<CommandResult | undefined> => {
    try {
      return await run(target, command, {
        check: (_config, at) => {
          batches.storedAs ??= at.queue
          if (at.queue !== batches.storedAs) throw ANOTHER_INCARNATION
        },
      })
    } catch (error) {
      if (error === ANOTHER_INCARNATION) return undefined
      throw error
    }
  }
  /** Purge or PurgeDead: entries of `type` until none finds a full batch (or the time bound: more). */
  const purgeAll = async (
    target: PartitionTarget | undefined,
    signal: AbortSignal,
    type: 'purgeReady' | 'purgeDead',
  ): Promise<{ removed: number; more: boolean }> => {
    const batches = {}
    const { taken, more } = await inBatches(
      Number.POSITIVE_INFINITY,
      limits.batchCallMs,
      signal,
      async (max) => {
        const r = await runBatch(target, batches, () => ({ type, max }))
        return r?.type === type ? r.ids.length : 0
      },
    )
    return { removed: taken, more }
  }
  /**
   * Messages asked for by the leases being committed now, by partition (`queue/index`, the
   * stored queue name).
   */
  const leasing = new Map<string, number>()
  /**
   * What a lease of `queue`'s partition `partition` in `group` could find beyond the leases on
   * their way, and when something of it may fall due. Infinity (something may be due) with a
   * lease on its way is 0: that lease's apply makes it known, and its poll hands on.
   */
  const look = (group: DataGroupPort, queue: string, partition: number): PartitionLook => {
    const asked = leasing.get(`${queue}/${partition}`) ?? 0
    const leasable = group.machine.leasableAtMost(queue, partition, leaderNowMs(group))
    return {
      spare: leasable === Number.POSITIVE_INFINITY ? (asked === 0 ? leasable : 0) : leasable - asked,
      // By the leader's own clock: an entry applies at a time past the group's only once it has reached it.
      dueInMs: group.machine.nextTimedMs(queue, partition) - group.nowMs(),
    }
  }
  /** The long polls of each group this node has led, by partition (made at a group's first poll). */
  const waiters = new WeakMap<DataGroupMachine, LongPollWaiters>()
  const waitersOf = (group: DataGroupPort): LongPollWaiters => {
    let w = waiters.get(group.machine)
    if (!w) {
      const made = new LongPollWaiters(
        (queue, partition) => look(group, queue, partition),
        limits,
        parts.longPolls,
      )
      group.machine.watchReady((p) =>
        p?.gone ? made.ended(p.queue, p.index) : p ? made.changed(p.queue, p.index) : made.changedAll(),
      )
      waiters.set(group.machine, made)
      w = made
    }
    return w
  }

  /**
   * The messages a Lease call leases: the first round commits a lease, later ones wait for a
   * change (long poll) until the request's wait ends.
   */
  const leaseMessages = async (
    req: LeaseRequest & { readonly target: PartitionTarget },
    call: UnaryCallContext,
  ): Promise<LeasedMessage[]> => {
    const waitMs = Math.min(req.waitMs, limits.leaseWaitMsMax)
    // A monotonic clock: a wall clock stepped back would hold the poll past its wait.
    let deadline = performance.now() + waitMs
    // The queue's visibility comes from the route the partition was located by (a node
    // that had none cached, just started or after partitions were added to a queue, would
    // otherwise lease for the default 30 s).
    const command = (max: number, repeatOnly: boolean) => (_nowMs: number, config: QueueConfig | undefined) =>
      leaseOf(
        { ...req, max },
        config?.visibilityTimeoutMs || QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS,
        node.formatLevel(),
        repeatOnly,
      )
    // A client that gives up on the call (a consumer closing) ends the wait at once: every
    // sleep below takes this signal (and leaves it when it ends), so a call that never
    // sleeps makes no controller of its own to abort.
    const cancelled = call.cancelled
    /** This call's place among its partition's long polls, while it may wait. */
    let poll: LongPoll | undefined
    /** The group's long polls `poll` is among (a partition moved between groups here changes them). */
    let pollWaiters: LongPollWaiters | undefined
    /** The partition last located: a call that ends hands on what it left there. */
    let at: { readonly group: DataGroupPort; readonly queue: string; readonly partition: number } | undefined
    try {
      // Bounded: each round either returns messages or waits for a change (or the recheck
      // interval) until the deadline. The first round commits a lease, unless the queue is
      // paused or out of delivery tokens (the request was checked before: checkLease); then a
      // repeat of an attempt commits one that only answers the attempt's leases. A later
      // one commits a lease only when the leader's applied state may hold more messages than
      // the leases already on their way ask for: the waiters a change wakes do not each commit an empty lease (a Raft entry, fsynced on
      // every replica) for a message one of them takes.
      let quick = 0
      for (let round = 0; ; round++) {
        if (cancelled.aborted) return []
        const { group, queue, partition, config } = await locate(req.target)
        const id = `${queue}/${partition}`
        at = { group, queue, partition }
        const groupWaiters = waitersOf(group)
        if (deadline > performance.now() && (poll?.partitionId !== id || pollWaiters !== groupWaiters)) {
          // A long poll takes a place among its partition's waiters (again when the queue was
          // created again since its last round: another partition; or when the partition moved
          // to another group this node leads too: that group's writes must wake it). Past the
          // limits it is answered what is ready now, without waiting, or refused when nothing is.
          poll?.close()
          poll = undefined
          pollWaiters = groupWaiters
          const entered = groupWaiters.enter(queue, partition, req.max)
          if (typeof entered === 'string') {
            // A repeat of an attempt is answered the leases the attempt holds (not ready, so
            // not counted as spare) by its first round's lease, without waiting, not refused.
            const repeats =
              round === 0 &&
              !!req.attempt &&
              req.attemptRepeat &&
              node.formatLevel() >= FORMAT_LEVEL_LEASE_ATTEMPTS
            if (!(look(group, queue, partition).spare > 0) && !repeats)
              throw pollsLimitError(req.target, group, entered, limits)
            deadline = performance.now()
          } else poll = entered
        }
        // A repeat of an attempt whose answer was lost gets the leases still held even while
        // the queue hands nothing new out (paused, or out of delivery tokens): in the first
        // round, by a lease that leases nothing new; then it waits as any other.
        const mayOnlyRepeat = round === 0 && canOnlyRepeat(req, node.formatLevel())
        let onlyRepeat = false
        if (config?.paused && mayOnlyRepeat) onlyRepeat = true
        else if (config?.paused) {
          // A paused queue hands nothing out: the poll looks again at the recheck interval
          // (the pause is in the route, not in an applied entry), not at every change.
          const remaining = deadline - performance.now()
          if (remaining <= 0) return []
          await sleep(Math.min(remaining, limits.leaseRecheckMs), undefined, {
            signal: cancelled,
          }).catch(() => {})
          continue
        }
        // A rate-limited queue: this partition's share of the rate, taken before the lease.
        const ratePerS = config?.deliveryRate ? config.deliveryRate / Math.max(1, config.partitions) : 0
        const bucket = id
        let max = req.max
        if (ratePerS > 0 && !onlyRepeat) {
          // The lease entry asks for what was taken (the request's own max was checked before).
          max = buckets.take(bucket, ratePerS, req.max)
          if (max === 0 && mayOnlyRepeat) {
            onlyRepeat = true
            max = req.max
          } else if (max === 0) {
            const remaining = deadline - performance.now()
            if (remaining <= 0) return []
            const wait = Math.min(remaining, limits.leaseRecheckMs, buckets.waitMs(bucket, ratePerS, req.max))
            await sleep(wait, undefined, { signal: cancelled }).catch(() => {})
            continue
          }
        }
        /** Whether this round took delivery tokens (a lease that only repeats takes none). */
        const took = ratePerS > 0 && !onlyRepeat
        // Before the lease: a change applied while it runs must end the wait below.
        poll?.mark()
        let leases: readonly Lease[] = []
        /** The attempt the lease entry carried (from format level 26, when the request has one). */
        let leasedAttempt: string | undefined
        const asked = leasing.get(id) ?? 0
        // Infinity: a lease deadline or a delayed message may be due (a lower bound, often
        // stale: the lease group was settled). One lease at a time looks: its apply moves the
        // bound on, and what it makes ready but does not take, the next look counts.
        const leasable = group.machine.leasableAtMost(queue, partition, leaderNowMs(group))
        const leaseTried =
          round === 0 || (leasable === Number.POSITIVE_INFINITY ? asked === 0 : leasable > asked)
        // Where the lease was committed: `run` locates the partition again (the queue may have
        // been deleted and created again since the look above), and its ids are of that one.
        let leasedAt: { readonly queue: string; readonly partition: number } = { queue, partition }
        if (leaseTried) {
          leasing.set(id, asked + max)
          try {
            const r = await run(req.target, (nowMs, config, at) => {
              leasedAt = at
              const lease = command(max, onlyRepeat)(nowMs, config)
              leasedAttempt = lease.attempt
              return lease
            })
            if (r.type !== 'lease') throw new InternalError(`unexpected result ${r.type}`)
            leases = r.leases
          } finally {
            const left = (leasing.get(id) ?? max) - max
            if (left > 0) leasing.set(id, left)
            else leasing.delete(id)
            // What the lease did not hand out (or all of it, when it failed) goes back.
            if (took) buckets.giveBack(bucket, ratePerS, max - leases.length)
          }
        } else if (took) buckets.giveBack(bucket, ratePerS, max)
        if (leases.length > 0 && cancelled.aborted) {
          // Nobody will read the answer: the messages are given back now rather than at the
          // end of their visibility timeout. (A cancel that comes after this check, while the
          // answer is on its way, leaves them to the timeout, as any lost answer does.) Tagged
          // whatever the level (the tag never reaches the partition): the nack locates the
          // partition again, and settles nothing in another incarnation of the queue.
          const leasedId = parseStoredQueueName(leasedAt.queue)?.queueId
          const leaseIds = leases.map((l) =>
            leasedId === undefined ? l.leaseId : tagLeaseId(l.leaseId, leasedId, leasedAt.partition),
          )
          // Under its attempt: once the attempt answered these leases again (the client's
          // repeat, whose lease this call's cancel may come after), they stay leased.
          const given = await settle(req.target, {
            type: 'nack',
            leaseIds,
            ...released(node.formatLevel()),
            ...(leasedAttempt === undefined ? {} : { attempt: leasedAttempt, ...lapses(node.formatLevel()) }),
          }).catch(() => undefined)
          // Only what the nack gave back was not delivered: leases a repeat of the attempt was
          // answered stay delivered (the repeat took no tokens for them), and so do those of a
          // give-back that failed.
          const back = given?.results.filter((r) => r.outcome === LeaseOutcome.LEASE_OUTCOME_OK).length ?? 0
          if (took) buckets.giveBack(bucket, ratePerS, back)
          return []
        }
        // Nothing held under the attempt: the next round waits for the pause or the tokens.
        if (onlyRepeat && leases.length === 0) continue
        const remaining = deadline - performance.now()
        if (leases.length > 0 || remaining <= 0 || !poll) {
          const queueId = parseStoredQueueName(leasedAt.queue)?.queueId
          const tagged = queueId !== undefined && node.formatLevel() >= FORMAT_LEVEL_LEASE_TAGS
          return leases.map((l) =>
            leasedMessageOf(l, tagged ? tagLeaseId(l.leaseId, queueId, leasedAt.partition) : l.leaseId),
          )
        }
        // A lease that came back empty while messages are left to lease found only messages
        // past their TTL (deleted): ask again at once, a few times, rather than wait.
        if (
          leaseTried &&
          quick < LEASE_QUICK_RETRIES_MAX &&
          group.machine.leasableAtMost(queue, partition, leaderNowMs(group)) > (leasing.get(id) ?? 0)
        ) {
          quick++
          continue
        }
        // Until a change of this partition wakes it, the recheck, or the partition's next lease
        // deadline or delayed message (a nack's delay, a retry backoff, a not-before time) falls
        // due (one poll of the partition wakes then, and hands on).
        const { dueInMs } = look(group, queue, partition)
        await poll.sleep(Math.min(remaining, limits.leaseRecheckMs), dueInMs, cancelled)
      }
    } finally {
      poll?.close()
      // Messages this call leaves (it took fewer than were ready, gave up, failed) wake the
      // polls asleep on them; the partition's due timer is set for what falls due next.
      if (at) waiters.get(at.group.machine)?.handOn(at.queue, at.partition)
    }
  }

  /**
   * A lease that carries acks (LeaseRequest.ack_lease_ids), answered with their results. The
   * acks are proposed first: the lease's entry follows theirs in the log, so a lease answered
   * never leaves its acks unapplied. The acks refused before they were proposed refuse the call
   * before anything is leased. A lease refused before it leased anything (NOT_LEADER,
   * STALE_ROUTE, a limit: not UNAVAILABLE) after the acks were applied answers the acks and no
   * message: the consumer must not take applied acks for failed ones. Either part lost on its
   * way (UNAVAILABLE) fails the call with that error, which the consumer takes as may-have-acted
   * for both (it repeats the lease's attempt; an ack sent again that finds no lease is done).
   * Acks that failed after they were proposed while the lease succeeded (an entry refused at its
   * apply by a partition move between the two) fail the call: the messages it leased are
   * delivered again after their visibility timeout.
   */
  const leaseWithAcks = async (
    req: LeaseRequest & { readonly target: PartitionTarget },
    call: UnaryCallContext,
    ackIds: readonly string[],
  ): Promise<LeaseResponse> => {
    let proposed = (): void => {}
    const ackProposed = new Promise<{ error?: unknown }>((resolve) => {
      proposed = () => resolve({})
    })
    const acked = settle(req.target, { type: 'ack', leaseIds: [...ackIds] }, proposed)
    const ackFailed = acked.then(
      () => ({}),
      (error: unknown) => ({ error }),
    )
    const early = await Promise.race([ackProposed, ackFailed])
    if ('error' in early) throw early.error
    let messages: LeasedMessage[]
    try {
      messages = await leaseMessages(req, call)
    } catch (error) {
      const acks = await ackFailed
      if ('error' in acks)
        throw error instanceof UnavailableError || !(acks.error instanceof UnavailableError)
          ? error
          : acks.error
      if (error instanceof UnavailableError) throw error
      return { messages: [], ackResults: (await acked).results }
    }
    return { messages, ackResults: (await acked).results }
  }

  return {
    produce: unary(async (req) => {
      // Before the producer id is echoed or keys a lane (the message size once located: run).
      checkTarget(req.target)
      checkProduce(req)
      // Below the pipelining level a replica of an older version could not read an enqueue
      // that carries the producer's base: the batch goes without it, as from a producer with
      // one batch in flight, and the answer tells the producer to send one at a time. A batch
      // sent while an earlier one of the producer is still in flight (base below its sequence:
      // the producer pipelined, say towards this leader before it restarted) could overtake
      // it without the base, so it is refused, retriable, until the earlier one is answered.
      const level = node.formatLevel()
      const pipelining = level >= FORMAT_LEVEL_PIPELINING
      if (req.messages.length === 0) {
        // Nothing to store, but the target is answered as a send's would be (an unknown queue
        // or partition, a stale route, a follower): until a review an empty send to any target
        // seemed to succeed.
        await locate(req.target)
        return { ids: [], duplicate: false, pipelining }
      }
      if (
        !pipelining &&
        req.producerId &&
        req.sequenceBase !== undefined &&
        req.sequenceBase < req.sequence
      ) {
        throw new SequenceGapError(
          `batch ${req.sequence} of producer '${req.producerId}' must wait for batch ${req.sequenceBase}: the cluster does not keep pipelined batches in order (format level ${level})`,
        )
      }
      const request = pipelining ? req : { ...req, sequenceBase: undefined }
      const pipelined =
        request.producerId && request.sequenceBase !== undefined
          ? { id: request.producerId, seq: request.sequence, base: request.sequenceBase }
          : undefined
      const r = await run(request.target, (now) => enqueueOf(request, now), {
        producer: pipelined,
        check: (config) => {
          // The route's limit is the partition's (groupFor configures it before it answers).
          if (config && config.messageBytesMax > 0) checkMessageSizes(request, config.messageBytesMax)
        },
      })
      if (r.type !== 'enqueue') throw new InternalError(`unexpected result ${r.type}`)
      return { ids: [...r.ids], duplicate: r.duplicate, pipelining }
    }),
    lease: unary(async (req, call) => {
      checkTarget(req.target)
      checkLease(req)
      // Its target checked (checkTarget narrows the field, not the request).
      const checked = req as LeaseRequest & { readonly target: PartitionTarget }
      const ackIds = req.ackLeaseIds ?? []
      if (ackIds.length === 0) return { messages: await leaseMessages(checked, call), ackResults: [] }
      checkLeaseAcks(req)
      return leaseWithAcks(checked, call, ackIds)
    }),
    ack: unary(async (req) => {
      checkTarget(req.target)
      checkAck(req)
      return settle(req.target, { type: 'ack', leaseIds: req.leaseIds })
    }),
    nack: unary(async (req) => {
      checkTarget(req.target)
      checkNack(req)
      return settle(req.target, {
        type: 'nack',
        leaseIds: req.leaseIds,
        delayMs: req.delayMs,
        ...(req.release ? released(node.formatLevel()) : {}),
      })
    }),
    extend: unary(async (req) => {
      checkTarget(req.target)
      checkExtend(req)
      return settle(req.target, { type: 'extend', leaseIds: req.leaseIds, visibilityMs: req.extendMs })
    }),
    purge: unary((req, call) => purgeAll(req.target, call.cancelled, 'purgeReady')),
    listDead: unary(async (req) => {
      const { group, queue, partition } = await locateRead(req.target)
      const limit = Math.min(req.limit || 100, LIST_LIMIT_MAX)
      // Places on the wire are 1-based (0 = none): place p is the partition's cursor p − 1.
      const after = req.afterId ? req.afterId - 1 : undefined
      const dead = (await group.machine.listDead(queue, partition, limit, after)) ?? []
      return { messages: dead.map((m) => ({ ...listedOf(m), deadPlace: m.cursor + 1 })), ackResults: [] }
    }),
    listReady: unary(async (req) => {
      const { group, queue, partition } = await locateRead(req.target)
      const limit = Math.min(req.limit || 100, LIST_LIMIT_MAX)
      return {
        messages: ((await group.machine.listReady(queue, partition, limit)) ?? []).map(listedOf),
        ackResults: [],
      }
    }),
    redrive: unary(async (req, call) => {
      // From FORMAT_LEVEL_REDRIVE_SPAN, the messages dead when the redrive began: through the
      // request's place (a later call of the same redrive), else the end of the dead-letter
      // list as the call's first entry applies (its result's deadEnd: the log's state, not
      // this leader's, which may still be applying) — one that dies again meanwhile, behind
      // it, stays, in this call's later entries and the SDK's later calls alike (the SDK asks
      // the place first, `place_only`, so that a retried first call is bounded too). Below the
      // level, at most as many as were dead when the call began (a count: a next call counts
      // afresh, messages that died again since among them).
      const { group, queue, partition } = await locate(req.target)
      const spans = node.formatLevel() >= FORMAT_LEVEL_REDRIVE_SPAN
      if (spans && req.placeOnly) {
        // An entry that moves nothing: the end as the log has it (a new leader's applied
        // state may still lag its log).
        const r = await run(req.target, () => ({ type: 'redriveDead', max: 0 }))
        return { moved: 0, more: false, throughPlace: r.type === 'redriveDead' ? r.deadEnd + 1 : 0 }
      }
      await group.readBarrier()
      const dead = group.machine.deadCount(queue, partition)
      if (dead === 0) return { moved: 0, more: false, throughPlace: spans ? req.throughPlace : 0 }
      // Places on the wire are 1-based (0 = none): place p is the partition's cursor p − 1.
      let through = spans && req.throughPlace > 0 ? req.throughPlace - 1 : undefined
      const max = spans ? req.max || BATCH_MAX : Math.min(req.max || BATCH_MAX, dead)
      const batches = { storedAs: queue }
      const { taken, more } = await inBatches(max, limits.batchCallMs, call.cancelled, async (n) => {
        const r = await runBatch(req.target, batches, () => ({
          type: 'redriveDead',
          max: n,
          ...ttlRestarted(node.formatLevel()),
          ...(through === undefined ? {} : { through }),
        }))
        if (r?.type !== 'redriveDead') return 0
        if (spans && through === undefined) through = r.deadEnd
        return r.ids.length
      })
      return { moved: taken, more, throughPlace: through === undefined ? 0 : through + 1 }
    }),
    purgeDead: unary((req, call) => purgeAll(req.target, call.cancelled, 'purgeDead')),
    stats: unary(async (req): Promise<PartitionStats> => {
      const { group, queue, partition } = await locateRead(req.target)
      const s = await group.machine.stats(queue, partition, leaderNowMs(group))
      return {
        queue: req.target?.queue ?? '',
        partition,
        groupId: group.groupId,
        weights: (s?.weights ?? []).map((w) => ({ ...w })),
        messages: s?.messages ?? 0,
        windowLeases: s?.windowLeases ?? 0,
        counters: s?.counters,
        waiting: s?.waiting ?? 0,
      }
    }),
  }
}
