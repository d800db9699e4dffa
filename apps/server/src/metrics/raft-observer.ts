import { type Message, MessageType, type StateMachine, type Transport } from '@mq/raft-core'
import type { NodeMetrics } from './node-metrics'

/**
 * A Transport that counts what the Raft runtime sends before passing it on unchanged:
 * elections this replica starts (a RequestVote for a term it has not campaigned in yet) and
 * snapshots it starts sending (an InstallSnapshot chunk at offset 0).
 */
export function observedTransport(inner: Transport, metrics: NodeMetrics): Transport {
  // The term of each group's last campaign (one entry per hosted group).
  const campaignTerm = new Map<number, number>()
  return {
    send(groupId: number, messages: readonly Message[]): void {
      for (const m of messages) {
        if (m.type === MessageType.Vote && campaignTerm.get(groupId) !== m.term) {
          campaignTerm.set(groupId, m.term)
          metrics.raftElections.inc({ group: String(groupId) })
        } else if (m.type === MessageType.Snap && m.snapshot?.offset === 0) {
          metrics.raftSnapshotSends.inc({ group: String(groupId) })
        }
      }
      inner.send(groupId, messages)
    },
  }
}

/**
 * A StateMachine that times each `apply` batch into mq_raft_apply_seconds: until the
 * results settle when the machine applies asynchronously (its results are promises).
 */
export function observedStateMachine(
  groupId: number,
  inner: StateMachine,
  metrics: NodeMetrics,
): StateMachine {
  const group = String(groupId)
  return {
    apply(entries) {
      const end = metrics.raftApplySeconds.startTimer({ group })
      const results = inner.apply(entries)
      const pending = results.filter(
        (r): r is PromiseLike<unknown> => typeof (r as PromiseLike<unknown>)?.then === 'function',
      )
      if (pending.length === 0) end()
      else void Promise.allSettled(pending).then(() => end())
      return results
    },
    snapshot: () => inner.snapshot(),
    restore: (snapshot) => inner.restore(snapshot),
    // Every optional member passes through: the host reads their presence (without
    // applyBacklog it never paused a data group's applying, whatever its backlog: the
    // back-pressure on a slow follower's apply chain was off in mq-server until 2026-12-04).
    ...(inner.persisted ? { persisted: () => (inner.persisted as () => Promise<void>)() } : {}),
    ...(inner.applyBacklog ? { applyBacklog: () => (inner.applyBacklog as () => number)() } : {}),
  }
}
