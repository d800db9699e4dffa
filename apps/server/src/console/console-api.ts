import type { IncomingMessage, ServerResponse } from 'node:http'
import {
  type ActionResult,
  type ClusterInfo,
  NAMED_PARTITIONS_MAX,
  PEEK_BODY_CHARS,
  PEEK_PER_PARTITION,
  type PeekedMessage,
  type QueueConfigInfo,
  type QueueDetail,
  type QueueSummary,
  type SessionInfo,
  type UpdateQueueBody,
} from '@mq/console'
import { formatRole } from '@mq/meta-service'
import {
  META_VOTER_COUNTS,
  type QueueConfig,
  type QueueRoute,
  REPLICAS_PER_GROUP_MAX,
  shownCut,
  shownText,
} from '@mq/protocol'
import {
  drainResult,
  type ListedMessage,
  type MqClient,
  metaGroupSummary,
  metaVotersResult,
  replicationResult,
  replicationSummary,
  undrainResult,
} from '@mq/router-client'
import type { AccessControl, Principal } from '../auth/access'
import { principalName } from '../auth/audit-log'
import type { Logger } from '../log'
import { NODE_ID_PATTERN } from '../members'
import { ApiRequestError, httpError } from './api-errors'
import { CallSlots } from './call-slots'
import type { ConsoleClients } from './console-clients'
import { queueFigures } from './queue-depth'
import { counterRatesPerS, netRatePerS, QueueHistory } from './queue-history'

/** A JSON body larger than this is refused (the admin actions' bodies are a few hundred bytes). */
export const BODY_BYTES_MAX = 64 * 1024
/** `GET /api/queues` reads the stats of this many queues at most (the rest are listed without). */
export const QUEUES_WITH_STATS_MAX = 50
/** Queue names the API accepts (the meta service checks its own rules on create). */
const NAME_MAX = 256
/**
 * Requests that call the cluster at once, at most, and requests waiting for one of those slots;
 * beyond, 429.
 */
export const CLUSTER_CALLS_RUNNING_MAX = 8
export const CLUSTER_CALLS_WAITING_MAX = 32
/**
 * Peeks under way at once, at most, and peeks waiting for one (before they wait for a cluster
 * call's slot); beyond, 429. The SDK reads a peek's partitions 8 at a time, each answer holding
 * up to 4 MiB of bodies, so the peeks of every caller hold at most 2 x 8 x 4 MiB = 64 MiB of
 * answers at once; of each message the console keeps PEEK_BODY_BYTES_MAX of its body, copied
 * as its answer arrives (256 partitions x 10 messages x ~1 KiB per peek).
 */
export const PEEKS_RUNNING_MAX = 2
export const PEEKS_WAITING_MAX = 8
/**
 * Bytes of a peeked body read to show PEEK_BODY_CHARS characters of it: a UTF-16 unit is at
 * most 3 bytes of UTF-8 (an astral character is 4 bytes, 2 units), and base64 needs fewer.
 */
export const PEEK_BODY_BYTES_MAX = 4 * PEEK_BODY_CHARS
/**
 * Stats calls (one per partition) that `GET /api/queues` makes at once, at most: a queue's
 * stats take as many of them as it has partitions (all at once, by the SDK), so queues are
 * read in turn while their partitions add up to at most this; a queue with more partitions
 * is read alone. Without it, 50 queues of 256 partitions were 12,800 calls at once.
 */
export const QUEUES_STATS_CALLS_AT_ONCE = 64
/** The cluster method a peek calls (its roles decide `mayPeek`). */
const PEEK_METHOD = 'mq.v1.Queue/ListReady'

const NUMBER_KEYS = [
  'partitions',
  'visibilityTimeoutMs',
  'maxDeliveries',
  'messageBytesMax',
  'queueLengthMax',
  'dedupWindowMs',
  'messageTtlMs',
  'deliveryRate',
  'retryBackoffMinMs',
  'retryBackoffMaxMs',
] as const
const STRING_KEYS = ['deadLetterQueue', 'engine'] as const
const FLAG_KEYS: readonly string[] = ['strictPriority', 'paused', 'orderedKeys']
const UPDATE_KEYS: readonly (keyof UpdateQueueBody)[] = [
  'partitions',
  'visibilityTimeoutMs',
  'maxDeliveries',
  'deadLetterQueue',
  'messageBytesMax',
  'queueLengthMax',
  'strictPriority',
  'dedupWindowMs',
  'messageTtlMs',
  'paused',
  'deliveryRate',
  'retryBackoffMinMs',
  'retryBackoffMaxMs',
]

