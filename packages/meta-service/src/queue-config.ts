import {
  LEASE_VISIBILITY_MS_MAX,
  QUEUE_DAY_SETTING_MS_MAX,
  QUEUE_LENGTH_MAX,
  QUEUE_MAX_DELIVERIES_MAX,
  QUEUE_MESSAGE_BYTES_MAX,
  QUEUE_MESSAGE_TTL_MS_MAX,
  QUEUE_PARTITIONS_MAX,
  QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS,
  type QueueConfig,
  type QueueConfigUpdate,
  VISIBILITY_MS_MIN,
} from '@mq/protocol'

/** The storage engines a queue can live in (claim 5: the storage address names one). */
export const STORAGE_ENGINES = ['leveldb'] as const
export type StorageEngine = (typeof STORAGE_ENGINES)[number]

/**
 * A queue's settings once resolved: every field set (the wire's QueueConfig leaves
 * `dedupWindowMs` unset in a CreateQueue that wants the default).
 */
export type QueueSettings = Required<QueueConfig>

/** Bounds on every queue setting: [min, max] inclusive. */
export const QUEUE_LIMITS = {
  partitions: [1, QUEUE_PARTITIONS_MAX],
  visibilityTimeoutMs: [VISIBILITY_MS_MIN, LEASE_VISIBILITY_MS_MAX],
  maxDeliveries: [1, QUEUE_MAX_DELIVERIES_MAX],
  messageBytesMax: [1, QUEUE_MESSAGE_BYTES_MAX],
  queueLengthMax: [1, QUEUE_LENGTH_MAX],
  dedupWindowMs: [0, QUEUE_DAY_SETTING_MS_MAX],
  messageTtlMs: [0, QUEUE_MESSAGE_TTL_MS_MAX],
  deliveryRate: [0, 1_000_000],
  retryBackoffMinMs: [0, QUEUE_DAY_SETTING_MS_MAX],
  retryBackoffMaxMs: [0, QUEUE_DAY_SETTING_MS_MAX],
} as const satisfies Record<string, readonly [number, number]>

/** What a setting is when a create request leaves it 0 or empty. */
export const QUEUE_DEFAULTS: Readonly<QueueSettings> = {
  partitions: 4,
  visibilityTimeoutMs: QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS,
  maxDeliveries: 5,
  deadLetterQueue: '',
  messageBytesMax: 256 * 1024,
  queueLengthMax: 10_000_000,
  strictPriority: false,
  dedupWindowMs: 5 * 60_000,
  engine: 'leveldb',
  messageTtlMs: 0,
  paused: false,
  orderedKeys: false,
  deliveryRate: 0,
  retryBackoffMinMs: 0,
  retryBackoffMaxMs: 0,
}

/** The longest retry backoff of a queue that sets only the shortest (Pub/Sub's default). */
export const RETRY_BACKOFF_MAX_DEFAULT_MS = 10 * 60_000

/**
 * Returns the full config of a new queue: `requested` with every 0 / empty field set to its
 * default. Returns a sentence saying what is wrong instead when a value is out of bounds
 * or the engine is unknown.
 */
export function resolveQueueConfig(requested: Partial<QueueConfig>): QueueSettings | string {
  const config: QueueSettings = {
    partitions: requested.partitions || QUEUE_DEFAULTS.partitions,
    visibilityTimeoutMs: requested.visibilityTimeoutMs || QUEUE_DEFAULTS.visibilityTimeoutMs,
    maxDeliveries: requested.maxDeliveries || QUEUE_DEFAULTS.maxDeliveries,
    deadLetterQueue: requested.deadLetterQueue ?? QUEUE_DEFAULTS.deadLetterQueue,
    messageBytesMax: requested.messageBytesMax || QUEUE_DEFAULTS.messageBytesMax,
    queueLengthMax: requested.queueLengthMax || QUEUE_DEFAULTS.queueLengthMax,
    strictPriority: requested.strictPriority ?? QUEUE_DEFAULTS.strictPriority,
    dedupWindowMs: requested.dedupWindowMs ?? QUEUE_DEFAULTS.dedupWindowMs,
    engine: requested.engine || QUEUE_DEFAULTS.engine,
    messageTtlMs: requested.messageTtlMs ?? QUEUE_DEFAULTS.messageTtlMs,
    paused: requested.paused ?? QUEUE_DEFAULTS.paused,
    orderedKeys: requested.orderedKeys ?? QUEUE_DEFAULTS.orderedKeys,
    deliveryRate: requested.deliveryRate ?? QUEUE_DEFAULTS.deliveryRate,
    retryBackoffMinMs: requested.retryBackoffMinMs ?? QUEUE_DEFAULTS.retryBackoffMinMs,
    retryBackoffMaxMs: requested.retryBackoffMaxMs ?? QUEUE_DEFAULTS.retryBackoffMaxMs,
  }
  return checked(withBackoffMax(config))
}

/**
 * Returns `config` with `update`'s set fields applied, or a sentence saying what is wrong.
 * The engine and ordered keys cannot change (an update has no field for them); the partition
 * count can only grow (the meta state places the new partitions: MetaState's `updateQueue`),
 * and not at all for a queue with ordered keys.
 */
