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