export interface ConsoleApiOptions {
  readonly nodeId: string
  readonly access: AccessControl
  readonly clients: ConsoleClients
  readonly history?: QueueHistory
  readonly nowMs?: () => number
  /**
   * Serve peeks (message bodies) while clients are not authenticated (`--console-peek`);
   * without it a peek needs auth on and a token that may consume the queue.
   */
  readonly peekWithoutAuth?: boolean
  /**
   * Where each admin action is logged with the browser's address: the gRPC audit line of the
   * call it makes names this node as its peer (the console calls its own port).
   */
  readonly log?: Logger
}

interface Caller {
  readonly token: string
  readonly principal: Principal
}

/**
 * The console's JSON API under `/api/`. Reads (GET) and admin actions (POST, JSON body) go
 * to the cluster through the SDK with the caller's token, so the gRPC server checks them with
 * the same AccessControl as any client; the API itself first authenticates the bearer token
 * (401 for an unknown one, or for none when auth is on) and refuses admin actions unless
 * auth is on and the token has the admin role (403). Without `--auth-file` the console is
 * read-only and shows no message body (unless `peekWithoutAuth`). Requests that call the
 * cluster take one of CLUSTER_CALLS_RUNNING_MAX slots. Every error answers
 * `{ error: { code, message } }`.
 */
export class ConsoleApi {
  readonly #options: ConsoleApiOptions
  readonly #history: QueueHistory
  readonly #nowMs: () => number
  readonly #slots = new CallSlots(CLUSTER_CALLS_RUNNING_MAX, CLUSTER_CALLS_WAITING_MAX)
  readonly #peekSlots = new CallSlots(PEEKS_RUNNING_MAX, PEEKS_WAITING_MAX, undefined, 'peeks')

  constructor(options: ConsoleApiOptions) {
    this.#options = options
    this.#history = options.history ?? new QueueHistory()
    this.#nowMs = options.nowMs ?? Date.now
  }

  /** Answers one request whose path starts with `/api/`. Never rejects. */
  async handle(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    // The caller left (its page gave up, after 10 s): work for it that has not started is not started.
    let left = false
    res.once('close', () => {
      left = true
    })
    try {
      const body = await this.#route(req, path, () => left)
      sendJson(res, 200, body)
    } catch (error) {
      const e = httpError(error)
      if (error instanceof ApiRequestError && error.allow) res.setHeader('allow', error.allow)
      // The scheme a 401 asks for (RFC 9110 §11.6.1), as /metrics names it (none until 2026-12-07).
      if (e.status === 401) res.setHeader('www-authenticate', 'Bearer realm="mq"')
      sendJson(res, e.status, { error: { code: e.code, message: e.message } })
    }
  }

