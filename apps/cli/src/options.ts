import { isIP } from 'node:net'
import { MESSAGE_DELAY_MS_MAX, TOKEN_TTL_MS_MAX } from '@mq/router-client'
import { InvalidArgumentError, Option } from 'commander'
import { DURATION_MS_MAX, formatDuration, parseDuration } from './durations'

/** Reads a duration flag (`500ms`, `30s`, `5m`, `1h`); commander reports a bad one as a usage error. */
export function durationArg(value: string): number {
  return durationUpTo(value, DURATION_MS_MAX)
}

/**
 * Reads a duration flag that the CLI hands to the server and never waits for itself (a message
 * TTL): not bounded by a timer's maximum (~24.8 days) but by the server's own (a year),
 * which refuses a longer one saying so.
 */
export function settingDurationArg(value: string): number {
  return durationUpTo(value, Number.MAX_SAFE_INTEGER)
}

/** Reads `produce --delay`: up to the server's bound on a message's delay (7 days). */
export function delayArg(value: string): number {
  return durationUpTo(value, MESSAGE_DELAY_MS_MAX)
}

/**
 * Reads a lifetime flag (a token's: `90d`): no timer, so it may pass a timer's maximum, up to
 * the cluster's bound (TOKEN_TTL_MS_MAX, 10 years), and above 0 (`0` would read as "no
 * lifetime": leave the flag out for that).
 */
export function lifetimeArg(value: string): number {
  const ms = durationUpTo(value, Number.MAX_SAFE_INTEGER)
  if (ms === 0)
    throw new InvalidArgumentError(`a lifetime must be above 0, not ${value} (leave the flag out for none)`)
  if (ms > TOKEN_TTL_MS_MAX)
    throw new InvalidArgumentError(
      `a lifetime is at most ${TOKEN_TTL_MS_MAX / 86_400_000}d (10 years), not ${value}`,
    )
  return ms
}

function durationUpTo(value: string, maxMs: number): number {
  try {
    return parseDuration(value, { maxMs })
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message)
  }
}

/**
 * A reader of duration flags of at least `minMs` (the server checks the upper bound): on
 * CreateQueue 0 means "the default", so `--visibility 0` was taken as 30 s without a word.
 */
export function durationAtLeast(minMs: number): (value: string) => number {
  return (value) => {
    const ms = durationArg(value)
    if (ms < minMs)
      throw new InvalidArgumentError(`${value} is too short: give at least ${formatDuration(minMs)}`)
    return ms
  }
}

/**
 * A reader of a queue setting's duration flag within the meta service's bounds (its
 * QUEUE_LIMITS): past them the server refused it naming the wire field in milliseconds
 * (`messageTtlMs must be an integer from 0 to 31536000000, got 31622400000`), not the flag.
 */
export function durationWithin(minMs: number, maxMs: number): (value: string) => number {
  return (value) => {
    const ms = durationUpTo(value, maxMs)
    if (ms < minMs)
      throw new InvalidArgumentError(`${value} is too short: give at least ${formatDuration(minMs)}`)
    return ms
  }
}

/** A duration flag with a default, shown in the help as a duration ("5s", not 5000). */
export function durationOption(flags: string, description: string, defaultMs: number): Option {
  return new Option(flags, description).argParser(durationArg).default(defaultMs, formatDuration(defaultMs))
}

/** A reader of integer flags within [min, max]. */
export function integerArg(min: number, max: number = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value) => {
    const n = /^-?\d+$/.test(value.trim()) ? Number(value) : Number.NaN
    if (!Number.isSafeInteger(n)) throw new InvalidArgumentError(`"${value}" is not an integer`)
    if (n < min || n > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `from ${min} to ${max}`
      throw new InvalidArgumentError(`${n} is out of range: give an integer ${range}`)
    }
    return n
  }
}

/** Collects repeated `--header k=v` flags into one record; the value may contain `=`; a key given twice is refused. */
export function headerArg(
  value: string,
  previous: Record<string, string> | undefined,
): Record<string, string> {
  const at = value.indexOf('=')
  if (at <= 0) throw new InvalidArgumentError(`"${value}" is not a header: write it as key=value`)
  const key = value.slice(0, at)
  // A message has one value per header: the first was dropped without a word (an operator audit).
  if (previous !== undefined && Object.hasOwn(previous, key))
    throw new InvalidArgumentError(`header "${key}" is given twice: a message has one value per header`)
  return { ...previous, [key]: value.slice(at + 1) }
}

/**
 * Splits a comma-separated list of `host:port` seed addresses. Throws a RangeError naming the
 * first malformed entry.
 */
export function parseServers(text: string): string[] {
  const servers = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  if (servers.length === 0) throw new RangeError('no server given: write --servers HOST:PORT[,HOST:PORT...]')
  for (const s of servers) {
    // A host is a name or an IPv4 address, or an IPv6 one in brackets: a URL's scheme
    // (`http://h:7001`) or a space in it passed as a host, and mq waited out its whole deadline
    // for a name that cannot resolve, then exited 3, "did not answer", instead of 1 at once.
    const match = /^(\[[^\s[\]]+\]|[^\s:/[\]]+):(\d{1,5})$/.exec(s)
    const port = match ? Number(match[2]) : 0
    // Brackets hold an IPv6 address only: grpc-js cannot parse `[foo]` or `[1.2.3.4]` ("Failed to
    // parse DNS address"), and mq waited out its deadline, exit 3, until 2026-12-07.
    const bracketed = match?.[1]?.startsWith('[') ? match[1].slice(1, -1) : undefined
    if (!match || port < 1 || port > 65_535 || (bracketed !== undefined && isIP(bracketed) !== 6)) {
      throw new RangeError(`"${s}" is not a server address: write HOST:PORT, e.g. 127.0.0.1:7001`)
    }
  }
  return servers
}

/** `--servers` and MQ_SERVERS: parsed by commander so that a bad list is a usage error. */
export function serversArg(value: string): string[] {
  try {
    return parseServers(value)
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message)
  }
}
