import {
  FORMAT_LEVEL_LEASE_ATTEMPTS,
  FORMAT_LEVEL_LEASE_BYTES,
  FORMAT_LEVEL_MESSAGE_TTL,
  FORMAT_LEVEL_REPEAT_ONLY,
  FORMAT_LEVEL_RETRY_BACKOFF,
  InvalidArgumentError,
  type LeasedMessage,
  LeaseOutcome,
  type LeaseRequest,
  LimitExceededError,
  type MqError,
  type ProduceRequest,
  type QueueConfig,
  SequenceGapError,
} from '@mq/protocol'
import {
  type EnqueueCommand,
  type Lease,
  type LeaseCommand,
  LeaseStatus,
  type QueueConfig as PartitionConfig,
  type QueueError,
  QueueErrorCode,
  SchedulingMode,
  type StoredMessage,
} from '@mq/weighted-queue'

/**
 * The partition config a queue's config implies. The queue's length limit is shared evenly
 * by its partitions (each holds at most ⌈queueLengthMax / partitions⌉ messages). `version`
 * (the route epoch the config comes from) becomes its configVersion. The message TTL goes in
 * only when `formatLevel` (the cluster's) is FORMAT_LEVEL_MESSAGE_TTL or more: a replica of an
 * earlier version cannot read a partition config that has it. Ordered keys go in when the
 * queue has them (set at creation, which the meta leader allows only at a level that reads
 * them; a partition refuses a `configure` that would change them).
 */
export function partitionConfigOf(
  config: QueueConfig,
  formatLevel: number,
  version?: number,
): Partial<PartitionConfig> {
  return configAtLevel(
    {
      ...(version === undefined ? {} : { configVersion: version }),
      scheduling: config.strictPriority ? SchedulingMode.Strict : SchedulingMode.Fair,
      maxDeliveries: config.maxDeliveries,
      // Unset only in an answer of a meta leader from before the field was optional, which
      // leaves a 0 out: 0 (off), not the partition's own default.
      dedupWindowMs: config.dedupWindowMs ?? 0,
      messageBytesMax: config.messageBytesMax,
      queueMessagesMax: Math.ceil(config.queueLengthMax / Math.max(1, config.partitions)),
      messageTtlMs: config.messageTtlMs,
      orderedKeys: config.orderedKeys ? 1 : 0,
      retryBackoffMinMs: config.retryBackoffMinMs,
      retryBackoffMaxMs: config.retryBackoffMaxMs,
    },
    formatLevel,
  )
}

/**
 * `config` without the fields a replica below `formatLevel` (the cluster's) cannot read: the
 * message TTL below FORMAT_LEVEL_MESSAGE_TTL, the retry backoff below
 * FORMAT_LEVEL_RETRY_BACKOFF (from their levels on always, 0 too: turned off reaches the
 * partitions), ordered keys unless set (a queue has them only when created at a level that
 * reads them). For every partition config that goes into a Raft entry: a route's
 * (partitionConfigOf), and a partition's own resolved config shipped by a move — an older
 * replica refuses a config naming a field it does not know, while newer ones accept it.
 */
export function configAtLevel(
  config: Partial<PartitionConfig>,
  formatLevel: number,
): Partial<PartitionConfig> {
  const { messageTtlMs, orderedKeys, retryBackoffMinMs, retryBackoffMaxMs, ...known } = config
  return {
    ...known,
    ...(formatLevel >= FORMAT_LEVEL_MESSAGE_TTL && messageTtlMs !== undefined ? { messageTtlMs } : {}),
    ...(orderedKeys ? { orderedKeys } : {}),
    ...(formatLevel >= FORMAT_LEVEL_RETRY_BACKOFF && retryBackoffMinMs !== undefined
      ? { retryBackoffMinMs, retryBackoffMaxMs }
      : {}),
  }
}

/**
 * The enqueue command of a Produce. `nowMs` is the earliest time the entry can apply at (the
 * leader's clock, or the group's applied time when that is ahead: queue-handlers'
 * `leaderNowMs`): a delay becomes an absolute not-before time, fixed in the command so that
 * every replica agrees.
 */
