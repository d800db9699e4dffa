import { Server, ServerCredentials, type ServerOptions, type sendUnaryData } from '@grpc/grpc-js'
import {
  type AckRequest,
  type CreateQueueRequest,
  type ExtendRequest,
  type GetRoutesRequest,
  InvalidArgumentError,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseRequest,
  type LeaseResultsResponse,
  LimitExceededError,
  MetaService,
  type MqError,
  type NackRequest,
  NotLeaderError,
  type PartitionTarget,
  type ProduceRequest,
  type ProduceResponse,
  QueueNotFoundError,
  type QueueRoute,
  QueueService,
  SequenceGapError,
  StaleRouteError,
  toGrpcStatus,
  UnavailableError,
  type UpdateQueueRequest,
  unaryHandler,
} from '@mq/protocol'

/**
 * A stand-in for a cluster in SDK tests: two gRPC servers on loopback, a "leader" that holds
 * one queue's partitions in memory and a "follower" that redirects every data call to the
 * leader with NOT_LEADER. Routes can be made to point at the follower, and the route epoch
 * can be bumped, to exercise the client's redirect handling. Not a model of the real broker
 * beyond what the SDK relies on.
 */
export class FakeBroker {
  /** `leaderOptions`: the leader's gRPC server options (a test bounds its calls per connection). */
  constructor(private readonly leaderOptions: ServerOptions = {}) {}