  async #route(req: IncomingMessage, path: string, gone: () => boolean): Promise<unknown> {
    const caller = this.#authenticate(req)
    const parts = path.slice('/api/'.length).split('/').map(decodePart)
    const [first, second, third] = parts
    // A known route asked with another method is told which it takes: a read POSTed, or an
    // action read, was answered 404 "no API at …" until 2026-12-07, and a 405 named none.
    const allowed = [...(isRead(parts) ? ['GET', 'HEAD'] : []), ...(isAction(parts) ? ['POST'] : [])]
    if (allowed.length === 0) throw notFound(path)
    if (!allowed.includes(req.method ?? '')) {
      const allow = allowed.join(', ')
      throw new ApiRequestError(405, 'METHOD_NOT_ALLOWED', `${path} takes ${allow}`, allow)
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (parts.length === 1 && first === 'session') return this.#session(caller)
      if (parts.length === 1 && first === 'cluster')
        return this.#call(caller, (c) => this.#cluster(c, this.#scoped(caller.principal)))
      if (parts.length === 1 && first === 'queues') return this.#call(caller, (c) => this.#queues(c, gone))
      if (parts.length === 2 && first === 'queues') {
        const queue = name(second)
        return this.#call(caller, (c) => this.#queue(c, queue, this.#mayPeek(caller, queue)))
      }
      if (parts.length === 3 && first === 'queues' && third === 'peek') {
        const queue = name(second)
        this.#requirePeek()
        // A peek waiting for its own slot holds no cluster call's slot.
        return this.#peekSlots.run(() => this.#call(caller, (c) => this.#peek(c, queue)))
      }
      throw notFound(path)
    }
    this.#requireAdmin(caller)
    const body = await readJson(req)
    // Checked before a slot is taken and a client connected: a bad path or body was answered
    // 503 with the cluster down, or 429 with every slot taken, not 400 (until 2026-12-07).
    const action = actionOf(parts, body)
    const from = req.socket.remoteAddress
    let outcome = 'done'
    try {
      return await this.#call(caller, action)
    } catch (error) {
      outcome = `failed: ${(error as Error).message}`
      throw error
    } finally {
      this.#options.log?.info(
        { audit: 'console', path, from },
        `console: POST ${path} by ${principalName(caller.principal)} from ${from ?? 'an unknown address'}: ${outcome}`,
      )
    }
  }

  #authenticate(req: IncomingMessage): Caller {
    const header = req.headers.authorization
    const principal = this.#options.access.authenticateHttp(header)
    if (this.#options.access.clientAuth && principal.kind === 'anonymous') {
      throw new ApiRequestError(
        401,
        'UNAUTHENTICATED',
        'this cluster requires a token: enter one in the page',
      )
    }
    // The scheme in any case, as authenticateHttp takes it (RFC 7235 §2.1): a `bearer` header was
    // authenticated, then its cluster calls went without a token (401 for an admin's valid token).
    const token = this.#options.access.clientAuth ? (/^Bearer (.+)$/i.exec(header ?? '')?.[1] ?? '') : ''
    return { token, principal }
  }

  #requireAdmin(caller: Caller): void {
    if (!this.#options.access.clientAuth) {
      throw new ApiRequestError(
        403,
        'READ_ONLY',
        'the console is read-only while clients are not authenticated: start the servers with --auth-file and use an admin token',
      )
    }
    if (!isAdmin(caller.principal)) {
      const name = caller.principal.kind === 'token' ? caller.principal.name : 'anonymous'
      throw new ApiRequestError(
        403,
        'PERMISSION_DENIED',
        `token "${name}" may not change the cluster: needs admin`,
      )
    }
  }

  /**
   * A message body can hold anything (personal data, secrets), and the HTTP port is often
   * reachable more widely than the gRPC one: without auth nobody may read bodies there
   * unless the node was started with `--console-peek` (`mq-server dev` does, on loopback).
   */
  #requirePeek(): void {
    if (this.#options.access.clientAuth || this.#options.peekWithoutAuth) return
    throw new ApiRequestError(
      403,
      'PEEK_DISABLED',
      'message bodies are shown only to a token that may consume the queue: start the servers with --auth-file, or start this node with --console-peek to show them to anyone who reaches its HTTP port',
    )
  }

  /**
   * Whether `caller` may peek at `queue` (#requirePeek, then the cluster's own check of
   * ListReady, which the page is told beforehand so it offers no peek that would be refused).
   */
  #mayPeek(caller: Caller, queue: string): boolean {
    const access = this.#options.access
    if (!access.clientAuth) return this.#options.peekWithoutAuth === true
    try {
      access.authorize(caller.principal, PEEK_METHOD, { target: { queue } })
      return true
    } catch {
      return false
    }
  }

  /** Runs `call` with the caller's client in one of the cluster-call slots (429 when none is free). */
  #call<T>(caller: Caller, call: (client: MqClient) => Promise<T>): Promise<T> {
    return this.#slots.run(() => this.#options.clients.use(caller.token, call))
  }

  #session(caller: Caller): SessionInfo {
    const p = caller.principal
    return {
      nodeId: this.#options.nodeId,
      auth: this.#options.access.clientAuth,
      tokenName: p.kind === 'token' ? p.name : '',
      roles: p.kind === 'token' ? p.roles.map(formatRole) : [],
      admin: this.#options.access.clientAuth && isAdmin(p),
    }
  }

  /** Whether `p` sees only some queues (a token without admin, on a node that checks tokens). */
  #scoped(p: Principal): boolean {
    return this.#options.access.clientAuth && !isAdmin(p)
  }

  async #cluster(client: MqClient, scoped: boolean): Promise<ClusterInfo> {
    const status = await client.admin.clusterStatus()
    // Partitions are named only in a small cluster: naming them lists every queue at each poll.
    // A token that sees only some queues lists those alone (the cluster reads only the names
    // under its patterns), so its own are named while they are few, however many the others.
    const total = status.groups.reduce((n, g) => n + g.partitions, 0)
    // One queue past the bound: a listing cut at the bound would pass for all of a scoped token's
    // queues (1,001 one-partition queues named 1,000 of them).
    const listed =
      total <= NAMED_PARTITIONS_MAX || scoped
        ? await client.admin.listQueues('', NAMED_PARTITIONS_MAX + 1)
        : []
    const queues = listed.reduce((n, q) => n + q.partitions.length, 0) <= NAMED_PARTITIONS_MAX ? listed : []
    const held = new Map<number, string[]>()
    for (const q of queues) {
      for (const p of q.partitions) {
        const list = held.get(p.groupId) ?? []
        list.push(`${q.queue}/${p.partition}`)
        held.set(p.groupId, list)
      }
    }
    const groups = status.groups
      .map((g) => ({
        groupId: g.groupId,
        leaderId: g.leaderId,
        term: g.term,
        replicas: g.replicas.map((r) => ({
          nodeId: r.nodeId,
          learner: r.learner,
          appliedIndex: r.appliedIndex,
          lag: Math.max(0, g.commitIndex - r.appliedIndex),
        })),
        commitIndex: g.commitIndex,
        appliedIndex: g.appliedIndex,
        applyLag: Math.max(0, g.commitIndex - g.appliedIndex),
        state: g.state,
        partitionCount: g.partitions,
        partitions: (held.get(g.groupId) ?? []).sort(),
      }))
      .sort((a, b) => a.groupId - b.groupId)
    // Group 0 (meta) is not among the data groups: its leader is the meta leader.
    const leaderOf = (nodeId: string) => [
      ...(nodeId === status.metaLeaderId ? [0] : []),
      ...groups.filter((g) => g.leaderId === nodeId).map((g) => g.groupId),
    ]
    return {
      servedBy: this.#options.nodeId,
      metaLeaderId: status.metaLeaderId,
      meta: {
        voters: status.metaVoters,
        votersWanted: status.metaVotersWanted,
        summary: metaGroupSummary(status),
        voterChoices: META_VOTER_COUNTS,
      },
      replicationFactor: status.replicationFactor,
      replication: replicationSummary(status.replicationFactor),
      replicationChoices: Array.from({ length: REPLICAS_PER_GROUP_MAX }, (_, i) => i + 1),
      routeEpoch: status.routeEpoch,
      nodes: status.nodes
        .map((n) => ({
          nodeId: n.nodeId,
          address: n.address,
          alive: n.alive,
          draining: n.draining,
          lastHeartbeatMs: n.lastHeartbeatMs,
          groupIds: [...n.groupIds].sort((a, b) => a - b),
          leaderOf: leaderOf(n.nodeId),
        }))
        .sort((a, b) => a.nodeId.localeCompare(b.nodeId)),
      groups,
      scale: status.scale ?? null,
      moves: status.moves.map((m) => ({ ...m })),
      atMs: this.#nowMs(),
    }
  }

  async #queues(client: MqClient, gone: () => boolean): Promise<QueueSummary[]> {
    const routes = await client.admin.listQueues()
    const read = routes.slice(0, QUEUES_WITH_STATS_MAX)
    const depths = await withinBudget(
      read.map((route) => route.partitions.length),
      QUEUES_STATS_CALLS_AT_ONCE,
      async (i) => {
        // Each queue read may take the call's deadline (a group without a leader): 50 of them in
        // turn held a cluster-call slot for minutes after the page had given up.
        if (gone()) return { depth: null, error: 'not read: the caller left' }
        try {
          return {
            depth: queueFigures(await client.admin.queueStats((read[i] as QueueRoute).queue)).depth,
            error: '',
          }
        } catch (error) {
          return { depth: null, error: httpError(error).message }
        }
      },
    )
    return routes.map(
      (route, i): QueueSummary => ({
        name: route.queue,
        config: configOf(route),
        ...(depths[i] ?? {
          depth: null,
          error: `not read: only the first ${QUEUES_WITH_STATS_MAX} queues' stats are`,
        }),
      }),
    )
  }

  async #queue(client: MqClient, queue: string, mayPeek: boolean): Promise<QueueDetail> {
    const route = await client.admin.describeQueue(queue)
    const figures = queueFigures(await client.admin.queueStats(queue), route)
    const history = this.#history.record(`${route.queue}#${route.queueId}`, {
      atMs: this.#nowMs(),
      depth: figures.depth,
      counters: figures.counters,
      weights: figures.weights.map((w) => ({
        weight: w.weight,
        ready: w.ready,
        targetShare: w.targetShare,
        achievedShare: w.achievedShare,
      })),
    })
    return {
      name: route.queue,
      queueId: route.queueId,
      routeEpoch: route.routeEpoch,
      config: configOf(route),
      ...figures,
      history,
      netRatePerS: netRatePerS(history),
      ratesPerS: counterRatesPerS(history),
      mayPeek,
    }
  }

  /**
   * Ready messages of each partition, not delivered (the caller's token needs the consume
   * role). Each message is cut to what the page shows as its partition's answer arrives, so
   * the answer (up to 4 MiB of bodies) is let go at once, not kept until every partition has
   * answered.
   */
  async #peek(client: MqClient, queue: string): Promise<PeekedMessage[]> {
    return client.admin.peek(queue, PEEK_PER_PARTITION, { map: peeked })
  }
}

