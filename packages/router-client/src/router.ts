import { setMaxListeners } from 'node:events'
import {
  InvalidArgumentError,
  LimitExceededError,
  type MetaClient,
  MqError,
  NotLeaderError,
  type PartitionTarget,
  QueueNotFoundError,
  type QueueRoute,
  queueNameProblem,
  SequenceGapError,
  StaleRouteError,
  UnavailableError,
} from '@mq/protocol'
import { abortable } from './abortable'
import { type BackoffPolicy, backoffMs, DEFAULT_BACKOFF, delay } from './backoff'
import { ClientClosedError } from './client-closed-error'
import type { Connection, ConnectionPool } from './connections'
import { checkInteger, checkNumber, TIMER_MS_MAX } from './option-checks'
import { awaitLeader } from './silent-leader'
import { unary } from './unary'

export interface RouterOptions {
  /** Seed addresses: any nodes of the cluster. */
  readonly servers: readonly string[]
  /** Every operation (with its retries) ends by this deadline. */
  readonly deadlineMs: number
  /** One attempt's deadline (a long poll adds its wait to it). */
  readonly attemptMs: number
  readonly backoff: BackoffPolicy
  /** Retries per operation, on top of the deadline. */
  readonly attemptsMax: number
  /**
   * A partition leader that has not answered for this long (plus a long poll's wait) is
   * asked about: the request goes to the other replicas, which name the leader they know or
   * serve it themselves (see silent-leader.ts). 0: never.
   */
  readonly leaderSilenceMs: number
  /**
   * An operation every attempt of which was refused a connection (nothing listens at the
   * addresses tried), or answered by a server that does not speak HTTP/2 (an HTTP/1 server: a
   * node's HTTP port given as a server), for this long gives up then with a
   * ConnectionRefusedError, before its deadline. 0 (the default): it retries to the deadline
   * (a node restarting refuses too).
   */
  readonly refusedGiveUpMs: number
  /**
   * Hears about every attempt of every operation when it ends (for tracing why an operation
   * was slow). Called synchronously; it must not throw (a throw is caught and ignored).
   */
  readonly onAttempt?: (report: AttemptReport) => void
  /**
   * Queue routes cached, at most: past it, the least recently used is forgotten (and fetched
   * again when next used). A route is a few hundred bytes; 10,000 is more queues than a client
   * uses at once, and a client of few queues never fetches a route for the bound.
   */
  readonly routesMax: number
}

/** One attempt of an operation, as reported to `onAttempt`. */
export interface AttemptReport {
  /** A partition's data call, or a Meta call (a route fetch, an admin call). */
  readonly kind: 'partition' | 'meta'
  readonly queue?: string
  readonly partition?: number
  /** Where the attempt was sent first (silence probes may have asked other replicas too). */
  readonly address: string
  /** Which address answered, when one did. */
  readonly servedBy?: string
  readonly startMs: number
  readonly ms: number
  /** The error's code name (or class) and message, when the attempt failed. */
  readonly error?: string
}

export const DEFAULT_ROUTER_OPTIONS: Omit<RouterOptions, 'servers'> = {
  deadlineMs: 15_000,
  attemptMs: 5_000,
  backoff: DEFAULT_BACKOFF,
  attemptsMax: 50,
  leaderSilenceMs: 700,
  refusedGiveUpMs: 0,
  routesMax: 10_000,
}

/** While a leader stays silent, its replicas are asked again this often. */
const PROBE_EVERY_MS = 150

/**
 * A partition that the queue's current route does not have: the queue was deleted and created
 * again with fewer partitions since the partition was picked (within one queue, partitions are
 * only ever added). Not retriable: no retry can reach it. Its code is INVALID_ARGUMENT.
 */
export class PartitionNotFoundError extends InvalidArgumentError {
  readonly queue: string
  readonly partition: number
  /** The queue's partition count in its current route. */
  readonly partitions: number

  constructor(queue: string, partition: number, route: QueueRoute) {
    super(
      `queue ${queue} has no partition ${partition}: it has ${route.partitions.length} partition(s) now (route epoch ${route.routeEpoch}; deleted and created again with fewer)`,
    )
    this.queue = queue
    this.partition = partition
    this.partitions = route.partitions.length
  }
}

