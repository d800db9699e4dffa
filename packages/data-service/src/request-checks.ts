import {
  type AckRequest,
  DEAD_LETTER_DELIVERIES_HEADER,
  DEAD_LETTER_SOURCE_HEADER,
  type ExtendRequest,
  HEADERS_PER_MESSAGE_MAX,
  InvalidArgumentError,
  LEASE_VISIBILITY_MS_MAX,
  type LeaseRequest,
  MESSAGE_DELAY_MS_MAX,
  type NackRequest,
  type PartitionTarget,
  type ProduceRequest,
  QUEUE_NAME_LENGTH_MAX,
  QUEUE_PARTITIONS_MAX,
  queueNameProblem,
} from '@mq/protocol'
import { NAME_BYTES_MAX, QUEUE_CONFIG_DEFAULT, WEIGHT_MAX, WEIGHT_MIN } from '@mq/weighted-queue'

// The leader's checks of a Queue request, made before anything is proposed and before any
// leader-side structure (ProducerOrder, delivery buckets, the long polls' counts) is keyed by
// the request: a request that the partition would refuse at apply is refused here, without a
// Raft entry replicated and fsynced on every replica for nothing. They mirror the partition's
// apply-time checks (weighted-queue partition.ts), which stay: those are the deterministic
// ones. Each throws InvalidArgumentError naming the field (as the wire names it) and its limit,
// and never echoes a value that may be large.

/**
 * The longest lease id, in characters: weighted-queue's parseLeaseId reads none longer (two
 * safe integers and a dot take at most 33); not exported by weighted-queue.
 */
export const LEASE_ID_LENGTH_MAX = 64

// The partitions' limits: a partition config (partitionConfigOf) sets none of them, so every
// partition has weighted-queue's defaults.
/** Most messages in one Produce (a partition's enqueueBatchMax). */
const ENQUEUE_BATCH_MAX = QUEUE_CONFIG_DEFAULT.enqueueBatchMax
/** Most messages one Lease asks for; most lease ids in one Ack, Nack or Extend (leaseBatchMax). */
const LEASE_BATCH_MAX = QUEUE_CONFIG_DEFAULT.leaseBatchMax
/** Longest delay of a message or a nack (delayMsMax; clients check it too). */
const DELAY_MS_MAX = MESSAGE_DELAY_MS_MAX
/** Longest visibility of a lease or an extend (visibilityMsMax; clients check it too). */
const VISIBILITY_MS_MAX = LEASE_VISIBILITY_MS_MAX

/**
 * Most headers of a produced message besides the two the dead-letter forwarder adds to its copy
 * (DEAD_LETTER_SOURCE_HEADER, DEAD_LETTER_DELIVERIES_HEADER): the copy must still be a Produce
 * the request guard takes (HEADERS_PER_MESSAGE_MAX).
 */
const PRODUCED_HEADERS_MAX = HEADERS_PER_MESSAGE_MAX - 2

/** UTF-8 bytes of `text`, or more than NAME_BYTES_MAX when it has more characters than that. */
function nameBytes(text: string): number {
  // Every UTF-16 unit is at least one byte: a long string is not encoded to be measured.
  return text.length > NAME_BYTES_MAX ? text.length : Buffer.byteLength(text, 'utf8')
}

/**
 * Why `value` (a wire string; '' = unset) is not a name a partition takes (1 to NAME_BYTES_MAX
 * UTF-8 bytes), or undefined. `required`: '' is refused too.
 */
function nameProblem(field: string, value: string | undefined, required: boolean): string | undefined {
  if (!value) return required ? `${field} must be set (1 to ${NAME_BYTES_MAX} UTF-8 bytes)` : undefined
  const bytes = nameBytes(value)
  if (bytes <= NAME_BYTES_MAX) return undefined
  return value.length > NAME_BYTES_MAX
    ? `${field} is ${value.length} characters long; the limit is ${NAME_BYTES_MAX} UTF-8 bytes`
    : `${field} is ${bytes} UTF-8 bytes long; the limit is ${NAME_BYTES_MAX}`
}

/** Why `value` is not an integer from `min` to `max`, or undefined. */
function intProblem(field: string, value: number, min: number, max: number): string | undefined {
  if (Number.isSafeInteger(value) && value >= min && value <= max) return undefined
  return `${field} must be an integer from ${min} to ${max}, got ${value}`
}