/** Whether `parts` (the path after `/api/`) is a read's route (GET, HEAD). */
function isRead(parts: readonly string[]): boolean {
  const [first, , third] = parts
  return (
    (parts.length === 1 && ['session', 'cluster', 'queues'].includes(first ?? '')) ||
    (parts.length === 2 && first === 'queues') ||
    (parts.length === 3 && first === 'queues' && third === 'peek')
  )
}

/** Whether `parts` (the path after `/api/`) is an admin action's route (POST). */
function isAction(parts: readonly string[]): boolean {
  const [first, , third] = parts
  return (
    (parts.length === 1 && ['queues', 'scale', 'meta-voters', 'replication'].includes(first ?? '')) ||
    (parts.length === 3 &&
      first === 'queues' &&
      ['update', 'delete', 'purge', 'redrive'].includes(third ?? '')) ||
    (parts.length === 3 && first === 'groups' && third === 'transfer') ||
    (parts.length === 3 && first === 'nodes' && ['drain', 'undrain', 'remove'].includes(third ?? ''))
  )
}

/** An admin action, checked: what it asks the cluster with the caller's client. */
type Action = (client: MqClient) => Promise<ActionResult>

/**
 * The admin action at `parts` (a known route) with its JSON body: throws 400 for a bad path
 * or body, before any slot or cluster call.
 */
