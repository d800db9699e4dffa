/** The longest queue name accepted, in characters. */
export const QUEUE_NAME_LENGTH_MAX = 200

const QUEUE_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

/**
 * Returns undefined when `name` is a valid queue name, else a sentence saying what is
 * wrong with it. Valid: 1..200 characters of letters, digits, `.`, `_`, `-`, starting
 * with a letter or digit.
 */
export function queueNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'queue name is empty'
  if (name.length > QUEUE_NAME_LENGTH_MAX) {
    return `queue name is ${name.length} characters long; the limit is ${QUEUE_NAME_LENGTH_MAX}`
  }
  if (!QUEUE_NAME_PATTERN.test(name)) {
    return `queue name ${JSON.stringify(name)} may hold only letters, digits, '.', '_' and '-', and must start with a letter or digit`
  }
  return undefined
}
