import type {
  ClusterStatusResponse,
  CreateQueueRequest,
  LeasedMessage,
  LeaseResponse,
  MetaClient,
  PartitionStats,
  PartitionTarget,
  QueueConfig,
  QueueConfigUpdate,
  QueueRoute,
  ScalePlan,
  TokenInfo,
} from '@mq/protocol'
import { fromGrpcError, InvalidArgumentError, QueueExistsError, QueueNotFoundError } from '@mq/protocol'
import type { Connection } from './connections'
import { checkInteger, definedOnly } from './option-checks'
import { mayHaveActed, type Router } from './router'
import { unary } from './unary'

/** Calls one partition's purge or redrive makes at most (each of ~2 s and ≥ 1,000 messages when more). */
const BATCH_CALLS_MAX = 1000

/**
 * Calls `step(done)` (one Purge, PurgeDead or Redrive call, given the count so far) again while
 * it answers `more` (the server stopped at its time bound), at most BATCH_CALLS_MAX times;
 * resolves with the total.
 */
async function untilDone(step: (done: number) => Promise<{ n: number; more: boolean }>): Promise<number> {
  let done = 0
  for (let call = 0; call < BATCH_CALLS_MAX; call++) {
    const { n, more } = await step(done)
    done += n
    if (!more) break
  }
  return done
}

/** The most dead-lettered messages one ListDead answers. */
const DEAD_PAGE_MAX = 1000

/** The largest uint32 a request field carries. */
const UINT32_MAX = 0xffff_ffff

/**
 * Partitions a listing of messages (a peek, dead letters) reads at once, at most: each answer
 * may hold 4 MiB of bodies (the server's bound), and a queue has up to 256 partitions.
 */
export const LISTED_PARTITIONS_AT_ONCE = 8
/**
 * Partitions `queueStats` asks at once, at most: each answer is small, but a queue of 256
 * partitions was 256 calls at once into the leaders' apply chains (each reads every weight's
 * head), per caller (a console's queue list, a scrape).
 */
export const STATS_PARTITIONS_AT_ONCE = 32

/**
 * The settings that a createQueue giving 0 (or '') leaves to the cluster's default, which the
 * meta leader fills in (the wire's 0 is "not given"); the others keep 0 (off).
 */
const DEFAULTED_WHEN_EMPTY: ReadonlySet<string> = new Set([
  'partitions',
  'visibilityTimeoutMs',
  'maxDeliveries',
  'messageBytesMax',
  'queueLengthMax',
  'engine',
  'retryBackoffMaxMs',
] satisfies (keyof QueueConfig)[])

/** The most ready messages a peek reads of one partition (what one ListReady answers). */
export const PEEK_LIMIT_MAX = 1_000

/** Settings of a new queue; anything left out takes the cluster's default. */
export type QueueOptions = Partial<QueueConfig>

/** How the wire carries each queue setting: an unsigned integer (a count, ms), a flag or a name. */
const SETTING_TYPES: Readonly<Record<keyof QueueConfig, 'uint32' | 'uint64' | 'boolean' | 'string'>> = {
  partitions: 'uint32',
  visibilityTimeoutMs: 'uint64',
  maxDeliveries: 'uint32',
  deadLetterQueue: 'string',
  messageBytesMax: 'uint32',
  queueLengthMax: 'uint64',
  strictPriority: 'boolean',
  dedupWindowMs: 'uint64',
  engine: 'string',
  messageTtlMs: 'uint64',
  paused: 'boolean',
  orderedKeys: 'boolean',
  deliveryRate: 'uint32',
  retryBackoffMinMs: 'uint64',
  retryBackoffMaxMs: 'uint64',
}

/**
 * Throws InvalidArgumentError naming the first of `settings` that the wire cannot carry (the
 * bounds are the meta leader's to check, and it names them too). Until an audit a fractional or
 * negative number, or a string for one, failed before any call as an InternalError naming no
 * setting ("Request message serialization failure: invalid uint32: 2.5"), against the contract
 * of createQueue (InvalidArgumentError for bad settings).
 */
