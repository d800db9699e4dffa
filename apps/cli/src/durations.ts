/** Milliseconds per duration unit accepted on the command line. */
const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const

/** The longest duration accepted: the largest delay a Node.js timer can wait (~24.8 days). */
export const DURATION_MS_MAX = 2 ** 31 - 1

const TERM = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y

/**
 * Parses a duration such as `500ms`, `30s`, `5m`, `1h`, `7d`, `1.5s` or `1m30s` into whole
 * milliseconds. `0` alone is accepted. Throws a RangeError that says what is wrong and what is
 * expected for anything else: a number without a unit, an unknown unit, a negative value, a
 * fraction of a millisecond, or more than `options.maxMs` (a timer's maximum by default; a
 * token's lifetime is no timer). (An options object, so that a commander argParser's second
 * argument, the previous value, cannot pass for a maximum.)
 */
export function parseDuration(text: string, options: { readonly maxMs?: number } = {}): number {
  const maxMs = options.maxMs ?? DURATION_MS_MAX
  const input = text.trim()
  if (input === '0') return 0
  if (input === '') throw new RangeError(durationHint('an empty duration'))
  if (/^-?\d+(\.\d+)?$/.test(input)) throw new RangeError(durationHint(`"${text}" has no unit`))
  let ms = 0
  let at = 0
  while (at < input.length) {
    TERM.lastIndex = at
    const match = TERM.exec(input)
    if (!match) throw new RangeError(durationHint(`"${text}" is not a duration`))
    ms += Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]
    at = TERM.lastIndex
  }
  if (!Number.isInteger(Math.round(ms * 1e6) / 1e6)) {
    throw new RangeError(`"${text}" is not a whole number of milliseconds`)
  }
  ms = Math.round(ms)
  if (ms > maxMs) throw new RangeError(`"${text}" is longer than the maximum of ${formatDuration(maxMs)}`)
  return ms
}

/**
 * Formats whole milliseconds as the shortest duration that parseDuration reads back to the
 * same value: 30000 → `30s`, 90000 → `1m30s`, 1500 → `1s500ms`, 0 → `0`.
 */
export function formatDuration(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0) throw new RangeError(`cannot format ${ms} as a duration`)
  if (ms === 0) return '0'
  let rest = ms
  let out = ''
  for (const unit of ['h', 'm', 's', 'ms'] as const) {
    const n = Math.floor(rest / UNIT_MS[unit])
    if (n > 0) out += `${n}${unit}`
    rest -= n * UNIT_MS[unit]
  }
  return out
}

function durationHint(what: string): string {
  return `${what}: give a number with a unit, e.g. 500ms, 30s, 5m, 1h, 7d or 1m30s`
}