  leaderAddress = ''
  followerAddress = ''
  /** A node removed from the partitions' group: every data call gets STALE_ROUTE naming no group. */
  formerAddress = ''
  epoch = 1
  /**
   * The leader address that GetRoutes reports (set it to the follower to force a redirect, or
   * to the former replica, listed first among the replicas with the leader second).
   */
  routedLeader: 'leader' | 'follower' | 'former' | 'dead' | 'lost' = 'leader'
  /** Nothing listens there (connection refused): a node that is down. */
  readonly deadAddress = '127.0.0.1:1'
  /** A replica that knows no leader (just restarted): NOT_LEADER without a hint. */
  lostAddress = ''
  /** A meta follower: every Meta call is answered NOT_LEADER naming the leader. */
  metaFollowerAddress = ''
  /** With the former replica routed: list it alone, so that no request can be served. */
  formerOnly = false
  /** Fail this many produce calls with UNAVAILABLE after storing their messages (a lost reply). */
  dropProduceReplies = 0
  /** Registered nodes (RemoveNode forgets one). */
  readonly nodes = new Set(['n1', 'n2', 'n3', 'n4'])
  /** Fail this many RemoveNode and DeleteQueue calls with UNAVAILABLE after doing the work (a lost reply). */
  dropRemoveReplies = 0
  /** Leases past their deadline answer EXPIRED to ack, nack and extend (as a partition's do). */
  expireLeases = false
  /** Until this time (ms since the epoch), every extend call fails with UNAVAILABLE, unapplied. */
  failExtendsUntilMs = 0
  /** Until this time, every GetRoutes call fails with UNAVAILABLE (a meta group electing). */
  failRoutesUntilMs = 0
  /** While set, GetRoutes calls go unanswered (a meta leader paused: its connection stays open). */
  silentRoutes = false
  /** Fail this many ack/nack/extend calls with UNAVAILABLE after applying them (a lost reply). */
  dropSettleReplies = 0
  /** Produce calls to these partitions wait until `releaseHeld()` (a stalled partition). */
  readonly heldPartitions = new Set<number>()
  /** Idempotent produce calls with these sequences wait until `releaseHeld()` (a slow batch). */
  readonly heldSequences = new Set<number>()
  /** Whether produce answers say the broker keeps pipelined batches in order (and it does). */
  pipelining = true
  /** A produce call carrying a message with one of these bodies fails whole with INVALID_ARGUMENT. */
  readonly refusedBodies = new Set<string>()
  /** Idempotent produce calls with these sequences fail with INVALID_ARGUMENT (a bad batch). */
  readonly failSequences = new Set<number>()
  /** Sequence → how many more of its replies to lose (stored, then UNAVAILABLE). */
  readonly loseReplies = new Map<number, number>()
  /** The sequence of every idempotent produce call, in arrival order, and whether it was answered. */
  readonly sequenceLog: { seq: number; answered: boolean }[] = []
  #held: (() => void)[] = []
  readonly calls: string[] = []
  /** The queues of every GetRoutes request, in arrival order. */
  readonly routeRequests: string[][] = []
  /** Every CreateQueue request, as decoded here. */
  readonly createRequests: CreateQueueRequest[] = []
  /** Queues paused by UpdateQueue. */
  readonly paused = new Set<string>()
  /** Acts as a meta leader of a version before paused queues: drops `paused` unread. */
  pauseUnknown = false
  /** Acts as a meta leader of a version before ordered keys: creates queues without them. */
  orderingUnknown = false
  /** Answers CreateQueue without the retry backoff, as a meta leader of level 15 or below. */
  backoffUnknown = false
  /** Dead letters listed by ListDead, per partition, at places 1, 2, …; `placesUnknown`: unset (an older server). */
  readonly dead = new Map<number, number>()
  placesUnknown = false
  /** Purge calls that answer 1,000 removed and `more` (a server at its time bound) before the real one. */
  purgeMoreCalls = 0
  /** Produce calls to these queues fail with LIMIT_EXCEEDED (a full queue), unapplied. */
  readonly fullQueues = new Set<string>()
  /** Purge calls to fail with UNAVAILABLE (unapplied) once the `more` ones are used up. */
  purgeFailCalls = 0
  /** Refuse this many nack calls with INVALID_ARGUMENT, applying nothing (as a bad request is). */
  refuseNacks = 0
  /** The release flag of every nack request (true: a give-back). */
  readonly nackReleases: boolean[] = []
  /** The visibilityMs of every lease request (0: the queue's, as the server fills it). */
  readonly leaseVisibilities: number[] = []
  /** A broker of a version before LeaseRequest.ack_lease_ids: it ignores them. */
  leaseAcksUnknown = false
  /** The lease ids acked with leases (ack_lease_ids), in the order they came. */
  readonly carriedAcks: string[] = []
  /** Ack calls answered. */
  ackCalls = 0
  readonly listDeadCalls: { partition: number; limit: number; afterId: number }[] = []
  /** Every Redrive request, in order; answered from `redriveAnswers` ('fail': UNAVAILABLE, unapplied). */
  readonly redriveRequests: { partition: number; max: number; throughPlace: number; placeOnly: boolean }[] =
    []
  readonly redriveAnswers: ({ moved: number; more: boolean; throughPlace: number } | 'fail')[] = []
  /** Delivery rates set by UpdateQueue; `rateUnknown`: drops them unread (an older meta leader). */
  readonly rates = new Map<string, number>()
  rateUnknown = false
  /** Every lease request's max and waitMs, in order. */
  readonly leaseRequests: { max: number; waitMs: number; routeEpoch: number; partition: number }[] = []
  /** A long poll waits at most this long here (a test may raise it). */
  leaseWaitCapMs = 200
  /** Long polls whose client cancelled them while they waited. */
  cancelledLeases = 0
  readonly #servers: Server[] = []
  readonly #queues = new Map<string, { partitions: number; visibilityMs: number; lengthMax: number }>()
  readonly #ready = new Map<string, LeasedMessage[]>()
  readonly #leased = new Map<string, { message: LeasedMessage; key: string; deadline: number }>()
  readonly #seen = new Map<string, number[]>()
  /** The highest sequence enqueued per producer and partition. */
  readonly #lastSequence = new Map<string, number>()
  #nextId = 1
  #nextLease = 1

  /** Forgets a lease (as if it had lapsed on the broker): its ack or extend answers UNKNOWN. */
  forgetLease(leaseId: string): void {
    this.#leased.delete(leaseId)
  }