function checkSettings(settings: object): void {
  for (const [name, value] of Object.entries(settings)) {
    const type = SETTING_TYPES[name as keyof QueueConfig]
    if (value === undefined || type === undefined) continue
    if (type === 'boolean' || type === 'string') {
      if (typeof value !== type)
        throw new InvalidArgumentError(`queue setting ${name} must be a ${type}, got ${String(value)}`)
      continue
    }
    try {
      checkInteger(
        `queue setting ${name}`,
        value,
        0,
        type === 'uint32' ? UINT32_MAX : Number.MAX_SAFE_INTEGER,
      )
    } catch (error) {
      throw new InvalidArgumentError((error as RangeError).message)
    }
  }
}

/** A message listed without a lease (dead letters, a peek), with its partition. */
export type ListedMessage = LeasedMessage & { readonly partition: number }

/**
 * `route` when it has the settings asked for that a meta leader of an earlier version drops
 * unread and answers as if done; else throws. `paused` (format level 12: its data-group
 * leaders would go on delivering), `orderedKeys` (level 14: a queue created without them
 * delivers a key's messages out of order, several at once), `deliveryRate` (level 15: they
 * would deliver at any rate) and the retry backoff (level 16: failed deliveries would be retried
 * at once); undefined (a maximum: 0 too, which the meta leader fills in): not asked.
 */
function settingsHeeded(
  route: QueueRoute,
  wanted: {
    readonly paused?: boolean | undefined
    readonly orderedKeys?: boolean | undefined
    readonly deliveryRate?: number | undefined
    readonly retryBackoffMinMs?: number | undefined
    readonly retryBackoffMaxMs?: number | undefined
  },
): QueueRoute {
  if (wanted.paused !== undefined && (route.config?.paused ?? false) !== wanted.paused) {
    throw new InvalidArgumentError(
      `queue ${route.queue} was not ${wanted.paused ? 'paused' : 'resumed'}: the meta leader runs a version without paused queues (format level 12); upgrade every node first`,
    )
  }
  if (wanted.orderedKeys && !route.config?.orderedKeys) {
    throw new InvalidArgumentError(
      `queue ${route.queue} was created without ordered keys: the meta leader runs a version without them (format level 14); delete the queue and upgrade every node first`,
    )
  }
  if (wanted.deliveryRate !== undefined && (route.config?.deliveryRate ?? 0) !== wanted.deliveryRate) {
    throw new InvalidArgumentError(
      `queue ${route.queue}'s delivery rate is not ${wanted.deliveryRate}/s: the meta leader runs a version without delivery rates (format level 15); upgrade every node, then set it again (updateQueue)`,
    )
  }
  const min = route.config?.retryBackoffMinMs ?? 0
  const max = route.config?.retryBackoffMaxMs ?? 0
  if (
    (wanted.retryBackoffMinMs !== undefined && min !== wanted.retryBackoffMinMs) ||
    (wanted.retryBackoffMaxMs && max !== wanted.retryBackoffMaxMs)
  ) {
    throw new InvalidArgumentError(
      `queue ${route.queue}'s retry backoff is ${min} to ${max} ms, not what was asked: the meta leader runs a version without retry backoffs (format level 16); upgrade every node, then set it again (updateQueue)`,
    )
  }
  return route
}

/** Cluster administration through the meta group. Every call retries redirects until its deadline. */
export class Admin {
  readonly #router: Router

  constructor(router: Router) {
    this.#router = router
  }

  /** Creates `name`; throws QueueExistsError when it exists, InvalidArgumentError for bad settings. */
  async createQueue(name: string, options: QueueOptions = {}): Promise<QueueRoute> {
    checkSettings(options)
    const config: QueueConfig = {
      partitions: 0,
      visibilityTimeoutMs: 0,
      maxDeliveries: 0,
      deadLetterQueue: '',
      messageBytesMax: 0,
      queueLengthMax: 0,
      strictPriority: false,
      // dedupWindowMs: unset unless given (the broker's default, 5 min; 0 turns it off)
      engine: '',
      messageTtlMs: 0,
      paused: false,
      orderedKeys: false,
      deliveryRate: 0,
      retryBackoffMinMs: 0,
      retryBackoffMaxMs: 0,
      // A setting given as undefined takes the default, as if left out (spread as it is, it
      // went to the wire as undefined: "Request message serialization failure").
      ...definedOnly(options),
    }
    const route = await this.#resendable<CreateQueueRequest, QueueRoute>(
      (m) => m.createQueue,
      { name, config },
      (error) => error instanceof QueueExistsError,
    )
    // None: a copy whose answer was lost (a deadline, a meta failover) created it, and the
    // retry found the name taken.
    return settingsHeeded(route ?? (await this.#createdEarlier(name, options)), options)
  }

  /**
   * `name` as it is now, for a createQueue whose lost copy may have made it: the queue when it
   * has every setting `options` gives, else QueueExistsError (another's queue of that name).
   * Until an audit the call failed with QueueExistsError for the queue it had created.
   */
  async #createdEarlier(name: string, options: QueueOptions): Promise<QueueRoute> {
    const route = await this.describeQueue(name)
    for (const [key, wanted] of Object.entries(options)) {
      // 0 or '' asked for the cluster's default, which the queue has instead (as when left out).
      if ((wanted === 0 || wanted === '') && DEFAULTED_WHEN_EMPTY.has(key)) continue
      const held = route.config?.[key as keyof QueueConfig]
      if (wanted !== undefined && held !== wanted)
        throw new QueueExistsError(
          `queue ${name} already exists, with ${key} ${JSON.stringify(held)}, not ${JSON.stringify(wanted)}`,
        )
    }
    return route
  }

