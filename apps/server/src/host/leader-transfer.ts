import { type RaftHost, Role } from '@mq/raft-core'
import { caughtUp } from './caught-up'

/** What of the Raft host a balancing transfer uses. */
export type LeaderTransferRaft = Pick<RaftHost, 'status' | 'matchIndex' | 'transferLeader'>

/**
 * Starts a leadership transfer of data group `groupId` to `toNodeId` (leader balancing) when
 * this node leads the group and the target's log is caught up (within CAUGHT_UP_ENTRIES of
 * the commit index, as this leader knows it). A transfer holds the group's proposals until
 * the target takes over, so one to a lagging replica — a node just restarted, still catching
 * up or not yet reachable — would stall the group's writes until it caught up or the transfer
 * timed out; the meta leader asks again with the next heartbeat. Returns whether a transfer
 * started (false also when one is under way already).
 */
export function transferWhenCaughtUp(raft: LeaderTransferRaft, groupId: number, toNodeId: string): boolean {
  const status = raft.status(groupId)
  if (status.role !== Role.Leader) return false
  if (!caughtUp(raft.matchIndex(groupId, toNodeId), status.commit)) return false
  try {
    raft.transferLeader(groupId, toNodeId)
    return true
  } catch {
    // A transfer is under way already, or leadership moved: the next heartbeat asks again.
    return false
  }
}