  /** Lets the held produce calls go on (and stops holding). */
  releaseHeld(): void {
    this.heldPartitions.clear()
    this.heldSequences.clear()
    for (const go of this.#held.splice(0)) go()
  }

  /** `lengthMax`: the queue's queueLengthMax (its partitions share it, as a real queue's do). */
  addQueue(name: string, partitions: number, visibilityMs = 30_000, lengthMax = 1e6): void {
    this.#queues.set(name, { partitions, visibilityMs, lengthMax })
  }

  /** Messages ready in a partition. */
  ready(queue: string, partition: number): LeasedMessage[] {
    return this.#ready.get(`${queue}/${partition}`) ?? []
  }

  get leasedCount(): number {
    return this.#leased.size
  }

  async start(): Promise<void> {
    const leader = new Server(this.leaderOptions)
    leader.addService(MetaService, this.#metaHandlers())
    leader.addService(QueueService, this.#queueHandlers())
    // The follower redirects every data call to the leader; the former replica holds no
    // replica of the group any more; the lost one knows no leader (just restarted).
    const follower = refusing(
      () => new NotLeaderError('not the leader', { leaderId: 'L', leaderAddress: this.leaderAddress }),
    )
    follower.addService(MetaService, this.#metaHandlers())
    const former = refusing(
      () => new StaleRouteError('this node holds no replica of the partition', { epoch: this.epoch }),
    )
    const lost = refusing(
      () => new NotLeaderError('group 1 has no leader yet; retry shortly', { groupId: 1 }),
    )
    this.leaderAddress = await bind(leader)
    this.followerAddress = await bind(follower)
    this.formerAddress = await bind(former)
    this.lostAddress = await bind(lost)
    const metaFollower = new Server()
    const redirect = (_: unknown, cb: sendUnaryData<never>) =>
      cb(
        toGrpcStatus(
          new NotLeaderError('not the meta leader', { leaderId: 'L', leaderAddress: this.leaderAddress }),
        ),
      )
    metaFollower.addService(
      MetaService,
      Object.fromEntries(Object.keys(this.#metaHandlers()).map((name) => [name, redirect])),
    )
    this.metaFollowerAddress = await bind(metaFollower)
    this.#servers.push(leader, follower, former, lost, metaFollower)
  }

  stop(): void {
    for (const s of this.#servers) s.forceShutdown()
  }

  #route(name: string): QueueRoute {
    const q = this.#queues.get(name)
    if (!q) throw new QueueNotFoundError(`queue ${name} does not exist`)
    const address = {
      leader: this.leaderAddress,
      follower: this.followerAddress,
      former: this.formerAddress,
      dead: this.deadAddress,
      lost: this.lostAddress,
    }[this.routedLeader]
    const replica = (nodeId: string, address: string) => ({
      nodeId,
      address,
      learner: false,
      appliedIndex: 0,
    })
    const replicas =
      this.routedLeader === 'leader' || this.routedLeader === 'follower'
        ? []
        : this.formerOnly
          ? [replica('F', this.formerAddress)]
          : [replica('F', address), replica('L', this.leaderAddress)]
    return {
      queue: name,
      queueId: 1,
      routeEpoch: this.epoch,
      partitionsEpoch: 0,
      config: {
        partitions: q.partitions,
        visibilityTimeoutMs: q.visibilityMs,
        maxDeliveries: 5,
        deadLetterQueue: '',
        messageBytesMax: 1 << 20,
        queueLengthMax: q.lengthMax,
        strictPriority: false,
        dedupWindowMs: 0,
        messageTtlMs: 0,
        paused: this.paused.has(name),
        orderedKeys: false,
        deliveryRate: this.rates.get(name) ?? 0,
        retryBackoffMinMs: 0,
        retryBackoffMaxMs: 0,
        engine: 'leveldb',
      },
      partitions: Array.from({ length: q.partitions }, (_, partition) => ({
        partition,
        groupId: 1,
        leaderId: 'L',
        leaderAddress: address,
        replicas,
        engine: 'leveldb',
      })),
    }
  }

  #metaHandlers() {
    return {
      getRoutes: handle((req: GetRoutesRequest) => {
        this.calls.push('getRoutes')
        this.routeRequests.push([...req.queues])
        if (Date.now() < this.failRoutesUntilMs) throw new UnavailableError('the meta group has no leader')
        if (this.silentRoutes) return new Promise<never>(() => {})
        return {
          routeEpoch: this.epoch,
          routes: req.queues.filter((q) => this.#queues.has(q)).map((q) => this.#route(q)),
          metaTerm: 1,
        }
      }),
      createQueue: handle((req: CreateQueueRequest) => {
        this.createRequests.push(req)
        return {
          queue: req.name,
          partitions: [],
          routeEpoch: this.epoch,
          queueId: 0,
          partitionsEpoch: 0,
          ...(req.config
            ? {
                config: {
                  ...req.config,
                  orderedKeys: req.config.orderedKeys && !this.orderingUnknown,
                  // As the meta leader does: a minimum alone gets the 10-minute maximum.
                  ...(req.config.retryBackoffMinMs && !req.config.retryBackoffMaxMs
                    ? { retryBackoffMaxMs: Math.max(600_000, req.config.retryBackoffMinMs) }
                    : {}),
                  ...(this.backoffUnknown ? { retryBackoffMinMs: 0, retryBackoffMaxMs: 0 } : {}),
                },
              }
            : {}),
        }
      }),
      updateQueue: handle((req: UpdateQueueRequest) => {
        const rate = req.update?.deliveryRate
        if (rate !== undefined && !this.rateUnknown) this.rates.set(req.name, rate)
        const paused = req.update?.paused
        if (paused !== undefined && !this.pauseUnknown) {
          if (paused) this.paused.add(req.name)
          else this.paused.delete(req.name)
        }
        return this.#route(req.name)
      }),
      deleteQueue: handle((req: { name: string }) => {
        if (!this.#queues.delete(req.name)) throw new QueueNotFoundError(`queue ${req.name} does not exist`)
        if (this.dropRemoveReplies > 0) {
          this.dropRemoveReplies--
          throw new UnavailableError('the reply was lost')
        }
        return {}
      }),
      listQueues: handle(() => ({
        queues: [...this.#queues.keys()].map((q) => this.#route(q)),
        nextPageToken: '',
      })),
      describeQueue: handle((req: { name: string }) => this.#route(req.name)),
      clusterStatus: handle(() => ({ metaLeaderId: 'L', routeEpoch: this.epoch, nodes: [], groups: [] })),
      scaleDataGroups: handle(() => ({})),
      transferLeader: handle(() => ({})),
      removeNode: handle((req: { nodeId: string }) => {
        if (!this.nodes.delete(req.nodeId))
          throw new InvalidArgumentError(`node ${req.nodeId} is not registered`)
        if (this.dropRemoveReplies > 0) {
          this.dropRemoveReplies--
          throw new UnavailableError('the reply was lost')
        }
        return {}
      }),
    }
  }

  #check(target: PartitionTarget | undefined): string {
    if (!target || !this.#queues.has(target.queue))
      throw new QueueNotFoundError(`queue ${target?.queue} does not exist`)
    if (target.routeEpoch < this.epoch) {
      throw new StaleRouteError(`route epoch ${target.routeEpoch} is older than ${this.epoch}`, {
        epoch: this.epoch,
      })
    }
    return `${target.queue}/${target.partition}`
  }

  #queueHandlers() {
    return {
      produce: handle(async (req: ProduceRequest): Promise<ProduceResponse> => {
        this.calls.push(`produce:${req.messages.length}`)
        if (
          (req.target && this.heldPartitions.has(req.target.partition)) ||
          (req.producerId && this.heldSequences.has(req.sequence))
        ) {
          this.calls.push(`held:${req.sequence}`)
          await new Promise<void>((resolve) => this.#held.push(resolve))
        }
        const key = this.#check(req.target)
        if (req.target && this.fullQueues.has(req.target.queue))
          throw new LimitExceededError(`queue ${req.target.queue} holds 10 messages, its limit`)
        const queue = req.target ? this.#queues.get(req.target.queue) : undefined
        const room = queue ? Math.ceil(queue.lengthMax / queue.partitions) : Number.POSITIVE_INFINITY
        if (req.messages.length > room)
          throw new InvalidArgumentError(`a batch of ${req.messages.length} new messages can never fit`)
        const seenKey = `${req.producerId}/${key}/${req.sequence}`
        const seen = req.producerId ? this.#seen.get(seenKey) : undefined
        const lose = req.producerId ? (this.loseReplies.get(req.sequence) ?? 0) : 0
        if (req.producerId) this.sequenceLog.push({ seq: req.sequence, answered: lose === 0 })
        if (seen) {
          if (lose > 0) {
            this.loseReplies.set(req.sequence, lose - 1)
            throw new UnavailableError('the reply was lost')
          }
          return { ids: seen, duplicate: true, pipelining: this.pipelining }
        }
        // The broker's order rule for pipelining producers (weighted-queue's enqueue); a broker
        // that does not keep pipelined batches in order (`pipelining` false) ignores the base.
        const last = this.#lastSequence.get(`${req.producerId}/${key}`)
        const base = this.pipelining ? req.sequenceBase : undefined
        if (
          req.producerId &&
          base !== undefined &&
          base < req.sequence &&
          (last === undefined || req.sequence > last + 1)
        ) {
          this.calls.push(`gap:${req.sequence}`)
          throw new SequenceGapError(
            `sequence ${req.sequence} before ${last === undefined ? base : last + 1}`,
          )
        }
        if (req.producerId && this.failSequences.has(req.sequence))
          throw new InvalidArgumentError('a bad batch')
        // As a partition does: one bad message refuses its whole batch, storing none of it.
        const bad = req.messages.findIndex((m) => this.refusedBodies.has(new TextDecoder().decode(m.body)))
        if (bad >= 0)
          throw new InvalidArgumentError(`message ${bad} is over the queue's size limit`, {
            messageIndex: bad,
          })
        if (req.producerId)
          this.#lastSequence.set(`${req.producerId}/${key}`, Math.max(last ?? 0, req.sequence))
        const list = this.#ready.get(key) ?? []
        this.#ready.set(key, list)
        const ids = req.messages.map((m) => {
          const id = this.#nextId++
          list.push({
            id,
            leaseId: '',
            body: m.body,
            weight: m.weight,
            headers: m.headers,
            key: m.key,
            deliveryCount: 0,
            deadlineMs: 0,
            enqueuedAtMs: Date.now(),
          })
          return id
        })
        if (req.producerId) this.#seen.set(seenKey, ids)
        if (lose > 0) {
          this.loseReplies.set(req.sequence, lose - 1)
          throw new UnavailableError('the reply was lost')
        }
        if (this.dropProduceReplies > 0) {
          this.dropProduceReplies--
          throw new UnavailableError('the reply was lost')
        }
        return { ids, duplicate: false, pipelining: this.pipelining }
      }),
      lease: unaryHandler(async (req: LeaseRequest, call) => {
        const key = this.#check(req.target)
        // Its acks first, as the broker proposes them before the lease.
        const ackIds = this.leaseAcksUnknown ? [] : (req.ackLeaseIds ?? [])
        this.carriedAcks.push(...ackIds)
        const ackResults =
          ackIds.length > 0 ? this.#settle({ target: req.target, leaseIds: ackIds }, () => {}).results : []
        this.leaseRequests.push({
          max: req.max,
          waitMs: req.waitMs,
          routeEpoch: Number(req.target?.routeEpoch ?? 0),
          partition: req.target?.partition ?? -1,
        })
        const until = Date.now() + Math.min(req.waitMs, this.leaseWaitCapMs)
        while (this.ready(req.target!.queue, req.target!.partition).length === 0 && Date.now() < until) {
          if (call.cancelled.aborted) {
            this.cancelledLeases++
            return { messages: [], ackResults }
          }
          await new Promise((r) => setTimeout(r, 5))
        }
        const list = this.#ready.get(key) ?? []
        this.leaseVisibilities.push(req.visibilityMs)
        const visibility = req.visibilityMs || this.#queues.get(req.target!.queue)!.visibilityMs
        const messages = list.splice(0, req.max).map((m) => {
          const leased = {
            ...m,
            leaseId: `l${this.#nextLease++}`,
            deliveryCount: m.deliveryCount + 1,
            deadlineMs: Date.now() + visibility,
          }
          this.#leased.set(leased.leaseId, { message: leased, key, deadline: leased.deadlineMs })
          return leased
        })
        return { messages, ackResults }
      }),
      listDead: handle((req: { target?: PartitionTarget; limit: number; afterId: number }) => {
        this.#check(req.target)
        const partition = req.target?.partition ?? 0
        this.listDeadCalls.push({ partition, limit: req.limit, afterId: req.afterId })
        const total = this.dead.get(partition) ?? 0
        const from = req.afterId + 1
        const places = Array.from(
          { length: Math.max(0, Math.min(req.limit, 1000, total - from + 1)) },
          (_, i) => from + i,
        )
        return {
          messages: places.map((place) => ({
            id: 10_000 * partition + place,
            leaseId: '',
            body: new TextEncoder().encode(`dead ${place}`),
            weight: 1,
            headers: {},
            key: '',
            deliveryCount: 5,
            deadlineMs: 0,
            enqueuedAtMs: 0,
            ...(this.placesUnknown ? {} : { deadPlace: place }),
          })),
          ackResults: [],
        }
      }),
      redrive: handle(
        (req: { target?: PartitionTarget; max: number; throughPlace: number; placeOnly: boolean }) => {
          this.#check(req.target)
          this.redriveRequests.push({
            partition: req.target?.partition ?? 0,
            max: req.max,
            throughPlace: req.throughPlace,
            placeOnly: req.placeOnly,
          })
          const answer = this.redriveAnswers.shift() ?? { moved: 0, more: false, throughPlace: 0 }
          if (answer === 'fail') throw new UnavailableError('the partition is failing over')
          return answer
        },
      ),
      purge: handle((req: { target?: PartitionTarget }) => {
        const key = this.#check(req.target)
        if (this.purgeMoreCalls > 0) {
          this.purgeMoreCalls--
          return { removed: 1000, more: true }
        }
        if (this.purgeFailCalls > 0) {
          this.purgeFailCalls--
          throw new UnavailableError('the partition is failing over')
        }
        const removed = this.#ready.get(key)?.length ?? 0
        this.#ready.set(key, [])
        return { removed }
      }),
      ack: handle((req: AckRequest) => {
        this.ackCalls++
        return this.#settle(req, () => {})
      }),
      nack: handle((req: NackRequest) => {
        if (this.refuseNacks > 0) {
          this.refuseNacks--
          throw new InvalidArgumentError('delay_ms is out of bounds')
        }
        this.nackReleases.push(req.release)
        return this.#settle(req, (l) => this.#ready.get(l.key)?.unshift({ ...l.message, leaseId: '' }))
      }),
      extend: handle((req: ExtendRequest) => {
        if (Date.now() < this.failExtendsUntilMs) throw new UnavailableError('the partition is failing over')
        return this.#settle(req, (l) => {
          this.calls.push('extend')
          l.deadline = Date.now() + req.extendMs
          this.#leased.set(l.message.leaseId, l)
        })
      }),
    }
  }

  #settle(
    req: { target?: PartitionTarget; leaseIds: string[] },
    effect: (l: { message: LeasedMessage; key: string; deadline: number }) => void,
  ): LeaseResultsResponse {
    this.#check(req.target)
    const results = req.leaseIds.map((leaseId) => {
      const l = this.#leased.get(leaseId)
      if (!l) return { leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_UNKNOWN, deadlineMs: 0 }
      if (this.expireLeases && l.deadline < Date.now()) {
        this.#leased.delete(leaseId)
        this.#ready.get(l.key)?.unshift({ ...l.message, leaseId: '' })
        return { leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_EXPIRED, deadlineMs: l.deadline }
      }
      this.#leased.delete(leaseId)
      effect(l)
      return { leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_OK, deadlineMs: l.deadline }
    })
    if (this.dropSettleReplies > 0) {
      this.dropSettleReplies--
      throw new UnavailableError('the reply was lost')
    }
    return { results }
  }
}

/** A server whose every Queue call fails with `error()`. */
function refusing(error: () => MqError): Server {
  const server = new Server()
  const refuse = (_: unknown, cb: sendUnaryData<never>) => cb(toGrpcStatus(error()))
  server.addService(QueueService, {
    produce: refuse,
    lease: refuse,
    ack: refuse,
    nack: refuse,
    extend: refuse,
  })
  return server
}

/** A synchronous handler body as a grpc-js unary handler (thrown MqErrors become typed statuses). */
function handle<Req, Res>(fn: (req: Req) => Res) {
  return unaryHandler(async (req: Req) => fn(req))
}

function bind(server: Server): Promise<string> {
  return new Promise((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, port) =>
      e ? reject(e) : resolve(`127.0.0.1:${port}`),
    ),
  )
}
