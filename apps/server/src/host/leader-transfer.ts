import { type RaftHost, Role } from '@mq/raft-core'
import { caughtUp } from './caught-up'

/** What of the Raft host a balancing transfer uses. */
export type LeaderTransferRaft = Pick<RaftHost, 'status' | 'matchIndex' | 'transferLeader'> &
  Partial<Pick<RaftHost, 'recentlyActive'>>

/**
 * Starts a leadership transfer of data group `groupId` to `toNodeId` (leader balancing) when
 * this node leads the group and the target's log is caught up (within CAUGHT_UP_ENTRIES of
 * the commit index, as this leader knows it) and the target answered lately
 * (`recentlyActive`). A transfer holds the group's proposals until the target takes over, so
 * one to a lagging replica — a node just restarted, still catching up or not yet reachable —
 * or to one this leader cannot reach would stall the group's writes until it caught up or the
 * transfer timed out; the meta leader asks again with the next heartbeat. Returns whether a transfer
 * started (false also when one is under way already).
 */
export function transferWhenCaughtUp(raft: LeaderTransferRaft, groupId: number, toNodeId: string): boolean {
  const status = raft.status(groupId)
  if (status.role !== Role.Leader) return false
  if (!caughtUp(raft.matchIndex(groupId, toNodeId), status.commit)) return false
  // Heard from lately too: a voter this leader cannot reach still matches the commit index of
  // a quiet group (its proposals refused by the transfer, it stays quiet), and the transfer,
  // asked again with every heartbeat while the meta leader hears that node, held the group's
  // writes for good.
  if (raft.recentlyActive?.(groupId, toNodeId) === false) return false
  try {
    raft.transferLeader(groupId, toNodeId)
    return true
  } catch {
    // A transfer is under way already, or leadership moved: the next heartbeat asks again.
    return false
  }
}

/**
 * The voter of group `groupId` to hand its leadership to when this node stops: of the others
 * whose logs are caught up, one that answered lately (`recentlyActive`: a voter that died
 * after its last answer matches as far as a live one in an idle group), then the one whose log
 * matches furthest; undefined when none is caught up (the group then elects once this node is
 * gone). Until 2026-12-02 it was the first other voter in the configuration, dead or far behind
 * as it may be: the transfer held the group's proposals until it timed out (2 s) on every stop.
 */
export function stopTransferTarget(raft: LeaderTransferRaft, groupId: number): string | undefined {
  const status = raft.status(groupId)
  const rank = (id: string) => {
    const match = raft.matchIndex(groupId, id) ?? 0
    return { id, match, active: raft.recentlyActive?.(groupId, id) === true }
  }
  return status.conf.voters
    .filter((id) => id !== status.id)
    .map(rank)
    .filter((c) => caughtUp(c.match, status.commit))
    .sort((a, b) => Number(b.active) - Number(a.active) || b.match - a.match)[0]?.id
}