export function applyQueueConfigUpdate(
  config: QueueSettings,
  update: QueueConfigUpdate,
): QueueSettings | string {
  if (config.orderedKeys && update.partitions !== undefined && update.partitions !== config.partitions) {
    return `the queue orders its keys, so its partition count stays ${config.partitions}: with more partitions a key's next messages would go to another partition than its earlier ones, out of order (create a new queue with more partitions and move the producers to it)`
  }
  if (update.partitions !== undefined && update.partitions < config.partitions) {
    return `partitions can only be added: the queue has ${config.partitions}, asked for ${update.partitions} (to have fewer, create a new queue and move the consumers to it)`
  }
  const next: QueueSettings = {
    ...config,
    ...(update.partitions !== undefined ? { partitions: update.partitions } : {}),
    ...(update.visibilityTimeoutMs !== undefined ? { visibilityTimeoutMs: update.visibilityTimeoutMs } : {}),
    ...(update.maxDeliveries !== undefined ? { maxDeliveries: update.maxDeliveries } : {}),
    ...(update.deadLetterQueue !== undefined ? { deadLetterQueue: update.deadLetterQueue } : {}),
    ...(update.messageBytesMax !== undefined ? { messageBytesMax: update.messageBytesMax } : {}),
    ...(update.queueLengthMax !== undefined ? { queueLengthMax: update.queueLengthMax } : {}),
    ...(update.strictPriority !== undefined ? { strictPriority: update.strictPriority } : {}),
    ...(update.dedupWindowMs !== undefined ? { dedupWindowMs: update.dedupWindowMs } : {}),
    ...(update.messageTtlMs !== undefined ? { messageTtlMs: update.messageTtlMs } : {}),
    ...(update.paused !== undefined ? { paused: update.paused } : {}),
    ...(update.deliveryRate !== undefined ? { deliveryRate: update.deliveryRate } : {}),
    ...(update.retryBackoffMinMs !== undefined ? { retryBackoffMinMs: update.retryBackoffMinMs } : {}),
    ...(update.retryBackoffMaxMs !== undefined ? { retryBackoffMaxMs: update.retryBackoffMaxMs } : {}),
  }
  // A new minimum above the maximum, with no maximum given, raises the maximum as a minimum
  // alone would on create (a maximum filled in earlier must not refuse it).
  const raised =
    update.retryBackoffMinMs !== undefined &&
    update.retryBackoffMaxMs === undefined &&
    next.retryBackoffMaxMs < next.retryBackoffMinMs
      ? { ...next, retryBackoffMaxMs: 0 }
      : next
  return checked(withBackoffMax(raised))
}

/** Whether two queues' settings are the same, every one (they are all plain values). */
export function sameSettings(a: QueueSettings, b: QueueSettings): boolean {
  return (Object.keys(a) as (keyof QueueSettings)[]).every((k) => a[k] === b[k])
}

/** `config`, or the sentence saying what is wrong with it. */
function checked(config: QueueSettings): QueueSettings | string {
  return configProblem(config) ?? config
}

/**
 * A retry backoff with a minimum and no maximum gets the default maximum, or the minimum if
 * that is longer.
 */
function withBackoffMax(config: QueueSettings): QueueSettings {
  return config.retryBackoffMinMs > 0 && config.retryBackoffMaxMs === 0
    ? { ...config, retryBackoffMaxMs: Math.max(RETRY_BACKOFF_MAX_DEFAULT_MS, config.retryBackoffMinMs) }
    : config
}

function configProblem(config: QueueSettings): string | undefined {
  for (const [field, [min, max]] of Object.entries(QUEUE_LIMITS)) {
    const value = config[field as keyof typeof QUEUE_LIMITS]
    if (!Number.isInteger(value) || value < min || value > max) {
      return `${field} must be an integer from ${min} to ${max}, got ${value}`
    }
  }
  if (typeof config.paused !== 'boolean') return `paused must be true or false, got ${String(config.paused)}`
  if (typeof config.strictPriority !== 'boolean') {
    return `strictPriority must be true or false, got ${String(config.strictPriority)}`
  }
  if (typeof config.deadLetterQueue !== 'string') {
    return `deadLetterQueue must be a queue name or empty, got ${String(config.deadLetterQueue)}`
  }
  if (typeof config.orderedKeys !== 'boolean') {
    return `orderedKeys must be true or false, got ${String(config.orderedKeys)}`
  }
  if (config.retryBackoffMinMs > config.retryBackoffMaxMs) {
    return `retryBackoffMaxMs (${config.retryBackoffMaxMs}) is below retryBackoffMinMs (${config.retryBackoffMinMs}); set the longest backoff at least as long as the shortest`
  }
  if (!(STORAGE_ENGINES as readonly string[]).includes(config.engine)) {
    return `engine ${JSON.stringify(config.engine)} is unknown; known engines: ${STORAGE_ENGINES.join(', ')}`
  }
  return undefined
}
