import { InvalidArgumentError, UnavailableError } from '@mq/protocol'
import type { MetaState } from './meta-state'

/**
 * Throws unless the cluster runs format level `needed` or above (`what` says what needs it):
 * InvalidArgumentError below it (every node must run a version of that level first: a replica
 * of an earlier version would drop or misread the command), UnavailableError, retriable, while
 * the level is not known yet (a new cluster's founders before their first heartbeat).
 */
export function requireFormatLevel(state: MetaState, what: string, needed: number): void {
  const level = state.formatLevel()
  if (level >= needed) return
  const unknown = state.formatLevelUnknown()
  if (unknown !== undefined) {
    throw new UnavailableError(
      `the cluster's format level is not known yet (${unknown}): ${what} from level ${needed}; retry in a moment`,
    )
  }
  throw new InvalidArgumentError(
    `the cluster runs format level ${level}: ${what} from level ${needed}, once every node runs a version of it`,
  )
}