function refuse(problem: string | undefined, messageIndex?: number): void {
  if (problem === undefined) return
  throw new InvalidArgumentError(problem, messageIndex === undefined ? {} : { messageIndex })
}

/**
 * Checks a request's target: a valid queue name (queueNameProblem: 1 to QUEUE_NAME_LENGTH_MAX
 * characters, so that it can be echoed in messages and key leader-side maps; a name no queue
 * can have is refused as such, not looked up and answered STALE_ROUTE, which a client retries)
 * and a partition from 0 to QUEUE_PARTITIONS_MAX − 1. Throws InvalidArgumentError otherwise.
 */
export function checkTarget(target: PartitionTarget | undefined): asserts target is PartitionTarget {
  if (!target?.queue) throw new InvalidArgumentError('the request names no queue (target.queue)')
  if (target.queue.length > QUEUE_NAME_LENGTH_MAX) {
    throw new InvalidArgumentError(
      `target.queue is ${target.queue.length} characters long; no queue name is longer than ${QUEUE_NAME_LENGTH_MAX}`,
    )
  }
  const nameProblem = queueNameProblem(target.queue)
  if (nameProblem) throw new InvalidArgumentError(`target.queue: ${nameProblem}`)
  refuse(
    intProblem(
      `target.partition of queue ${target.queue}`,
      target.partition ?? 0,
      0,
      QUEUE_PARTITIONS_MAX - 1,
    ),
  )
}

/**
 * Checks a Produce as the partition will at apply, but for the message size (checkMessageSizes,
 * once the queue's config is known): at most ENQUEUE_BATCH_MAX messages; a producer id of at
 * most NAME_BYTES_MAX bytes with a sequence (and a sequence_base up to it) that are safe
 * integers; each message's weight (0 = the default) from WEIGHT_MIN to WEIGHT_MAX, key and
 * dedup key of at most NAME_BYTES_MAX bytes, delay_ms up to the partitions' delayMsMax, and at
 * most PRODUCED_HEADERS_MAX headers besides the dead-letter ones.
 * Throws InvalidArgumentError; one about a message carries its `messageIndex`.
 */
export function checkProduce(req: ProduceRequest): void {
  const messages = req.messages ?? []
  if (messages.length > ENQUEUE_BATCH_MAX) {
    throw new InvalidArgumentError(
      `produce of ${messages.length} messages exceeds the batch limit of ${ENQUEUE_BATCH_MAX}; split the batch`,
    )
  }
  // Without a producer id the sequence fields are not read (enqueueOf leaves them out).
  if (req.producerId) {
    refuse(nameProblem('producer_id', req.producerId, true))
    const sequence = req.sequence ?? 0
    refuse(intProblem('sequence', sequence, 0, Number.MAX_SAFE_INTEGER))
    if (req.sequenceBase !== undefined)
      refuse(intProblem(`sequence_base (of sequence ${sequence})`, req.sequenceBase, 0, sequence))
  }
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ProduceRequest['messages'][number]
    const weight = m.weight ?? 0
    if (weight !== 0)
      refuse(intProblem(`message ${i}: weight (0 = default)`, weight, WEIGHT_MIN, WEIGHT_MAX), i)
    refuse(nameProblem(`message ${i}: key`, m.key, false), i)
    refuse(nameProblem(`message ${i}: dedup_key`, m.dedupKey, false), i)
    refuse(intProblem(`message ${i}: delay_ms`, m.delayMs ?? 0, 0, DELAY_MS_MAX), i)
    refuse(headersProblem(i, m.headers), i)
  }
}

/** Why message `i`'s `headers` leave no room for the dead-letter forwarder's, or undefined. */
function headersProblem(
  i: number,
  headers: Readonly<Record<string, string>> | undefined,
): string | undefined {
  const names = Object.keys(headers ?? {})
  if (names.length <= PRODUCED_HEADERS_MAX) return undefined
  const own = names.filter(
    (n) => n !== DEAD_LETTER_SOURCE_HEADER && n !== DEAD_LETTER_DELIVERIES_HEADER,
  ).length
  if (own <= PRODUCED_HEADERS_MAX) return undefined
  return `message ${i} has ${own} headers; the limit is ${PRODUCED_HEADERS_MAX} (besides ${DEAD_LETTER_SOURCE_HEADER} and ${DEAD_LETTER_DELIVERIES_HEADER}, which its copy to a dead-letter queue gets)`
}

