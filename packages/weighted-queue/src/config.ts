import { InvalidArgumentError } from './errors'

/** How the scheduler picks among the backlogged weights. */
export const SchedulingMode = {
  /** Weighted fair (stride scheduling): each weight gets w/W of the leases, bounded lag. */
  Fair: 'fair',
  /** Strict priority: always the highest backlogged weight; lower weights can starve. */
  Strict: 'strict',
} as const
export type SchedulingMode = (typeof SchedulingMode)[keyof typeof SchedulingMode]

/**
 * A partition's configuration. It is part of the replicated state: set at first open and
 * changed only by a `configure` command, so every replica applies the same limits.
 */
export interface QueueConfig {
  readonly scheduling: SchedulingMode
  /** Deliveries after which an expired or nacked message goes to the dead-letter sub-queue. */
  readonly maxDeliveries: number
  /** How long a dedup key makes a repeated enqueue a no-op. */
  readonly dedupWindowMs: number
  /** How long a producer's last (id, sequence) is remembered. */
  readonly producerWindowMs: number
  /** Largest message: body + header names and values + key, in bytes. */
  readonly messageBytesMax: number
  /** Most messages in one enqueue. */
  readonly enqueueBatchMax: number
  /** Most messages one lease, redrive or purge takes; most lease ids in one ack/nack/extend. */
  readonly leaseBatchMax: number
  /** Most messages stored (ready + delayed + leased + dead + waiting); enqueue beyond it is rejected. */
  readonly queueMessagesMax: number
  /** Longest visibility timeout a lease or extend may ask for. */
  readonly visibilityMsMax: number
  /** Longest delay a not-before time or a nack may ask for. */
  readonly delayMsMax: number
  /** Most index entries (leases, delayed, dedup) each apply expires; the rest wait for the next. */
  readonly expiryBatchMax: number
  /** Number of recent scheduling decisions over which stats report the achieved share. */
  readonly shareWindowLeases: number
  /**
   * The version of these settings (a cluster passes the route epoch they come from): a
   * `configure` carrying a lower version than the partition's changes nothing, so a leader
   * with an older copy of the settings cannot undo a newer change. 0 = unversioned.
   */
  readonly configVersion: number
  /**
   * How long a message may wait to be delivered, from its enqueue (or from a redrive with
   * `restartTtl`): once older, a ready message is deleted instead of leased (at a lease that
   * reaches it, or by a `tick` that finds it at the head of its weight, or as its ordered key's
   * turn comes to it in a tick with `ttlWaiting`). 0 = messages wait until consumed.
   */
  readonly messageTtlMs: number
  /**
   * 1: messages with the same key are delivered one at a time, in the order they arrived (a
   * key's next message waits until the one before it is acked, dead-lettered or deleted);
   * 0: keys only route. Set when the partition is created: a `configure` cannot change it.
   */
  readonly orderedKeys: number
  /**
   * Retry backoff: a message whose lease expired, or that was nacked without a delay of its
   * own, is delayed by retryBackoffMinMs · 2^(attempts − 1), at most
   * max(retryBackoffMinMs, retryBackoffMaxMs), instead of being ready again at once. 0 = off.
   */
  readonly retryBackoffMinMs: number
  /** The longest retry backoff (see retryBackoffMinMs); below it, the minimum is the longest. */
  readonly retryBackoffMaxMs: number
}

export const QUEUE_CONFIG_DEFAULT: QueueConfig = {
  scheduling: SchedulingMode.Fair,
  maxDeliveries: 5,
  dedupWindowMs: 5 * 60_000,
  producerWindowMs: 60 * 60_000,
  messageBytesMax: 256 * 1024,
  enqueueBatchMax: 1000,
  leaseBatchMax: 1000,
  queueMessagesMax: 10_000_000,
  visibilityMsMax: 12 * 60 * 60_000,
  delayMsMax: 7 * 24 * 60 * 60_000,
  expiryBatchMax: 1000,
  shareWindowLeases: 1000,
  configVersion: 0,
  messageTtlMs: 0,
  orderedKeys: 0,
  retryBackoffMinMs: 0,
  retryBackoffMaxMs: 0,
}

