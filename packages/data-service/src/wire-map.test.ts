import {
  FORMAT_LEVEL_LEASE_ATTEMPTS,
  FORMAT_LEVEL_LEASE_BYTES,
  FORMAT_LEVEL_MESSAGE_TTL,
  FORMAT_LEVEL_REPEAT_ONLY,
  FORMAT_LEVEL_RETRY_BACKOFF,
  IDEMPOTENT_BATCHES_IN_FLIGHT_MAX,
  LeaseOutcome,
  type QueueConfig,
} from '@mq/protocol'
import {
  OutOfOrderSequenceError,
  PRODUCER_BATCHES_KEPT,
  InvalidArgumentError as QueueInvalid,
  LimitExceededError as QueueLimit,
  SequenceGapError,
} from '@mq/weighted-queue'
import { describe, expect, it } from 'vitest'
import {
  canOnlyRepeat,
  enqueueOf,
  errorOf,
  LEASE_BYTES_MAX,
  leasedMessageOf,
  leaseOf,
  outcomeOf,
  partitionConfigOf,
} from './wire-map'

describe('wire mapping', () => {
  it('derives the partition config, sharing the length limit; the TTL only from format level 8', () => {
    const config: QueueConfig = {
      partitions: 4,
      visibilityTimeoutMs: 30_000,
      maxDeliveries: 3,
      deadLetterQueue: '',
      messageBytesMax: 1000,
      queueLengthMax: 10,
      strictPriority: true,
      dedupWindowMs: 60_000,
      engine: 'leveldb',
      messageTtlMs: 0,
      paused: false,
      orderedKeys: false,
      deliveryRate: 0,
      retryBackoffMinMs: 0,
      retryBackoffMaxMs: 0,
    }
    const base = {
      scheduling: 'strict',
      maxDeliveries: 3,
      dedupWindowMs: 60_000,
      messageBytesMax: 1000,
      queueMessagesMax: 3,
    }
    expect(partitionConfigOf(config, FORMAT_LEVEL_MESSAGE_TTL - 1)).toEqual(base)
    // From the level on it always goes in, 0 too (a TTL removed reaches the partitions).
    expect(partitionConfigOf(config, FORMAT_LEVEL_MESSAGE_TTL, 9)).toEqual({
      ...base,
      messageTtlMs: 0,
      configVersion: 9,
    })
    expect(partitionConfigOf({ ...config, messageTtlMs: 5_000 }, FORMAT_LEVEL_MESSAGE_TTL - 1)).toEqual(base)
    // A route from a meta leader of an older version leaves a 0 dedup window out: off, not
    // the partition's own default.
    const { dedupWindowMs: _, ...unset } = config
    expect(partitionConfigOf(unset, FORMAT_LEVEL_MESSAGE_TTL - 1)).toEqual({ ...base, dedupWindowMs: 0 })
    // Ordered keys go in only when the queue has them.
    expect(partitionConfigOf({ ...config, orderedKeys: true }, FORMAT_LEVEL_MESSAGE_TTL - 1)).toEqual({
      ...base,
      orderedKeys: 1,
    })
    // The retry backoff from its level on, 0 too (turned off reaches the partitions).
    const backoff = { ...config, retryBackoffMinMs: 1_000, retryBackoffMaxMs: 60_000 }
    expect(partitionConfigOf(backoff, FORMAT_LEVEL_RETRY_BACKOFF - 1)).toEqual({ ...base, messageTtlMs: 0 })
    expect(partitionConfigOf(backoff, FORMAT_LEVEL_RETRY_BACKOFF)).toEqual({
      ...base,
      messageTtlMs: 0,
      retryBackoffMinMs: 1_000,
      retryBackoffMaxMs: 60_000,
    })
    expect(partitionConfigOf(config, FORMAT_LEVEL_RETRY_BACKOFF)).toMatchObject({ retryBackoffMinMs: 0 })
  })

  it('turns a produce into an enqueue with absolute not-before times', () => {
    const command = enqueueOf(
      {
        producerId: 'p1',
        sequence: 4,
        messages: [
          { body: Uint8Array.of(1), weight: 0, headers: {}, key: '', delayMs: 0, dedupKey: '' },
          { body: Uint8Array.of(2), weight: 7, headers: { a: 'b' }, key: 'k', delayMs: 500, dedupKey: 'd' },
        ],
      },
      1_000,
    )
    expect(command).toEqual({
      type: 'enqueue',
      producerId: 'p1',
      producerSeq: 4,
      messages: [
        { body: Uint8Array.of(1) },
        {
          body: Uint8Array.of(2),
          weight: 7,
          headers: { a: 'b' },
          key: 'k',
          notBeforeMs: 1_500,
          dedupKey: 'd',
        },
      ],
    })
    expect(enqueueOf({ producerId: '', sequence: 0, messages: [] }, 0)).toEqual({
      type: 'enqueue',
      messages: [],
    })
    // A pipelining producer's base sequence travels with it (0 is a base, not "unset").
    expect(enqueueOf({ producerId: 'p', sequence: 3, sequenceBase: 0, messages: [] }, 0)).toEqual({
      type: 'enqueue',
      producerId: 'p',
      producerSeq: 3,
      producerBase: 0,
      messages: [],
    })
    expect(enqueueOf({ producerId: '', sequence: 0, sequenceBase: 2, messages: [] }, 0)).toEqual({
      type: 'enqueue',
      messages: [],
    })
  })

  it('lets an idempotent producer fly no more batches than a partition remembers', () => {
    expect(IDEMPOTENT_BATCHES_IN_FLIGHT_MAX).toBeLessThanOrEqual(PRODUCER_BATCHES_KEPT)
  })

  it('fills the default visibility', () => {
    const req = {
      consumerId: 'c',
      max: 5,
      visibilityMs: 0,
      waitMs: 0,
      attempt: '',
      attemptRepeat: false,
      ackLeaseIds: [],
    }
    expect(leaseOf(req, 30_000, 2).visibilityMs).toBe(30_000)
    expect(leaseOf({ ...req, visibilityMs: 10 }, 30_000, 2).visibilityMs).toBe(10)
    // The byte budget from its level on only: a replica of an earlier version cannot read it.
    expect(leaseOf(req, 30_000, FORMAT_LEVEL_LEASE_BYTES - 1)).not.toHaveProperty('bytesMax')
    expect(leaseOf(req, 30_000, FORMAT_LEVEL_LEASE_BYTES).bytesMax).toBe(LEASE_BYTES_MAX)
    // The attempt likewise, and only when the request has one (empty: none).
    const attempt = { ...req, attempt: 'a1' }
    expect(leaseOf(attempt, 30_000, FORMAT_LEVEL_LEASE_ATTEMPTS - 1)).not.toHaveProperty('attempt')
    expect(leaseOf(attempt, 30_000, FORMAT_LEVEL_LEASE_ATTEMPTS).attempt).toBe('a1')
    expect(leaseOf(attempt, 30_000, FORMAT_LEVEL_LEASE_ATTEMPTS)).not.toHaveProperty('repeat')
    expect(leaseOf({ ...attempt, attemptRepeat: true }, 30_000, FORMAT_LEVEL_LEASE_ATTEMPTS).repeat).toBe(
      true,
    )
    expect(leaseOf({ ...req, attempt: '' }, 30_000, FORMAT_LEVEL_LEASE_ATTEMPTS)).not.toHaveProperty(
      'attempt',
    )
    // Repeat-only from its level, for a repeat of an attempt only.
    const repeat = { ...attempt, attemptRepeat: true }
    expect(leaseOf(repeat, 30_000, FORMAT_LEVEL_REPEAT_ONLY, true).repeatOnly).toBe(true)
    expect(leaseOf(repeat, 30_000, FORMAT_LEVEL_REPEAT_ONLY)).not.toHaveProperty('repeatOnly')
    expect(leaseOf(repeat, 30_000, FORMAT_LEVEL_REPEAT_ONLY - 1, true)).not.toHaveProperty('repeatOnly')
    expect(leaseOf(attempt, 30_000, FORMAT_LEVEL_REPEAT_ONLY, true)).not.toHaveProperty('repeatOnly')
    expect(canOnlyRepeat(repeat, FORMAT_LEVEL_REPEAT_ONLY)).toBe(true)
    for (const [r, level] of [
      [repeat, FORMAT_LEVEL_REPEAT_ONLY - 1],
      [attempt, FORMAT_LEVEL_REPEAT_ONLY],
      [{ ...repeat, attempt: '' }, FORMAT_LEVEL_REPEAT_ONLY],
    ] as const)
      expect(canOnlyRepeat(r, level)).toBe(false)
  })

  it('maps leases, statuses and rejections', () => {
    const m = leasedMessageOf({
      leaseId: 'L',
      messageId: 9,
      weight: 3,
      body: Uint8Array.of(5),
      headers: {},
      key: undefined,
      deliveryCount: 2,
      deadlineMs: 99,
      enqueuedAtMs: 1,
    })
    expect(m).toMatchObject({ id: 9, leaseId: 'L', key: '', deliveryCount: 2 })
    expect(outcomeOf('ok')).toBe(LeaseOutcome.LEASE_OUTCOME_OK)
    expect(outcomeOf('expired')).toBe(LeaseOutcome.LEASE_OUTCOME_EXPIRED)
    expect(outcomeOf('unknown')).toBe(LeaseOutcome.LEASE_OUTCOME_UNKNOWN)
    expect(errorOf(new QueueLimit('full')).code).toBe('LIMIT_EXCEEDED')
    expect(errorOf(new QueueInvalid('bad')).code).toBe('INVALID_ARGUMENT')
    expect(errorOf(new QueueInvalid('bad')).facts).toEqual({})
    expect(errorOf(new QueueInvalid('message 2 is too big', 2)).facts).toEqual({ messageIndex: 2 })
    expect(errorOf(new OutOfOrderSequenceError('old')).code).toBe('INVALID_ARGUMENT')
    const gap = errorOf(new SequenceGapError('gap'))
    expect([gap.code, gap.retriable]).toEqual(['SEQUENCE_GAP', true])
  })
})