export function enqueueOf(request: ProduceRequest, nowMs: number): EnqueueCommand {
  return {
    type: 'enqueue',
    messages: request.messages.map((m) => ({
      body: m.body,
      ...(m.weight ? { weight: m.weight } : {}),
      ...(Object.keys(m.headers).length > 0 ? { headers: m.headers } : {}),
      ...(m.key ? { key: m.key } : {}),
      ...(m.delayMs > 0 ? { notBeforeMs: nowMs + m.delayMs } : {}),
      ...(m.dedupKey ? { dedupKey: m.dedupKey } : {}),
    })),
    ...(request.producerId
      ? {
          producerId: request.producerId,
          producerSeq: request.sequence,
          ...(request.sequenceBase !== undefined ? { producerBase: request.sequenceBase } : {}),
        }
      : {}),
  }
}

/**
 * The most message bytes (body + headers + key) one lease answers with, from format level 16
 * (a replica of an earlier version cannot read the lease's byte budget): well under the 64 MiB
 * a gRPC message may carry between the servers and the SDK, whatever the queue's message size
 * limit (up to 4 MiB) times the messages a lease asks for (up to 1,000).
 */
export const LEASE_BYTES_MAX = 16 * 1024 * 1024

/**
 * The lease command of a Lease request: 0 visibility takes the queue's default; with the byte
 * budget from format level 16. `repeatOnly`: a repeat of the request's attempt that leases
 * nothing new (from format level 27; undefined below it, or without an attempt marked repeat).
 */
export function leaseOf(
  request: LeaseRequest,
  defaultVisibilityMs: number,
  formatLevel: number,
  repeatOnly = false,
): LeaseCommand {
  return {
    type: 'lease',
    consumerId: request.consumerId,
    max: request.max,
    visibilityMs: request.visibilityMs || defaultVisibilityMs,
    ...(formatLevel >= FORMAT_LEVEL_LEASE_BYTES ? { bytesMax: LEASE_BYTES_MAX } : {}),
    // Below its level the attempt is dropped: the lease is one as before (a repeat leases anew).
    ...(request.attempt && formatLevel >= FORMAT_LEVEL_LEASE_ATTEMPTS
      ? {
          attempt: request.attempt,
          ...(request.attemptRepeat ? { repeat: true } : {}),
          ...(repeatOnly && canOnlyRepeat(request, formatLevel) ? { repeatOnly: true } : {}),
        }
      : {}),
  }
}

/** Whether a lease of `request` may only repeat its attempt (leaseOf's `repeatOnly`). */
export function canOnlyRepeat(request: LeaseRequest, formatLevel: number): boolean {
  return request.attempt !== '' && request.attemptRepeat && formatLevel >= FORMAT_LEVEL_REPEAT_ONLY
}

/** A leased message on the wire; `leaseId` its wire form (lease-tag.ts; default: the partition's own). */
export function leasedMessageOf(lease: Lease, leaseId = lease.leaseId): LeasedMessage {
  return {
    id: lease.messageId,
    leaseId,
    body: lease.body,
    weight: lease.weight,
    headers: { ...lease.headers },
    key: lease.key ?? '',
    deliveryCount: lease.deliveryCount,
    deadlineMs: lease.deadlineMs,
    enqueuedAtMs: lease.enqueuedAtMs,
  }
}

/** A message listed without a lease (ListDead, ListReady): no lease id, no deadline. */
export function listedOf(m: StoredMessage): LeasedMessage {
  return {
    id: m.messageId,
    leaseId: '',
    body: m.body,
    weight: m.weight,
    headers: { ...m.headers },
    key: m.key ?? '',
    deliveryCount: m.deliveryCount,
    deadlineMs: 0,
    enqueuedAtMs: m.enqueuedAtMs,
  }
}

export function outcomeOf(status: LeaseStatus): LeaseOutcome {
  switch (status) {
    case LeaseStatus.Ok:
      return LeaseOutcome.LEASE_OUTCOME_OK
    case LeaseStatus.Expired:
      return LeaseOutcome.LEASE_OUTCOME_EXPIRED
    default:
      return LeaseOutcome.LEASE_OUTCOME_UNKNOWN
  }
}

/** The wire error of a command the partition rejected (it changed nothing). */
export function errorOf(rejection: QueueError): MqError {
  switch (rejection.code) {
    case QueueErrorCode.LimitExceeded:
      return new LimitExceededError(rejection.message, {}, { cause: rejection })
    case QueueErrorCode.SequenceGap:
      return new SequenceGapError(rejection.message, {}, { cause: rejection })
    default: {
      // An enqueue refused for one of its messages names it (the producer sends the others again).
      const index = (rejection as { messageIndex?: number }).messageIndex
      return new InvalidArgumentError(rejection.message, index !== undefined ? { messageIndex: index } : {}, {
        cause: rejection,
      })
    }
  }
}