/** The longest retry backoff a config may set: a day. */
export const RETRY_BACKOFF_MS_MAX = 24 * 60 * 60_000

/** Upper bounds on the config itself, so that every derived buffer stays bounded. */
const CONFIG_LIMITS: Record<Exclude<keyof QueueConfig, 'scheduling'>, readonly [number, number]> = {
  maxDeliveries: [1, 1000],
  dedupWindowMs: [0, 30 * 24 * 60 * 60_000],
  producerWindowMs: [0, 30 * 24 * 60 * 60_000],
  messageBytesMax: [1, 16 * 1024 * 1024],
  enqueueBatchMax: [1, 10_000],
  leaseBatchMax: [1, 10_000],
  queueMessagesMax: [1, 2 ** 40],
  visibilityMsMax: [1, 365 * 24 * 60 * 60_000],
  delayMsMax: [0, 365 * 24 * 60 * 60_000],
  expiryBatchMax: [1, 100_000],
  shareWindowLeases: [1, 65_536],
  // Last: a config stored before it existed decodes with version 0 (records.ts).
  configVersion: [0, Number.MAX_SAFE_INTEGER],
  // After it, written only when set, so that a replica of an earlier version reads the bytes.
  messageTtlMs: [0, 365 * 24 * 60 * 60_000],
  // Written only when set, as messageTtlMs (a replica of an earlier version cannot read it).
  orderedKeys: [0, 1],
  // Written only when set, as messageTtlMs.
  retryBackoffMinMs: [0, RETRY_BACKOFF_MS_MAX],
  retryBackoffMaxMs: [0, RETRY_BACKOFF_MS_MAX],
}

/** The fields that a config stored, or a `configure` written, before they existed lacks. */
export const TRAILING_CONFIG_FIELDS: ReadonlySet<string> = new Set([
  'configVersion',
  'messageTtlMs',
  'orderedKeys',
  'retryBackoffMinMs',
  'retryBackoffMaxMs',
])

/**
 * Returns `base` with `patch` applied. Throws InvalidArgumentError naming the first field that
 * is not an integer within its bounds or not a known scheduling mode.
 */
export function resolveConfig(base: QueueConfig, patch: Partial<QueueConfig> = {}): QueueConfig {
  const out: Record<string, unknown> = { ...base }
  for (const [name, value] of Object.entries(patch)) {
    if (value === undefined) continue
    if (name === 'scheduling') {
      if (value !== SchedulingMode.Fair && value !== SchedulingMode.Strict) {
        throw new InvalidArgumentError(`scheduling must be 'fair' or 'strict', got ${String(value)}`)
      }
    } else {
      const bounds = CONFIG_LIMITS[name as keyof typeof CONFIG_LIMITS]
      if (!bounds) throw new InvalidArgumentError(`unknown config field '${name}'`)
      if (typeof value !== 'number' || !Number.isInteger(value) || value < bounds[0] || value > bounds[1]) {
        throw new InvalidArgumentError(
          `config ${name} must be an integer from ${bounds[0]} to ${bounds[1]}, got ${String(value)}`,
        )
      }
    }
    out[name] = value
  }
  return out as unknown as QueueConfig
}

/** The config fields in their fixed encoding order. */
export const CONFIG_NUMBER_FIELDS = Object.keys(CONFIG_LIMITS) as readonly (keyof typeof CONFIG_LIMITS)[]

/**
 * How long a message that failed its `attempts`-th delivery (its lease expired, or a nack
 * without a delay) waits before it is ready again under `config`'s retry backoff: the minimum
 * doubled per attempt after the first, capped at the larger of the two bounds. 0 = no backoff
 * (ready again at once).
 */
export function retryBackoffMs(config: QueueConfig, attempts: number): number {
  const min = config.retryBackoffMinMs
  if (min === 0) return 0
  const cap = Math.max(min, config.retryBackoffMaxMs)
  // 2^31 · min is past any cap (both ≤ a day), and keeps the product exact.
  const doublings = Math.min(Math.max(attempts - 1, 0), 31)
  return Math.min(cap, min * 2 ** doublings)
}
