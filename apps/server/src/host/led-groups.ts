import type { DataGroupPort } from '@mq/data-service'

/** The groups of `ports` whose local replica leads now (the background rounds' work is theirs). */
export function ledGroups(ports: Iterable<DataGroupPort>): DataGroupPort[] {
  return [...ports].filter((port) => {
    try {
      port.assertLeader()
      return true
    } catch {
      return false
    }
  })
}

/** A partition (`queue/index`) of a data group this node leads: what a round takes turns over. */
export interface LedPartition {
  readonly port: DataGroupPort
  readonly id: string
}

/** Where a round's budget ran out: the last partition it served. */
export interface RoundCursor {
  readonly groupId: number
  readonly id: string
}

/**
 * `partitions` in (group, partition) order, starting with the first after `after` and wrapping
 * around to it (all of them, from the first, without `after`). A round whose budget ran out
 * resumes there, so one partition with a big backlog cannot take every round's budget.
 */
export function inTurn<T extends LedPartition>(
  partitions: readonly T[],
  after: RoundCursor | undefined,
): T[] {
  const byPlace = (a: RoundCursor, b: RoundCursor) =>
    a.groupId - b.groupId || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
  const placeOf = (p: LedPartition): RoundCursor => ({ groupId: p.port.groupId, id: p.id })
  const sorted = [...partitions].sort((a, b) => byPlace(placeOf(a), placeOf(b)))
  if (!after) return sorted
  const first = sorted.findIndex((p) => byPlace(placeOf(p), after) > 0)
  return first <= 0 ? sorted : [...sorted.slice(first), ...sorted.slice(0, first)]
}
