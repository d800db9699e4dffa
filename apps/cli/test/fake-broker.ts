import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js'
import {
  type AckRequest,
  type CreateQueueRequest,
  type ExtendRequest,
  type GetRoutesRequest,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseRequest,
  type LeaseResponse,
  type LeaseResultsResponse,
  MetaService,
  type MqError,
  type NackRequest,
  type PartitionTarget,
  type ProduceRequest,
  type ProduceResponse,
  QueueExistsError,
  QueueNotFoundError,
  type QueueRoute,
  QueueService,
  toGrpcStatus,
} from '@mq/protocol'

interface Partition {
  ready: LeasedMessage[]
  waiters: (() => void)[]
}

/**
 * A stand-in for a one-node cluster over real gRPC on loopback, for running the built `mq`
 * binary through the real SDK: queues with in-memory partitions, produce, lease (a long poll
 * woken by produce), ack and nack. Not a model of the broker beyond what those commands need.
 */
export class FakeBroker {
  address = ''
  readonly acked: number[] = []
  readonly #queues = new Map<string, Partition[]>()
  readonly #leased = new Map<string, { message: LeasedMessage; partition: Partition }>()
  readonly #server = new Server()
  #nextId = 1
  #nextLease = 1

  /** Listens on a loopback port; with `tls` (PEM), only for TLS clients. */
  async start(tls?: { readonly cert: Buffer; readonly key: Buffer }): Promise<void> {
    this.#server.addService(MetaService, this.#meta())
    this.#server.addService(QueueService, this.#queue())
    const credentials = tls
      ? ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }], false)
      : ServerCredentials.createInsecure()
    this.address = await new Promise((resolve, reject) =>
      this.#server.bindAsync('127.0.0.1:0', credentials, (e, port) =>
        e ? reject(e) : resolve(`127.0.0.1:${port}`),
      ),
    )
  }

  stop(): void {
    this.#server.forceShutdown()
  }

  /** The bodies ready in `queue`, as text. */
  ready(queue: string): string[] {
    return (this.#queues.get(queue) ?? []).flatMap((p) =>
      p.ready.map((m) => new TextDecoder().decode(m.body)),
    )
  }

  #route(name: string): QueueRoute {
    const partitions = this.#queues.get(name)
    if (!partitions) throw new QueueNotFoundError(`queue ${name} does not exist`)
    return {
      queue: name,
      queueId: 1,
      routeEpoch: 1,
      partitionsEpoch: 0,
      config: {
        partitions: partitions.length,
        visibilityTimeoutMs: 30_000,
        maxDeliveries: 5,
        deadLetterQueue: '',
        messageBytesMax: 1 << 20,
        queueLengthMax: 1e6,
        strictPriority: false,
        dedupWindowMs: 0,
        messageTtlMs: 0,
        paused: false,
        orderedKeys: false,
        deliveryRate: 0,
        retryBackoffMinMs: 0,
        retryBackoffMaxMs: 0,
        engine: 'memory',
      },
      partitions: partitions.map((_, partition) => ({
        partition,
        groupId: 1,
        leaderId: 'n1',
        leaderAddress: this.address,
        replicas: [{ nodeId: 'n1', address: this.address, learner: false, appliedIndex: 0 }],
        engine: 'memory',
      })),
    }
  }

  #partition(target: PartitionTarget | undefined): Partition {
    const p = this.#queues.get(target?.queue ?? '')?.[target?.partition ?? -1]
    if (!p) throw new QueueNotFoundError(`queue ${target?.queue} does not exist`)
    return p
  }

  #meta() {
    return {
      getRoutes: handle((req: GetRoutesRequest) => ({
        routeEpoch: 1,
        routes: req.queues.filter((q) => this.#queues.has(q)).map((q) => this.#route(q)),
        metaTerm: 1,
      })),
      createQueue: handle((req: CreateQueueRequest) => {
        if (this.#queues.has(req.name)) throw new QueueExistsError(`queue ${req.name} exists`)
        const count = req.config?.partitions || 1
        this.#queues.set(
          req.name,
          Array.from({ length: count }, () => ({ ready: [], waiters: [] })),
        )
        return this.#route(req.name)
      }),
      describeQueue: handle((req: { name: string }) => this.#route(req.name)),
      listQueues: handle(() => ({
        queues: [...this.#queues.keys()].map((q) => this.#route(q)),
        nextPageToken: '',
      })),
      clusterStatus: handle(() => ({
        metaLeaderId: 'n1',
        metaVoters: ['n1'],
        metaLearners: [],
        routeEpoch: 1,
        nodes: [
          { nodeId: 'n1', address: this.address, alive: true, lastHeartbeatMs: Date.now(), groupIds: [0, 1] },
        ],
        groups: [],
      })),
    }
  }

  #queue() {
    return {
      produce: handle((req: ProduceRequest): ProduceResponse => {
        const p = this.#partition(req.target)
        const ids = req.messages.map((m) => {
          const id = this.#nextId++
          p.ready.push({ ...m, id, leaseId: '', deliveryCount: 0, deadlineMs: 0, enqueuedAtMs: Date.now() })
          return id
        })
        for (const wake of p.waiters.splice(0)) wake()
        return { ids, duplicate: false, pipelining: true }
      }),
      lease: (call: ServerUnaryCall<LeaseRequest, LeaseResponse>, cb: sendUnaryData<LeaseResponse>) => {
        let p: Partition
        try {
          p = this.#partition(call.request.target)
        } catch (error) {
          cb(toGrpcStatus(error as MqError))
          return
        }
        const answer = () => {
          clearTimeout(timer)
          p.waiters = p.waiters.filter((w) => w !== answer)
          // A lease cancelled by its client (a consumer stopping) takes nothing, as the real
          // server gives back what a cancelled lease took: a message given back after the
          // cancel must stay ready, not go to a call nobody reads.
          if (call.cancelled) return
          const messages = p.ready.splice(0, call.request.max).map((m) => {
            const leased = { ...m, leaseId: `l${this.#nextLease++}`, deliveryCount: m.deliveryCount + 1 }
            this.#leased.set(leased.leaseId, { message: leased, partition: p })
            return leased
          })
          cb(null, { messages, ackResults: [] })
        }
        const timer = setTimeout(answer, call.request.waitMs)
        call.on('cancelled', answer)
        if (p.ready.length > 0) answer()
        else p.waiters.push(answer)
      },
      ack: handle((req: AckRequest) => this.#settle(req, (l) => this.acked.push(l.message.id))),
      nack: handle((req: NackRequest) => this.#settle(req, (l) => l.partition.ready.unshift(l.message))),
      extend: handle((req: ExtendRequest) =>
        this.#settle(req, (l) => this.#leased.set(l.message.leaseId, l)),
      ),
    }
  }

  #settle(
    req: { leaseIds: string[] },
    effect: (l: { message: LeasedMessage; partition: Partition }) => void,
  ): LeaseResultsResponse {
    return {
      results: req.leaseIds.map((leaseId) => {
        const l = this.#leased.get(leaseId)
        if (!l) return { leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_UNKNOWN, deadlineMs: 0 }
        this.#leased.delete(leaseId)
        effect(l)
        return { leaseId, outcome: LeaseOutcome.LEASE_OUTCOME_OK, deadlineMs: 0 }
      }),
    }
  }
}

function handle<Req, Res>(fn: (req: Req) => Res) {
  return (call: ServerUnaryCall<Req, Res>, cb: sendUnaryData<Res>) => {
    try {
      cb(null, fn(call.request))
    } catch (error) {
      cb(toGrpcStatus(error as MqError))
    }
  }
}
