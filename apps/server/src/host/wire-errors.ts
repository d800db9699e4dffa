import { CorruptRecordError, WriteFailedError } from '@mq/kv-storage'
import {
  InternalError,
  InvalidArgumentError,
  LimitExceededError,
  MqError,
  UnavailableError,
  NotLeaderError as WireNotLeader,
} from '@mq/protocol'
import { NotLeaderError, RaftError } from '@mq/raft-core'
import { QueueError } from '@mq/weighted-queue'

/**
 * Turns what the Raft runtime or storage threw into the typed error a client sees: a
 * not-leader becomes NOT_LEADER with the leader's address (so the client retries in one
 * hop), back-pressure becomes LIMIT_EXCEEDED, a dropped proposal, a stopped host, a failed
 * durable write (a full disk, say) or damaged data found by a read (the node stops; another
 * replica takes over) UNAVAILABLE (retriable), weighted-queue's INVALID_ARGUMENT
 * INVALID_ARGUMENT, anything else INTERNAL. MqErrors pass through.
 */
export function toWireError(
  error: unknown,
  groupId: number,
  addressOf: (nodeId: string) => string | undefined,
): MqError {
  if (error instanceof MqError) return error
  if (error instanceof NotLeaderError) {
    const leaderId = error.leaderHint
    const leaderAddress = leaderId ? (addressOf(leaderId) ?? '') : ''
    const where = leaderId
      ? `; the leader is ${leaderId}${leaderAddress ? ` at ${leaderAddress}` : ''}`
      : '; no leader is known yet'
    return new WireNotLeader(
      `not the leader of group ${groupId}${where}`,
      { leaderId, leaderAddress, groupId },
      { cause: error },
    )
  }
  const code = (error as { code?: unknown })?.code
  const message = error instanceof Error ? error.message : String(error)
  if (code === 'OVERLOADED')
    return new LimitExceededError(`group ${groupId} is overloaded: ${message}`, { groupId }, { cause: error })
  if (error instanceof CorruptRecordError) {
    return new UnavailableError(
      `group ${groupId}: this replica found damaged data and stops serving (${message}); retry: another replica takes over`,
      { groupId },
      { cause: error },
    )
  }
  if (error instanceof WriteFailedError) {
    return new UnavailableError(
      `group ${groupId}: this replica's storage failed a durable write and it stops serving (${message}); retry: another replica takes over`,
      { groupId },
      { cause: error },
    )
  }
  // A request that can never succeed as written, found by a partition (a delay past what a
  // time can hold, say): not retriable. Not raft-core's: its InvalidArgumentError also says
  // "group N is not hosted here" of a group removed from this node under a request, which a
  // retry elsewhere gets past.
  if (error instanceof QueueError && code === 'INVALID_ARGUMENT') {
    return new InvalidArgumentError(`group ${groupId}: ${message}`, { groupId }, { cause: error })
  }
  if (error instanceof RaftError || (error as { retriable?: unknown })?.retriable === true) {
    return new UnavailableError(`group ${groupId}: ${message}`, { groupId }, { cause: error })
  }
  return new InternalError(`group ${groupId}: ${message}`, { groupId }, { cause: error })
}