/**
 * Checks each message of a Produce against the queue's message size limit (its route config's
 * `messageBytesMax`, which the partition has too): body + header names and values + key, in
 * bytes, as the partition counts them. Throws InvalidArgumentError with the message's index.
 */
export function checkMessageSizes(req: ProduceRequest, messageBytesMax: number): void {
  const messages = req.messages ?? []
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as ProduceRequest['messages'][number]
    const limit = `the queue's message size limit is ${messageBytesMax} bytes (its message_bytes_max: \`mq queue update --max-message-bytes\` sets it)`
    // The body alone past it: no string is measured.
    if (m.body.length > messageBytesMax)
      refuse(`message ${i}: its body is ${m.body.length} bytes; ${limit}`, i)
    let size = m.body.length
    for (const [name, value] of Object.entries(m.headers ?? {}))
      size += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(value, 'utf8')
    if (m.key) size += Buffer.byteLength(m.key, 'utf8')
    if (size > messageBytesMax) refuse(`message ${i} is ${size} bytes (body + headers + key); ${limit}`, i)
  }
}

/**
 * Checks a Lease: a consumer_id of 1 to NAME_BYTES_MAX bytes, max from 1 to the partitions'
 * leaseBatchMax, visibility_ms 0 (the queue's) or up to visibilityMsMax. Throws
 * InvalidArgumentError.
 */
export function checkLease(req: LeaseRequest): void {
  refuse(nameProblem('consumer_id', req.consumerId, true))
  refuse(nameProblem('attempt', req.attempt, false))
  refuse(intProblem('max', req.max ?? 0, 1, LEASE_BATCH_MAX))
  const visibilityMs = req.visibilityMs ?? 0
  if (visibilityMs !== 0)
    refuse(intProblem('visibility_ms (0 = the queue default)', visibilityMs, 1, VISIBILITY_MS_MAX))
}

/** Checks the lease ids of an Ack, Nack or Extend: at most LEASE_BATCH_MAX, each at most LEASE_ID_LENGTH_MAX long. */
function checkLeaseIds(action: string, leaseIds: readonly string[] | undefined, field = 'lease_ids'): void {
  const ids = leaseIds ?? []
  if (ids.length > LEASE_BATCH_MAX) {
    throw new InvalidArgumentError(
      `${action} of ${ids.length} ${field} exceeds the limit of ${LEASE_BATCH_MAX}; split it`,
    )
  }
  for (let i = 0; i < ids.length; i++) {
    const length = (ids[i] as string).length
    if (length > LEASE_ID_LENGTH_MAX) {
      throw new InvalidArgumentError(
        `${field}[${i}] is ${length} characters long; a lease id has at most ${LEASE_ID_LENGTH_MAX}`,
      )
    }
  }
}

/** Checks an Ack (checkLeaseIds). Throws InvalidArgumentError. */
export function checkAck(req: AckRequest): void {
  checkLeaseIds('ack', req.leaseIds)
}

/** Checks the acks a Lease carries (its ack_lease_ids, as an Ack's lease ids). Throws InvalidArgumentError. */
export function checkLeaseAcks(req: LeaseRequest): void {
  checkLeaseIds('ack', req.ackLeaseIds, 'ack_lease_ids')
}

/** Checks a Nack: its lease ids, and delay_ms up to the partitions' delayMsMax. */
export function checkNack(req: NackRequest): void {
  checkLeaseIds('nack', req.leaseIds)
  refuse(intProblem('delay_ms', req.delayMs ?? 0, 0, DELAY_MS_MAX))
}

/** Checks an Extend: its lease ids, and extend_ms from 1 to the partitions' visibilityMsMax. */
export function checkExtend(req: ExtendRequest): void {
  checkLeaseIds('extend', req.leaseIds)
  refuse(intProblem('extend_ms', req.extendMs ?? 0, 1, VISIBILITY_MS_MAX))
}
