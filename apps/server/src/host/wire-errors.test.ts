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

  it("a partition's INVALID_ARGUMENT is INVALID_ARGUMENT, not retried; raft-core's stays retriable", () => {
    // Before: weighted-queue's became an INTERNAL error.
    const found = new QueueInvalidArgument('not a non-negative safe integer: 9008995435981566')
    const e = toWireError(found, 2, addressOf)
    expect(e).toBeInstanceOf(InvalidArgumentError)
    expect(e.retriable).toBe(false)
    expect(e.message).toBe(`group 2: ${found.message}`)
    // raft-core's says so of a group removed from this node under a request too: retried.
    const gone = toWireError(new RaftInvalidArgument('group 2 is not hosted here'), 2, addressOf)
    expect(gone).toBeInstanceOf(UnavailableError)
    expect(gone.retriable).toBe(true)
  })
})