  /** Changes the settings given in `update`; the rest stay. */
  async updateQueue(name: string, update: QueueConfigUpdate): Promise<QueueRoute> {
    checkSettings(update)
    this.#router.invalidate(name)
    return settingsHeeded(await this.#router.meta((m) => m.updateQueue, { name, update }), update)
  }

  /** Deletes `name` and its messages. Throws QueueNotFoundError when it does not exist. */
  async deleteQueue(name: string): Promise<void> {
    this.#router.invalidate(name)
    await this.#resendable(
      (m) => m.deleteQueue,
      { name },
      (error) => error instanceof QueueNotFoundError,
    )
  }

  /** Describes `name`: its settings and where its partitions live. */
  async describeQueue(name: string): Promise<QueueRoute> {
    return this.#router.meta((m) => m.describeQueue, { name })
  }

  /** Lists the queues whose names start with `prefix`, following pages up to `limit` queues. */
  async listQueues(prefix = '', limit = 10_000): Promise<QueueRoute[]> {
    checkInteger('limit', limit, 0, Number.MAX_SAFE_INTEGER)
    const queues: QueueRoute[] = []
    if (limit === 0) return queues
    let pageToken = ''
    do {
      const page = await this.#router.meta((m) => m.listQueues, {
        prefix,
        limit: Math.min(1000, limit - queues.length),
        pageToken,
      })
      queues.push(...page.queues)
      pageToken = page.nextPageToken
    } while (pageToken && queues.length < limit)
    return queues
  }

  async clusterStatus(): Promise<ClusterStatusResponse> {
    return this.#router.meta((m) => m.clusterStatus, {})
  }

  /** Asks the meta leader to grow or shrink the data groups to `groups`; returns the plan. */
  async scaleDataGroups(groups: number): Promise<ScalePlan | undefined> {
    checkInteger('groups', groups, 0, UINT32_MAX)
    return (await this.#router.meta((m) => m.scaleDataGroups, { groups })).plan
  }

  /**
   * Deletes every ready message of `name`, and those waiting for their key's turn (ordered
   * keys); delayed and leased ones stay. Returns how many.
   */
  async purgeQueue(name: string): Promise<number> {
    return this.#inSteps(name, async (c, target, attemptMs) => {
      const r = await unary(c, c.purge, { target }, attemptMs)
      return { n: r.removed, more: r.more }
    })
  }

  /**
   * The dead-lettered messages of `name`, oldest first, up to `limit` per partition: pages of
   * at most 1,000 (what one ListDead answers), each from the last one's place on.
   */
  async deadLetters(name: string, limit = 100): Promise<ListedMessage[]> {
    checkInteger('limit', limit, 0, Number.MAX_SAFE_INTEGER)
    return this.#listed(name, async (c, target, attemptMs) => {
      const messages: LeasedMessage[] = []
      let afterId = 0
      while (messages.length < limit) {
        const want = Math.min(DEAD_PAGE_MAX, limit - messages.length)
        const page = (await unary(c, c.listDead, { target, limit: want, afterId }, attemptMs)).messages
        messages.push(...page)
        const last = page[page.length - 1]?.deadPlace
        // An empty page is the end; a server of a version before places answers one page.
        if (last === undefined || last === 0) break
        afterId = last
      }
      return { messages }
    })
  }

  /**
   * Up to `limit` (at most PEEK_LIMIT_MAX) ready messages of each partition of `name`, without delivering them (no
   * lease, no delivery counted): per partition the heaviest weight first, each weight's in
   * the order it delivers them.
   *
   * With `map`, the listing holds what `map` returns for each message instead of the message:
   * it is called as each partition's answer arrives (up to 4 MiB of bodies; the answers under
   * way are at most LISTED_PARTITIONS_AT_ONCE), and the answer is let go then. So a `map` that
   * keeps a short copy of each body bounds what a peek of many partitions holds (256 whole
   * answers: up to 1 GiB). A body is a view into its answer's buffer: keep a copy (`slice`),
   * not a view (`subarray`). A `map` that throws fails the peek.
   */
  peek(name: string, limit?: number): Promise<ListedMessage[]>
  peek<T>(name: string, limit: number, options: { readonly map: (message: ListedMessage) => T }): Promise<T[]>
  async peek<T>(
    name: string,
    limit = 100,
    options?: { readonly map: (message: ListedMessage) => T },
  ): Promise<(T | ListedMessage)[]> {
    // 0 asks for nothing (on the wire, 0 is the server's default). One ListReady answers at most
    // PEEK_LIMIT_MAX (it has no pages): a larger limit was cut there without a word.
    checkInteger('limit', limit, 0, PEEK_LIMIT_MAX)
    if (limit === 0) return []
    return this.#listed(
      name,
      (c, target, attemptMs) => unary(c, c.listReady, { target, limit }, attemptMs),
      options?.map,
    )
  }

  /**
   * Every partition's listing of `name`, partition by partition, each message with its
   * partition turned by `map` (default: kept as is) as its partition answers;
   * LISTED_PARTITIONS_AT_ONCE partitions are read at a time.
   */
  async #listed<T = ListedMessage>(
    name: string,
    list: (
      c: Connection['queue'],
      target: PartitionTarget,
      attemptMs: number,
    ) => Promise<Pick<LeaseResponse, 'messages'>>,
    map: (message: ListedMessage) => T = (m) => m as T,
  ): Promise<T[]> {
    const lists = await this.#eachPartition(
      name,
      async (c, target, attemptMs) =>
        (await list(c, target, attemptMs)).messages.map((m) => map({ ...m, partition: target.partition })),
      LISTED_PARTITIONS_AT_ONCE,
    )
    return lists.flat()
  }

  /**
   * Moves up to `max` dead-lettered messages of each partition back to ready; returns how many.
   * Only those dead when it began: it first asks each partition where its dead-letter list
   * ends (a call that moves nothing, `placeOnly`) and passes that place to every call after,
   * retried ones included, so a message that fails again at once and dies again is not
   * redriven twice. A cluster below format level 24 does not answer the place (it redrives
   * at that first call, as it would any): its calls count afresh.
   */
  async redriveDeadLetters(name: string, max = 1_000_000): Promise<number> {
    // 0 moves nothing (on the wire, 0 is a whole step: until an audit, 0 moved up to 1,000).
    checkInteger('max', max, 0, Number.MAX_SAFE_INTEGER)
    if (max === 0) return 0
    /** Each partition's place, once asked; 0 = none (nothing ever died, or an older cluster). */
    const throughPlaces = new Map<number, number>()
    return this.#inSteps(name, async (c, target, attemptMs, done) => {
      const asked = throughPlaces.get(target.partition)
      const r = await unary(
        c,
        c.redrive,
        {
          target,
          max: Math.min(max - done, UINT32_MAX),
          throughPlace: asked ?? 0,
          placeOnly: asked === undefined,
        },
        attemptMs,
      )
      if (asked === undefined) {
        throughPlaces.set(target.partition, r.throughPlace)
        // The place, nothing moved: now the redrive itself.
        if (r.throughPlace > 0 && r.moved === 0) return { n: 0, more: true }
      }
      return { n: r.moved, more: r.more && done + r.moved < max }
    })
  }

  /** Deletes every dead-lettered message of `name`; returns how many. */
  async purgeDeadLetters(name: string): Promise<number> {
    return this.#inSteps(name, async (c, target, attemptMs) => {
      const r = await unary(c, c.purgeDead, { target }, attemptMs)
      return { n: r.removed, more: r.more }
    })
  }

  /** Per-partition depth by weight, and target vs achieved shares (STATS_PARTITIONS_AT_ONCE calls at a time). */
  async queueStats(name: string): Promise<PartitionStats[]> {
    return this.#eachPartition(
      name,
      (c, target, attemptMs) => unary(c, c.stats, { target }, attemptMs),
      STATS_PARTITIONS_AT_ONCE,
    )
  }

  /**
   * Sets how many voters the meta group keeps (1, 3, 5 or 7): the meta leader adds live nodes
   * outside it, or removes voters, one at a time (follow with `clusterStatus`). Resolves with
   * the voters now and the size wanted.
   */
  async setMetaVoters(voters: number): Promise<{ voters: string[]; votersWanted: number }> {
    checkInteger('voters', voters, 0, UINT32_MAX)
    return this.#router.meta((m) => m.setMetaVoters, { voters })
  }

  /**
   * Sets the cluster's replication factor, replicas per data group (1 to 7): the meta leader
   * grows or shrinks every data group to it, one replica at a time, as live nodes allow (follow
   * with `clusterStatus`). Resolves with the factor before (0: none recorded) and the new one.
   * Needs format level 34.
   */
  async setReplicationFactor(factor: number): Promise<{ previous: number; factor: number }> {
    checkInteger('factor', factor, 0, UINT32_MAX)
    return this.#router.meta((m) => m.setReplicationFactor, { factor })
  }

  /** Moves every replica off `nodeId`; returns how many are still to move. */
  async drainNode(nodeId: string): Promise<number> {
    return (await this.#router.meta((m) => m.drainNode, { nodeId })).replicasRemaining
  }

  /**
   * Undoes a drain of `nodeId`: it takes new replicas again (those moved off are not moved
   * back at once). Resolves with whether it was draining (a copy retried after a lost answer
   * says false). Needs format level 33.
   */
  async undrainNode(nodeId: string): Promise<boolean> {
    return (await this.#router.meta((m) => m.undrainNode, { nodeId })).wasDraining
  }

  /**
   * Forgets `nodeId`, a stopped node that holds nothing (drained, or its replicas replaced).
   * Throws InvalidArgumentError, saying why, while it is alive or holds anything.
   */
  async removeNode(nodeId: string): Promise<void> {
    await this.#resendable(
      (m) => m.removeNode,
      { nodeId },
      (error) =>
        error instanceof InvalidArgumentError && error.message === `node ${nodeId} is not registered`,
    )
  }

  /**
   * A meta call whose effect makes a copy of it fail (a removal): when the last copy fails
   * with what `done` recognises while an earlier copy may have done the work — its answer was
   * lost (a deadline, a dropped connection), or it was still under way when the call moved on
   * (probes of other seeds while the meta leader is silent) — the call succeeded. A copy
   * refused (NOT_LEADER, as `done` says, a limit: an overloaded meta leader proposed nothing;
   * any answer but UNAVAILABLE), or never sent (a seed that is down: its connection refused),
   * did nothing. (Until 2026-12-02 every copy
   * counted: `mq queue delete nosuch` through a meta follower, redirected once, said it deleted
   * the queue; until an audit a refused copy but NOT_LEADER did: `mq node remove n9` of no such
   * node, its first copy refused overloaded, said it removed it.)
   */
  async #resendable<Req, Res>(
    pick: (client: MetaClient) => Parameters<typeof unary<Req, Res>>[1],
    request: Req,
    done: (error: unknown) => boolean,
  ): Promise<Res | undefined> {
    let mayHaveApplied = 0
    try {
      return await this.#router.meta<Req, Res>((m) => {
        const method = pick(m)
        return (req, metadata, options, callback) => {
          mayHaveApplied++
          return method.call(m, req, metadata, options, (error, response) => {
            if (error) {
              const typed = fromGrpcError(error)
              // Only a copy lost after it went out (UNAVAILABLE: a deadline, a dropped
              // connection) may have acted; not one refused, nor one never sent (a seed down).
              if (!mayHaveActed(typed)) mayHaveApplied--
            }
            callback(error, response)
          })
        }
      }, request)
    } catch (error) {
      if (!(done(error) && mayHaveApplied > 0)) throw error
      return undefined
    }
  }

  /**
   * A purge or redrive of every partition of `name` in steps (untilDone), each step one call
   * with its own retries: a retry (a failover) repeats that step, not the steps before it,
   * and the count so far is kept. Resolves with the total.
   */
  async #inSteps(
    name: string,
    step: (
      client: Connection['queue'],
      target: PartitionTarget,
      attemptMs: number,
      done: number,
    ) => Promise<{ n: number; more: boolean }>,
  ): Promise<number> {
    const counts = await this.#perPartition(name, (partition) =>
      untilDone((done) =>
        this.#router.partition(name, partition, (c, target, attemptMs) =>
          step(c.queue, target, attemptMs, done),
        ),
      ),
    )
    return counts.reduce((sum, n) => sum + n, 0)
  }

  /** One call per partition of `name`, each with its own retries, at most `atOnce` at a time. */
  async #eachPartition<T>(
    name: string,
    call: (client: Connection['queue'], target: PartitionTarget, attemptMs: number) => Promise<T>,
    atOnce = Number.POSITIVE_INFINITY,
  ): Promise<T[]> {
    return this.#perPartition(
      name,
      (partition) =>
        this.#router.partition(name, partition, (c, target, attemptMs) => call(c.queue, target, attemptMs)),
      atOnce,
    )
  }

  /**
   * `run` for every partition of `name` (its route fetched afresh), at most `atOnce` at a time
   * (all at once by default); the results in the route's order.
   */
  async #perPartition<T>(
    name: string,
    run: (partition: number) => Promise<T>,
    atOnce = Number.POSITIVE_INFINITY,
  ): Promise<T[]> {
    const route = await this.#router.route(name, true)
    const partitions = route.partitions.map((p) => p.partition)
    const results: T[] = new Array(partitions.length)
    let next = 0
    // Each runner takes the next partition when its last is done; the first failure rejects,
    // and no partition is started after it.
    const runner = async () => {
      while (next < partitions.length) {
        const i = next++
        try {
          results[i] = await run(partitions[i] as number)
        } catch (error) {
          next = partitions.length
          throw error
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(atOnce, partitions.length) }, runner))
    return results
  }

  /** Moves the leadership of a group (0 = meta) to `toNodeId`. */
  async transferLeader(groupId: number, toNodeId: string): Promise<void> {
    checkInteger('groupId', groupId, 0, Number.MAX_SAFE_INTEGER)
    await this.#router.meta((m) => m.transferLeader, { groupId, toNodeId })
  }

  /**
   * Creates a client token kept in the meta group, with `roles` (`admin`, `producer:PATTERN`,
   * `consumer:PATTERN`, `viewer:PATTERN`; a viewer role needs the cluster at format level 23),
   * and returns its secret: shown this once, only its SHA-256 is stored.
   * Needs an admin token. With `ttlMs` the token expires that long after its creation (then
   * calls with it fail UNAUTHENTICATED, saying so; at most 10 years); without, never.
   * `expiresAtMs` is 0 for a token that never expires. A retry after a lost answer may find
   * the name taken (delete it and create again).
   */
  async createToken(
    name: string,
    roles: readonly string[],
    options: { readonly ttlMs?: number } = {},
  ): Promise<{ name: string; token: string; expiresAtMs: number }> {
    const ttlMs = options.ttlMs ?? 0
    // (The meta group refuses one past its maximum, 10 years, with InvalidArgumentError.)
    checkInteger('ttlMs', ttlMs, 0, Number.MAX_SAFE_INTEGER)
    const created = await this.#router.meta((m) => m.createToken, { name, roles: [...roles], ttlMs })
    if (ttlMs > 0 && created.expiresAtMs === 0) {
      // A meta leader of a version before token lifetimes ignores the field: the token it made
      // never expires, which is not what was asked for. Undone, as far as it can be.
      await this.deleteToken(created.name).catch(() => undefined)
      throw new InvalidArgumentError(
        `the cluster made token ${created.name} without its lifetime (its meta leader runs a version before token lifetimes), so it was deleted again; create it without a lifetime, or after the upgrade`,
      )
    }
    return created
  }

  /**
   * Deletes the meta group's token `name`: calls with it fail UNAUTHENTICATED from then on. A
   * later copy that finds no such token after one whose answer was lost succeeds, as
   * deleteQueue does (until an audit it failed "no token is named").
   */
  async deleteToken(name: string): Promise<void> {
    await this.#resendable(
      (m) => m.deleteToken,
      { name },
      (error) => error instanceof InvalidArgumentError && error.message === `no token is named ${name}`,
    )
  }

  /** The meta group's tokens: names, roles, creation and expiry times (never secrets). */
  async listTokens(): Promise<TokenInfo[]> {
    return (await this.#router.meta((m) => m.listTokens, {})).tokens
  }
}