function actionOf(parts: readonly string[], body: unknown): Action {
  const [first, second, third] = parts
  if (parts.length === 1 && first === 'queues') return create(body)
  if (first === 'scale') return scale(body)
  if (first === 'meta-voters') return metaVoters(body)
  if (first === 'replication') return replication(body)
  if (first === 'groups') return transfer(groupId(second), body)
  if (first === 'nodes') return nodeAction(nodeId(second), third as 'drain' | 'undrain' | 'remove')
  const queue = name(second)
  switch (third) {
    case 'update': {
      const update = updateOf(body)
      return async (client) => {
        await client.admin.updateQueue(queue, update)
        if (Object.keys(update).length === 1 && update.paused !== undefined) {
          return done(
            update.paused
              ? `paused delivery of ${queue}: consumers get nothing until it is resumed`
              : `resumed delivery of ${queue}`,
          )
        }
        return done(`updated the settings of ${queue}`)
      }
    }
    case 'delete':
      return async (client) => {
        await client.admin.deleteQueue(queue)
        return done(`deleted queue ${queue}`)
      }
    case 'purge':
      return async (client) =>
        done(`purged ${await client.admin.purgeQueue(queue)} ready (and waiting) messages of ${queue}`)
    default:
      return async (client) =>
        done(`moved ${await client.admin.redriveDeadLetters(queue)} dead letters of ${queue} back to ready`)
  }
}

