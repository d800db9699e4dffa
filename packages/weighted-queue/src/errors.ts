/** The stable codes of the errors this package throws. */
export const QueueErrorCode = {
  InvalidArgument: 'INVALID_ARGUMENT',
  LimitExceeded: 'LIMIT_EXCEEDED',
  OutOfOrderSequence: 'OUT_OF_ORDER_SEQUENCE',
  SequenceGap: 'SEQUENCE_GAP',
} as const
export type QueueErrorCode = (typeof QueueErrorCode)[keyof typeof QueueErrorCode]

/** Base of every error this package throws: a stable `code` and whether a retry can help. */
export abstract class QueueError extends Error {
  abstract readonly code: QueueErrorCode
  abstract readonly retriable: boolean
}

/** A request that can never succeed as written: fix the input, do not retry. */
export class InvalidArgumentError extends QueueError {
  override readonly name = 'InvalidArgumentError'
  readonly code = QueueErrorCode.InvalidArgument
  readonly retriable = false
  /** An enqueue refused for one of its messages: that message's place in the batch. */
  readonly messageIndex: number | undefined

  constructor(message: string, messageIndex?: number) {
    super(message)
    this.messageIndex = messageIndex
  }
}

/** The queue is full (its length limit was reached); nothing changed. Retry after consumers catch up. */
export class LimitExceededError extends QueueError {
  override readonly name = 'LimitExceededError'
  readonly code = QueueErrorCode.LimitExceeded
  readonly retriable = true
}

/**
 * A producer sent a batch with a sequence lower than its last one: an old retry whose ids are
 * no longer remembered. Nothing changed. Do not retry it; send new batches with higher sequences.
 */
export class OutOfOrderSequenceError extends QueueError {
  override readonly name = 'OutOfOrderSequenceError'
  readonly code = QueueErrorCode.OutOfOrderSequence
  readonly retriable = false
}

/**
 * A pipelining producer's batch arrived before an earlier batch of its own that is still in
 * flight (its `producerBase` is below this sequence and the one before it has not arrived).
 * Nothing changed. Retry it once the earlier batch has been answered: order holds.
 */
export class SequenceGapError extends QueueError {
  override readonly name = 'SequenceGapError'
  readonly code = QueueErrorCode.SequenceGap
  readonly retriable = true
}

/** Throws an Error (never caught: an invariant of this package is broken) unless `cond`. */
export function invariant(cond: unknown, what: string): asserts cond {
  if (!cond) throw new Error(`weighted-queue invariant violated: ${what}`)
}
