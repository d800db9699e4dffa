import { CorruptRecordError, WriteFailedError } from '@mq/kv-storage'
import {
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  UnavailableError,
  NotLeaderError as WireNotLeader,
} from '@mq/protocol'
import {
  HostStoppedError,
  NotLeaderError,
  OverloadedError,
  InvalidArgumentError as RaftInvalidArgument,
} from '@mq/raft-core'
import { InvalidArgumentError as QueueInvalidArgument } from '@mq/weighted-queue'
import { describe, expect, it } from 'vitest'
import { toWireError } from './wire-errors'

const addressOf = (id: string) => (id === 'n2' ? '127.0.0.1:7002' : undefined)

describe('toWireError', () => {
  it('names the leader and its address on NOT_LEADER', () => {
    const e = toWireError(new NotLeaderError('n2'), 3, addressOf)
    expect(e).toBeInstanceOf(WireNotLeader)
    expect(e.facts).toMatchObject({ leaderId: 'n2', leaderAddress: '127.0.0.1:7002', groupId: 3 })
  })

  it('a failed durable write (a full disk) is UNAVAILABLE: the node stops, another replica takes over', () => {
    const e = toWireError(new WriteFailedError('batch failed: ENOSPC: no space left on device'), 3, addressOf)
    expect(e).toBeInstanceOf(UnavailableError)
    expect(e.retriable).toBe(true)
    expect(e.message).toMatch(/ENOSPC.*another replica takes over/)
  })

  it('back-pressure is LIMIT_EXCEEDED; a stopped host and damaged data are UNAVAILABLE; the rest INTERNAL', () => {
    expect(toWireError(new OverloadedError('full'), 1, addressOf)).toBeInstanceOf(LimitExceededError)
    expect(toWireError(new HostStoppedError('stopping'), 1, addressOf)).toBeInstanceOf(UnavailableError)
    expect(toWireError(new CorruptRecordError('bad record', {}), 1, addressOf)).toBeInstanceOf(
      UnavailableError,
    )
    expect(toWireError(new Error('a bug'), 1, addressOf)).toBeInstanceOf(InternalError)
  })

  it('a request that can never succeed is INVALID_ARGUMENT, not retried, whoever found it', () => {
    // Before: raft-core's became a retriable UNAVAILABLE (the SDK retried "nope is not a
    // voter" until its deadline), weighted-queue's an INTERNAL error.
    for (const found of [
      new RaftInvalidArgument('nope is not a voter'),
      new QueueInvalidArgument('not a non-negative safe integer: 9008995435981566'),
    ]) {
      const e = toWireError(found, 2, addressOf)
      expect(e).toBeInstanceOf(InvalidArgumentError)
      expect(e.retriable).toBe(false)
      expect(e.message).toBe(`group 2: ${found.message}`)
    }
  })
})