function create(body: unknown): Action {
  const b = fields(body, ['name', 'config'])
  const queue = name(b.name)
  const config: Partial<QueueConfig> = {}
  if (b.config !== undefined) {
    const c = object(b.config, 'config')
    for (const [key, value] of Object.entries(c)) {
      if ((NUMBER_KEYS as readonly string[]).includes(key))
        Object.assign(config, { [key]: count(value, key) })
      else if ((STRING_KEYS as readonly string[]).includes(key))
        Object.assign(config, { [key]: text(value, key) })
      else if (FLAG_KEYS.includes(key)) Object.assign(config, { [key]: flag(value, key) })
      else throw badRequest(`config.${key} is not a queue setting`)
    }
  }
  return async (client) => {
    const route = await client.admin.createQueue(queue, config)
    return done(`created queue ${route.queue} with ${route.partitions.length} partitions`)
  }
}

function scale(body: unknown): Action {
  const groups = count(fields(body, ['groups']).groups, 'groups')
  if (groups < 1) throw badRequest('groups must be at least 1')
  return async (client) => {
    const plan = await client.admin.scaleDataGroups(groups)
    return done(
      `scaling to ${groups} data groups: ${plan ? `${plan.movesTotal} partition moves planned` : 'nothing to do'}`,
    )
  }
}

function metaVoters(body: unknown): Action {
  const voters = count(fields(body, ['voters']).voters, 'voters')
  return async (client) => done(metaVotersResult(await client.admin.setMetaVoters(voters), voters))
}

function replication(body: unknown): Action {
  const factor = count(fields(body, ['factor']).factor, 'factor')
  return async (client) => done(replicationResult(await client.admin.setReplicationFactor(factor)))
}

function nodeAction(node: string, action: 'drain' | 'undrain' | 'remove'): Action {
  return async (client) => {
    if (action === 'remove') {
      await client.admin.removeNode(node)
      return done(`removed node ${node}`)
    }
    if (action === 'undrain') {
      return done(undrainResult(node, await client.admin.undrainNode(node)))
    }
    return done(drainResult(node, await client.admin.drainNode(node)))
  }
}

function transfer(group: number, body: unknown): Action {
  const to = text(fields(body, ['toNodeId']).toNodeId, 'toNodeId')
  if (to === '') throw badRequest('toNodeId is required: the node that should lead the group')
  return async (client) => {
    await client.admin.transferLeader(group, to)
    return done(`asked group ${group} to hand its leadership to ${to}`)
  }
}

function isAdmin(p: Principal): boolean {
  return p.kind === 'token' && p.roles.some((r) => r.role === 'admin')
}

function configOf(route: QueueRoute): QueueConfigInfo {
  const c = route.config
  return {
    partitions: c?.partitions ?? route.partitions.length,
    visibilityTimeoutMs: c?.visibilityTimeoutMs ?? 0,
    maxDeliveries: c?.maxDeliveries ?? 0,
    deadLetterQueue: c?.deadLetterQueue ?? '',
    messageBytesMax: c?.messageBytesMax ?? 0,
    queueLengthMax: c?.queueLengthMax ?? 0,
    strictPriority: c?.strictPriority ?? false,
    dedupWindowMs: c?.dedupWindowMs ?? 0,
    engine: c?.engine ?? '',
    messageTtlMs: c?.messageTtlMs ?? 0,
    paused: c?.paused ?? false,
    orderedKeys: c?.orderedKeys ?? false,
    deliveryRate: c?.deliveryRate ?? 0,
    retryBackoffMinMs: c?.retryBackoffMinMs ?? 0,
    retryBackoffMaxMs: c?.retryBackoffMaxMs ?? 0,
  }
}

