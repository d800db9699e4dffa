import type { ConfState } from '@mq/raft-core'

/** A founding membership: every replica a voter. */
export function votersConf(voters: readonly string[]): ConfState {
  return { voters: [...voters], learners: [], votersOutgoing: [], learnersNext: [] }
}