/**
 * Every attempt of an operation was refused a connection for `refusedGiveUpMs`: nothing
 * listens at the addresses tried (a wrong port, the cluster not started). Code UNAVAILABLE,
 * retriable as such; `connectionRefused` tells it from a cluster that did not answer in time.
 */
export class ConnectionRefusedError extends UnavailableError {
  readonly connectionRefused = true
}

/** Whether `error` is a connection refused by the address (grpc-js names the socket's error). */
export function refusedConnection(error: unknown): boolean {
  return error instanceof UnavailableError && /\bECONNREFUSED\b/.test(error.message)
}

/**
 * Whether `error` says the address answered, but not in HTTP/2 (grpc-js's "Protocol error": an
 * HTTP/1 server, such as a node's HTTP port): no gRPC server listens there.
 */
export function notGrpc(error: unknown): boolean {
  return error instanceof UnavailableError && /(?:^|Last error: )Protocol error\b/.test(error.message)
}

/**
 * Whether the call that failed with `error` never left this process: its connection was
 * refused, or grpc-js had no connection to send it on (a channel in transient failure after
 * earlier refusals fails its calls with "No connection established", whatever it last saw).
 */
export function neverSent(error: unknown): boolean {
  return (
    refusedConnection(error) ||
    (error instanceof UnavailableError && error.message.startsWith('No connection established'))
  )
}

/**
 * Whether a copy of a call that failed with `error` may have been applied: it went out and its
 * answer was lost (UNAVAILABLE: a deadline, a dropped connection). One the server refused
 * (NOT_LEADER, STALE_ROUTE, a limit: nothing appended) or that never left this process was not.
 */
export function mayHaveActed(error: unknown): boolean {
  return error instanceof UnavailableError && !neverSent(error)
}

/**
 * Knows where things are: which node leads the meta group, and for each queue its route
 * (partitions → data group leader), cached by route epoch. Runs an operation against the
 * right node and retries it in one hop on a typed redirect (NOT_LEADER with a leader hint,
 * STALE_ROUTE), with jittered backoff when the cluster is unavailable, until the deadline.
 */
export class Router {
  readonly #pool: ConnectionPool
  readonly #options: RouterOptions
  /**
   * The cached routes, least recently used first (a Map keeps insertion order; a use moves the
   * route to the end). Invariant: size <= routesMax.
   */
  readonly #routes = new Map<string, QueueRoute>()
  /** The queue whose route was set in #routes last (its most recently used, if still there). */
  #newest: string | undefined
  /** The route fetch under way per queue, and the deadline it gives up at. */
  readonly #fetching = new Map<string, { readonly promise: Promise<QueueRoute>; readonly deadline: number }>()
  #metaAddress: string | undefined
  readonly #closing = new AbortController()