function updateOf(body: unknown): UpdateQueueBody {
  const b = object(body, 'the body')
  const update: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(b)) {
    if (!(UPDATE_KEYS as readonly string[]).includes(key)) {
      throw badRequest(`${key} cannot be updated; updatable: ${UPDATE_KEYS.join(', ')}`)
    }
    update[key] =
      key === 'deadLetterQueue'
        ? text(value, key)
        : FLAG_KEYS.includes(key)
          ? flag(value, key)
          : count(value, key)
  }
  if (Object.keys(update).length === 0) throw badRequest(`give at least one of ${UPDATE_KEYS.join(', ')}`)
  return update as UpdateQueueBody
}

function done(message: string): ActionResult {
  return { ok: true, message }
}

function badRequest(message: string): ApiRequestError {
  return new ApiRequestError(400, 'INVALID_ARGUMENT', message)
}

function notFound(path: string): ApiRequestError {
  return new ApiRequestError(404, 'NOT_FOUND', `no API at ${path}; see the console README for the routes`)
}

function decodePart(part: string): string {
  try {
    return decodeURIComponent(part)
  } catch {
    throw badRequest(`bad percent-encoding in the path: ${part}`)
  }
}

function name(value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > NAME_MAX) {
    throw badRequest(`a queue name must be 1 to ${NAME_MAX} characters`)
  }
  return value
}

function nodeId(value: string | undefined): string {
  if (!NODE_ID_PATTERN.test(value ?? '')) throw badRequest(`not a node id: ${value}`)
  return value as string
}

function groupId(value: string | undefined): number {
  const n = Number(value)
  if (!/^\d+$/.test(value ?? '') || !Number.isSafeInteger(n)) throw badRequest(`not a group id: ${value}`)
  return n
}

function object(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw badRequest(`${what} must be a JSON object`)
  return value as Record<string, unknown>
}

/**
 * The body as a JSON object of `keys` only: another field is refused, not dropped (a setting
 * beside a create's `config` made a queue without it, answered 200).
 */
function fields(body: unknown, keys: readonly string[]): Record<string, unknown> {
  const b = object(body, 'the body')
  const other = Object.keys(b).find((k) => !keys.includes(k))
  if (other !== undefined)
    throw badRequest(`${shown(other)} is not a field of this action; it takes ${keys.join(', ')}`)
  return b
}

/** The numbers the wire carries as uint64 (durations in ms, lengths); the others are uint32. */
const UINT64_KEYS: ReadonlySet<string> = new Set([
  'visibilityTimeoutMs',
  'queueLengthMax',
  'dedupWindowMs',
  'messageTtlMs',
  'retryBackoffMinMs',
  'retryBackoffMaxMs',
])
const UINT32_MAX = 2 ** 32 - 1

/** A whole number ≥ 0 that fits the field's wire type (a larger one would fail to encode: a 500). */
function count(value: unknown, key: string): number {
  const max = UINT64_KEYS.has(key) ? Number.MAX_SAFE_INTEGER : UINT32_MAX
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > max) {
    throw badRequest(`${key} must be a whole number from 0 to ${max}, got ${shown(value)}`)
  }
  return value
}

/**
 * A value of a request body in a message: an array or object by its kind only (a deeply nested
 * one overflowed JSON.stringify's stack, and a 400 became a 502; an audit), a string cut short.
 */
function shown(value: unknown): string {
  if (Array.isArray(value)) return 'an array'
  if (typeof value === 'object' && value !== null) return 'an object'
  const text = typeof value === 'string' ? JSON.stringify(value.slice(0, 64)) : String(value)
  return typeof value === 'string' && value.length > 64 ? `${text}…` : text
}

