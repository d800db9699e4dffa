import type { Logger } from './log'
import type { GroupView } from './node-view'

/**
 * Logs each hosted group's leadership changes (info: the group, its term, this replica's
 * role and the leader) and groups appearing or disappearing, from periodic looks at the
 * groups' status. Keeps one entry per hosted group.
 */
export class RaftEventLog {
  readonly #log: Logger
  readonly #last = new Map<number, { term: number; role: string; lead: string }>()

  constructor(log: Logger) {
    this.#log = log
  }

  observe(groups: readonly GroupView[]): void {
    const seen = new Set<number>()
    for (const { groupId, status } of groups) {
      seen.add(groupId)
      const before = this.#last.get(groupId)
      if (before && before.lead === status.lead && before.role === status.role) continue
      this.#last.set(groupId, { term: status.term, role: status.role, lead: status.lead })
      this.#log.info(
        { group: groupId, term: status.term, role: status.role, leader: status.lead },
        status.lead
          ? `group ${groupId}: leader ${status.lead} (term ${status.term}), this replica is ${status.role}`
          : `group ${groupId}: no leader (term ${status.term}), this replica is ${status.role}`,
      )
    }
    for (const groupId of this.#last.keys()) {
      if (!seen.has(groupId)) {
        this.#last.delete(groupId)
        this.#log.info({ group: groupId }, `group ${groupId}: no longer hosted here`)
      }
    }
  }
}
