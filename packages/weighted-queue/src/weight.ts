import { InvalidArgumentError } from './errors'

/** The smallest and largest message weight; each distinct weight is its own sub-queue. */
export const WEIGHT_MIN = 1
export const WEIGHT_MAX = 1000
/** The weight of a message that does not name one. */
export const WEIGHT_DEFAULT = 1

/**
 * Returns the message weight for `value`: the default when undefined, else `value` itself.
 * Throws InvalidArgumentError unless it is an integer in [WEIGHT_MIN, WEIGHT_MAX].
 */
export function parseWeight(value: number | undefined): number {
  if (value === undefined) return WEIGHT_DEFAULT
  if (!Number.isInteger(value) || value < WEIGHT_MIN || value > WEIGHT_MAX) {
    throw new InvalidArgumentError(
      `weight must be an integer from ${WEIGHT_MIN} to ${WEIGHT_MAX}, got ${String(value)}`,
    )
  }
  return value
}