function text(value: unknown, key: string): string {
  if (typeof value !== 'string' || value.length > NAME_MAX)
    throw badRequest(`${key} must be a string of at most ${NAME_MAX} characters`)
  return value
}

function flag(value: unknown, key: string): boolean {
  if (typeof value !== 'boolean') throw badRequest(`${key} must be true or false`)
  return value
}

/**
 * Reads a JSON body of at most BODY_BYTES_MAX bytes; an empty body is `{}`. Every action must
 * say `content-type: application/json`, an empty one too: a page of another site can make a
 * browser POST a form or a bodiless no-cors fetch, never that type without a preflight, which
 * this API does not answer (until 2026-12-06 an empty body of any type was taken: a proxy
 * adding a token to every request would have let another site purge or delete; an audit).
 */
async function readJson(req: IncomingMessage): Promise<unknown> {
  // The media type alone (parameters after ';'), in any case, as HTTP compares it: a client
  // sending `Application/JSON` was refused; `application/jsonx` was taken.
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase()
  if (type !== 'application/json') {
    req.resume()
    throw new ApiRequestError(
      415,
      'UNSUPPORTED_MEDIA_TYPE',
      'send the body as application/json, {} when empty',
    )
  }
  const chunks: Buffer[] = []
  let bytes = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    bytes += chunk.length
    if (bytes > BODY_BYTES_MAX) {
      // The rest is read and dropped (the server's request timeout bounds it), so the client gets the answer.
      req.resume()
      throw new ApiRequestError(413, 'BODY_TOO_LARGE', `the body is over ${BODY_BYTES_MAX} bytes`)
    }
    chunks.push(chunk)
  }
  if (bytes === 0) return {}
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch (error) {
    throw badRequest(`the body is not JSON: ${(error as Error).message}`)
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  })
  res.end(text)
}

/** A message as a peek shows it: no headers, its body as `bodyText` makes it. */
function peeked(m: ListedMessage): PeekedMessage {
  return {
    partition: m.partition,
    id: m.id,
    weight: m.weight,
    deliveryCount: m.deliveryCount,
    key: shownText(m.key),
    body: bodyText(m.body),
    enqueuedAtMs: m.enqueuedAtMs,
  }
}

/**
 * A body as the console shows it, from its first PEEK_BODY_BYTES_MAX bytes only: UTF-8 text
 * when those are (a character they cut in two left out; controls escaped: shownText), else
 * `base64:…`; cut at PEEK_BODY_CHARS at most (`…`), never within a surrogate pair or an escape
 * (shownCut). The string made holds no reference to `body`.
 */
export function bodyText(body: Uint8Array): string {
  const cut = body.length > PEEK_BODY_BYTES_MAX
  const head = cut ? body.subarray(0, PEEK_BODY_BYTES_MAX) : body
  let shown: string
  try {
    // Streaming keeps an incomplete last character back instead of failing on it. Controls
    // escaped (shownText): a right-to-left override in a body reordered the rest of the row.
    shown = shownText(new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: cut }))
  } catch {
    shown = `base64:${Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString('base64')}`
  }
  return cut || shown.length > PEEK_BODY_CHARS
    ? `${shown.slice(0, shownCut(shown, PEEK_BODY_CHARS - 1))}…`
    : shown
}

/**
 * Runs `run(i)` for every index of `costs`, in order, starting the next once the costs of those
 * running (each counted as at most `budget`, at least 1) leave room for its own; resolves with
 * the results in order, or rejects as the first of them that rejects (once all have run).
 */
async function withinBudget<T>(
  costs: readonly number[],
  budget: number,
  run: (i: number) => Promise<T>,
): Promise<T[]> {
  const results: Promise<T>[] = []
  const running = new Set<Promise<void>>()
  let used = 0
  for (let i = 0; i < costs.length; i++) {
    const cost = Math.min(budget, Math.max(1, costs[i] as number))
    while (used + cost > budget) await Promise.race(running)
    used += cost
    const result = run(i)
    results.push(result)
    const release = () => {
      used -= cost
      running.delete(settled)
    }
    const settled: Promise<void> = result.then(release, release)
    running.add(settled)
  }
  return Promise.all(results)
}