  /**
   * Throws InvalidArgumentError without servers (or servers that are not an array of
   * addresses), RangeError for a timing option that is not an integer in range (a NaN attempt
   * deadline went to grpc-js as is, and failed every call).
   */
  constructor(pool: ConnectionPool, options: RouterOptions) {
    // A string (`servers: process.env.MQ_SERVERS`) has a length too: each of its characters
    // was taken for an address, and connect failed with grpc-js's word on the first ("Received
    // HTTP status code 404"), naming neither the option nor what was wrong with it.
    const { servers } = options
    if (!Array.isArray(servers) || servers.some((s) => typeof s !== 'string' || s === ''))
      throw new InvalidArgumentError(
        `servers: give an array of seed addresses (host:port), got ${JSON.stringify(servers) ?? String(servers)}`,
      )
    if (servers.length === 0)
      throw new InvalidArgumentError('servers: give at least one seed address (host:port)')
    checkRouterOptions(options)
    this.#pool = pool
    this.#options = options
    // Every operation waiting out a backoff listens for close on this one signal; more than
    // ten at once is the normal case under load, not a leak (each removes its listener).
    setMaxListeners(0, this.#closing.signal)
  }

  get options(): RouterOptions {
    return this.#options
  }

  /** Stops every retry loop at its next wait: they fail with ClientClosedError. */
  close(): void {
    this.#closing.abort()
  }

  /**
   * Calls a Meta method on the meta leader (or any meta replica for reads; a follower that
   * cannot answer redirects). Tries the last known meta address, then every seed. A meta
   * leader silent for `leaderSilenceMs` is asked about through the other seeds, as a
   * partition's leader is (awaitLeader): a follower names the new leader once one is elected.
   * `deadline` (ms since the epoch): the deadline of the operation this call is part of (a
   * partition operation's route refresh). Without one, it has `deadlineMs` of its own. Its
   * retries end there, and no attempt outlasts it.
   */
  meta<Req, Res>(
    pick: (client: MetaClient) => Parameters<typeof unary<Req, Res>>[1],
    request: Req,
    deadline = Date.now() + this.#options.deadlineMs,
  ): Promise<Res> {
    let seedIndex = 0
    const servers = this.#options.servers
    const send = (address: string) => {
      const client = this.#pool.get(address).meta
      return unary(client, pick(client), request, this.#attemptMsBy(deadline))
    }
    return this.#retry(async () => {
      const address = this.#metaAddress ?? servers[seedIndex++ % servers.length]!
      let servedBy = address
      const startMs = Date.now()
      try {
        const response = await this.#awaitLeader(address, servers, send, 0, (served) => {
          servedBy = served
        })
        this.#metaAddress = servedBy
        this.#report({ kind: 'meta', address, servedBy, startMs, ms: Date.now() - startMs })
        return response
      } catch (error) {
        const leader = (error as MqError).facts?.leaderAddress
        // A refusal for good (no such queue, a bad argument) is the answer of the address asked:
        // it is asked first next time, as after a success (until an audit the next call started
        // at the first seed again, and waited out a silent one there).
        this.#metaAddress =
          error instanceof NotLeaderError && leader
            ? leader
            : (error as MqError).retriable === false
              ? address
              : undefined
        this.#report({ kind: 'meta', address, startMs, ms: Date.now() - startMs, error: describe(error) })
        throw error
      }
    }, deadline)
  }

  /**
   * Returns the cached route of `queue`, fetching it when absent or when `refresh` is set.
   * `deadline` (ms since the epoch; default `deadlineMs` from now): that of the operation the
   * fetch is part of (a partition operation's route refresh), which it does not outlast.
   * `signal`: the caller stops waiting when it aborts (rejected with its reason); the fetch,
   * which other callers may share, goes on.
   */
  route(queue: string, refresh = false, deadline?: number, signal?: AbortSignal): Promise<QueueRoute> {
    if (!refresh) {
      const cached = this.#used(queue)
      if (cached) return Promise.resolve(cached)
    }
    return abortable(this.#fetch(queue, deadline), signal)
  }

  /** Fetches the route of `queue`, or joins the fetch under way (see route). */
  #fetch(queue: string, deadline?: number): Promise<QueueRoute> {
    const by = deadline ?? Date.now() + this.#options.deadlineMs
    const pending = this.#fetching.get(queue)
    if (pending) {
      // One fetch at a time per queue. One that runs past this caller's deadline is waited for
      // until then; one that gives up before it (a shorter operation's) is followed by another.
      if (pending.deadline > by) return until(pending.promise, by)
      return pending.promise.catch((error: unknown) => {
        if (!(error as MqError).retriable || Date.now() >= by) throw error
        return this.#fetch(queue, by)
      })
    }
    const promise = this.meta((m) => m.getRoutes, { queues: [queue] }, by)
      .then((response) => {
        const route = response.routes.find((r) => r.queue === queue)
        if (!route) {
          // A name no queue can have is told as such, not as "does not exist" (which sends a
          // user looking for a queue to create).
          const problem = queueNameProblem(queue)
          if (problem) throw new InvalidArgumentError(problem)
          // Deleted: its old route goes (it would only lead to QUEUE_NOT_FOUND again).
          this.#routes.delete(queue)
          throw new QueueNotFoundError(`queue ${queue} does not exist`)
        }
        this.#cache(route)
        return route
      })
      .finally(() => this.#fetching.delete(queue))
    this.#fetching.set(queue, { promise, deadline: by })
    return promise
  }

  /** The cached route of `queue`, if any (no call). */
  cachedRoute(queue: string): QueueRoute | undefined {
    return this.#routes.get(queue)
  }

  /** The cached route of `queue`, if any, made the most recently used, as route() does (no call). */
  usedRoute(queue: string): QueueRoute | undefined {
    return this.#used(queue)
  }

  /** Forgets the cached route of `queue`. */
  invalidate(queue: string): void {
    this.#routes.delete(queue)
  }

  /** The cached route of `queue`, if any, made the most recently used. */
  #used(queue: string): QueueRoute | undefined {
    const route = this.#routes.get(queue)
    // Already the most recent (a producer's every send asks): no delete and set again.
    if (route && queue !== this.#newest) {
      this.#routes.delete(queue)
      this.#routes.set(queue, route)
      this.#newest = queue
    }
    return route
  }

  /** Caches `route` as the most recently used; forgets the least recently used past routesMax. */
  #cache(route: QueueRoute): void {
    this.#routes.delete(route.queue)
    this.#routes.set(route.queue, route)
    this.#newest = route.queue
    for (const oldest of this.#routes.keys()) {
      if (this.#routes.size <= this.#options.routesMax) break
      this.#routes.delete(oldest)
    }
  }

  /**
   * One attempt's deadline for a call made now: `attemptMs`, cut to what is left until the
   * operation's `deadline` (ms since the epoch). Until an audit only a route refresh's attempts
   * were cut: a call that failed fast just before its deadline (a full queue, a redirect) was
   * tried again for a whole `attemptMs`, and an operation of a 1-s deadline whose leader then
   * fell silent ended after 5.9 s (`mq --timeout 2s` could wait 4 s).
   */
  #attemptMsBy(deadline: number): number {
    return Math.max(1, Math.min(this.#options.attemptMs, deadline - Date.now()))
  }

  /**
   * Runs `operation` against the leader of `queue`'s `partition`, with the target (queue,
   * partition, route epoch) to put in the request and the attempt's deadline (`attemptMs`, cut
   * to what is left of the operation's; a long poll adds its wait). On NOT_LEADER it follows the hint, on
   * STALE_ROUTE it refreshes the route, on a limit (LIMIT_EXCEEDED) or a sequence gap it backs
   * off, on other retriable errors it backs off and refreshes.
   * A leader silent for `leaderSilenceMs` plus `waitMs` (a long poll's wait) is asked about
   * through the other replicas (awaitLeader). `signal` (a consumer's stop): when it aborts,
   * the operation stops waiting for a route fetch or a backoff and rejects with its reason
   * (the operation itself should cancel its call with it too).
   */
  partition<T>(
    queue: string,
    partition: number,
    operation: (connection: Connection, target: PartitionTarget, attemptMs: number) => Promise<T>,
    waitMs = 0,
    signal?: AbortSignal,
  ): Promise<T> {
    let refresh = false
    // Replicas that could neither serve nor name the leader during this operation (down, no
    // leader known, removed from the group): the next attempt tries another one, which serves
    // or names the new leader (faster than waiting for the meta group to learn of it).
    const skip = new Set<string>()
    // One deadline for the whole operation, route refreshes included (their retries stop there).
    const deadline = Date.now() + this.#options.deadlineMs
    // The route the last attempt used.
    let used: QueueRoute | undefined
    return this.#retry(
      async () => {
        // Fetched during this operation (not a route cached before it began).
        const fresh = refresh || !this.#routes.has(queue)
        const route = await this.route(queue, refresh, deadline, signal)
        used = route
        refresh = false
        const p = route.partitions.find((x) => x.partition === partition)
        if (!p) {
          // A cached route may predate the partition (added since): fetched again, it has it. A
          // fresh one without it is the queue's current shape: the queue was deleted and created
          // again with fewer partitions, and no retry can reach this one.
          if (fresh) throw new PartitionNotFoundError(queue, partition, route)
          refresh = true
          throw new StaleRouteError(
            `queue ${queue} has no partition ${partition} in route epoch ${route.routeEpoch}`,
          )
        }
        const candidates = [p.leaderAddress, ...p.replicas.map((r) => r.address)].filter((a) => a !== '')
        if (candidates.length === 0) {
          refresh = true
          throw new UnavailableError(`partition ${queue}/${partition} has no known replica yet`)
        }
        if (candidates.every((a) => skip.has(a))) skip.clear()
        const address = candidates.find((a) => !skip.has(a)) as string
        const target = { queue, partition, routeEpoch: route.routeEpoch }
        const send = (a: string) => operation(this.#pool.get(a), target, this.#attemptMsBy(deadline))
        const startMs = Date.now()
        const report = { kind: 'partition', queue, partition, address, startMs } as const
        try {
          let servedBy = address
          const result = await this.#awaitLeader(address, candidates, send, waitMs, (served) => {
            servedBy = served
          })
          // Whoever served leads the partition's group: the next operation starts there (not at
          // the first replica of the route, which may be down, or back and not knowing the leader).
          p.leaderAddress = servedBy
          this.#report({ ...report, servedBy, ms: Date.now() - startMs })
          return result
        } catch (error) {
          this.#report({ ...report, ms: Date.now() - startMs, error: describe(error) })
          if (error instanceof NotLeaderError && error.facts.leaderAddress) {
            // Follow the hint.
            p.leaderId = error.facts.leaderId ?? ''
            p.leaderAddress = error.facts.leaderAddress
            skip.delete(error.facts.leaderAddress)
          } else if (
            error instanceof NotLeaderError || // knows no leader (an election, or just restarted)
            error instanceof UnavailableError ||
            formerReplica(error, address, candidates, skip)
          ) {
            skip.add(address)
            if (address === p.leaderAddress) p.leaderAddress = ''
            // Every address the route names failed: the group may have moved, or its nodes come
            // back at other addresses; the next round asks for the route again (else a cached
            // route of dead addresses was retried until the process restarted).
            if (candidates.every((a) => skip.has(a))) refresh = true
          } else if (!(error instanceof SequenceGapError || error instanceof LimitExceededError)) {
            // (A sequence gap or a limit comes from the leader, which the route found: an earlier
            // batch is on its way, or the queue is full; a route fetch would change nothing.)
            refresh = true
          }
          throw error
        }
      },
      deadline,
      signal,
    ).catch((error: unknown) => {
      // Given up unavailable with addresses of the route that failed, or its refresh due: the
      // next operation fetches the route afresh. Until an audit it started over with the same
      // cached route, and where each address waited out an attempt (nothing answering there: a
      // group whose nodes came back at other addresses) no operation ever reached the refresh.
      if (error instanceof UnavailableError && (refresh || skip.size > 0) && this.#routes.get(queue) === used)
        this.#routes.delete(queue)
      throw error
    })
  }

  #report(report: AttemptReport): void {
    try {
      // An observer's failure is not the operation's, nor is an async one's rejection (it was
      // an unhandled rejection, which ends a Node process).
      const observed: unknown = this.#options.onAttempt?.(report)
      if (observed instanceof Promise) observed.catch(() => {})
    } catch {}
  }

  /**
   * Sends to `address` (the leader as known) through awaitLeader: silent for
   * `leaderSilenceMs` plus `waitMs`, the same request goes to the other `replicas` in turn.
   */
  #awaitLeader<T>(
    address: string,
    replicas: readonly string[],
    send: (address: string) => Promise<T>,
    waitMs: number,
    served: (address: string) => void,
  ): Promise<T> {
    const silenceMs = this.#options.leaderSilenceMs
    const probes =
      silenceMs > 0
        ? [...new Set(replicas)]
            .filter((a) => a !== address)
            .map((a) => ({ address: a, send: () => send(a) }))
        : []
    return awaitLeader(
      send(address),
      address,
      probes,
      { silentMs: silenceMs + waitMs, probeEveryMs: PROBE_EVERY_MS },
      served,
    )
  }

  /**
   * Runs `attempt` until it succeeds, fails with a non-retriable error, or the deadline
   * (`deadline`, ms since the epoch, or `deadlineMs` from now) or the attempt limit passes.
   * The first redirect is retried at once; later ones back off. Once the router is closed it
   * fails with ClientClosedError; once `signal` aborts, with its reason.
   */
  async #retry<T>(
    attempt: () => Promise<T>,
    deadline = Date.now() + this.#options.deadlineMs,
    signal?: AbortSignal,
  ): Promise<T> {
    const started = Date.now()
    let last: unknown
    let backoffs = 0
    let immediate = 0
    let n = 0
    const refusedGiveUpMs = this.#options.refusedGiveUpMs
    let allRefused = refusedGiveUpMs > 0
    for (; n < this.#options.attemptsMax; n++) {
      if (this.#closing.signal.aborted) throw new ClientClosedError(undefined, { cause: last })
      if (signal?.aborted) throw signal.reason
      try {
        return await attempt()
      } catch (error) {
        last = error
        if (!(error as MqError).retriable) throw error
      }
      allRefused &&= refusedConnection(last) || notGrpc(last)
      const refusedFor = Date.now() - started
      if (allRefused && refusedFor >= refusedGiveUpMs) {
        const [what, guess] = notGrpc(last)
          ? ['answered by a server that does not speak gRPC', 'no gRPC server there?']
          : ['connection refused', 'nothing listens there?']
        throw new ConnectionRefusedError(
          `${what} on every attempt for ${refusedFor} ms (${n + 1} attempts; ${guess}): ${(last as Error).message}`,
          {},
          { cause: last },
        )
      }
      // New information is followed at once: a redirect to a named leader (a failover's new
      // leader), or the first redirect of any kind. Up to 3 in a row, so that two replicas with
      // stale hints cannot bounce a request back and forth without a pause.
      const hinted = last instanceof NotLeaderError && Boolean(last.facts.leaderAddress)
      const redirect =
        hinted || ((last instanceof NotLeaderError || last instanceof StaleRouteError) && n === 0)
      const backoff = redirect && immediate < 3 ? 0 : backoffMs(this.#options.backoff, backoffs++)
      // While every attempt was refused, the last one comes when the give-up time does.
      const wait = allRefused ? Math.min(backoff, started + refusedGiveUpMs - Date.now()) : backoff
      immediate = wait === 0 ? immediate + 1 : 0
      // No wait after the last attempt: until 2026-12-07 (an audit) the caller waited out a
      // backoff that no attempt followed.
      if (n + 1 >= this.#options.attemptsMax || Date.now() + wait >= deadline) {
        n++
        break
      }
      await delay(wait, this.#closing.signal, signal)
    }
    const message = last instanceof Error ? last.message : String(last)
    const gaveUp = `gave up after ${n} attempts in ${Date.now() - started} ms: ${message}`
    // A limit that held throughout (a full queue, a delivery rate) stays what it is: the
    // cluster answered, and the caller may tell it from one that could not be reached.
    if (last instanceof LimitExceededError) throw new LimitExceededError(gaveUp, last.facts, { cause: last })
    throw new UnavailableError(gaveUp, {}, { cause: last })
  }
}

/** Throws a RangeError naming the first option of `o` out of range. */
function checkRouterOptions(o: RouterOptions): void {
  checkInteger('deadlineMs', o.deadlineMs, 1, TIMER_MS_MAX)
  checkInteger('attemptMs', o.attemptMs, 1, TIMER_MS_MAX)
  checkInteger('attemptsMax', o.attemptsMax, 1, Number.MAX_SAFE_INTEGER)
  checkInteger('leaderSilenceMs', o.leaderSilenceMs, 0, TIMER_MS_MAX)
  checkInteger('refusedGiveUpMs', o.refusedGiveUpMs, 0, TIMER_MS_MAX)
  checkInteger('routesMax', o.routesMax, 1, Number.MAX_SAFE_INTEGER)
  checkInteger('backoff.initialMs', o.backoff.initialMs, 0, TIMER_MS_MAX)
  checkInteger('backoff.maxMs', o.backoff.maxMs, o.backoff.initialMs, TIMER_MS_MAX)
  checkNumber('backoff.multiplier', o.backoff.multiplier, 1, Number.MAX_VALUE)
}

/**
 * `promise`, or an UnavailableError (retriable) once `deadline` (ms since the epoch) passes
 * first: an operation waiting on a route fetch that another one started keeps its own deadline.
 */
function until<T>(promise: Promise<T>, deadline: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new UnavailableError('the route fetch under way outlasted the operation’s deadline')),
      Math.max(0, deadline - Date.now()),
    )
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/**
 * Whether `error` says that the node at `address` holds no replica of the partition's group
 * (STALE_ROUTE naming no group: it was removed from the group, say) while the route names
 * other replicas not tried yet. They are asked first: one of them leads the group or names
 * its leader, and a route refresh needs the meta group, which may be the one that is down.
 * A partition that moved away is fenced in its old group, so an old route cannot reach a
 * second copy of it: the other replicas answer STALE_ROUTE naming the group, and the route
 * is refreshed then.
 */
function formerReplica(
  error: unknown,
  address: string,
  candidates: readonly string[],
  tried: ReadonlySet<string>,
): boolean {
  if (!(error instanceof StaleRouteError) || error.facts.groupId !== undefined) return false
  return candidates.some((a) => a !== address && !tried.has(a))
}

/** An attempt's error for a report: its code name (or class) and message. */
function describe(error: unknown): string {
  if (error instanceof MqError) return `${error.code}: ${error.message}`
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
}
