/**
 * The longest delay a Node timer takes: `setTimeout` fires after about 1 ms for a longer one
 * (or Infinity), with a warning, so a timeout option beyond it would end almost at once.
 */
export const TIMER_MS_MAX = 2 ** 31 - 1

/**
 * `options` without its undefined values, to spread over defaults: `{ idempotent: undefined }`
 * then takes the default, as `{}` does (spread as it is, it would set the option to undefined).
 */
export function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<T>
}

/**
 * Throws a RangeError naming the option (`name`) and its value unless `value` is an integer
 * from `min` to `max`, or Infinity when `infinite` (the options where it means "for ever").
 */
export function checkInteger(name: string, value: unknown, min: number, max: number, infinite = false): void {
  if (infinite && value === Number.POSITIVE_INFINITY) return
  if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return
  const range = max === Number.MAX_SAFE_INTEGER ? `of at least ${min}` : `from ${min} to ${max}`
  throw new RangeError(
    `${name} must be an integer ${range}${infinite ? ' or Infinity' : ''}, got ${String(value)}`,
  )
}

/** Throws a RangeError naming the option unless `value` is a number from `min` to `max`. */
export function checkNumber(name: string, value: unknown, min: number, max: number): void {
  if (typeof value === 'number' && value >= min && value <= max) return
  throw new RangeError(`${name} must be a number from ${min} to ${max}, got ${String(value)}`)
}

/** Throws a RangeError naming the option unless `value` is a boolean. */
export function checkBoolean(name: string, value: unknown): void {
  if (typeof value !== 'boolean') throw new RangeError(`${name} must be true or false, got ${String(value)}`)
}
