/**
 * The most partitions a queue may have: the meta service refuses more (its QUEUE_LIMITS), and
 * clients can refuse it before asking.
 */
export const QUEUE_PARTITIONS_MAX = 256

/**
 * A queue's visibility timeout when its config leaves it 0 (the meta service's default), and
 * what a node or a client leases for when it has no config of the queue at hand.
 */
export const QUEUE_VISIBILITY_TIMEOUT_DEFAULT_MS = 30_000

/**
 * The longest visibility a Lease or an Extend may ask for (a partition's visibilityMsMax): 12 h.
 * Longer is refused (INVALID_ARGUMENT), so clients check it before asking.
 */
export const LEASE_VISIBILITY_MS_MAX = 12 * 3600_000

/** The shortest visibility timeout a queue may have: 100 ms (a lease may ask for less). */
export const VISIBILITY_MS_MIN = 100

/** The longest delay a message or a Nack may ask for (a partition's delayMsMax): 7 days. */
export const MESSAGE_DELAY_MS_MAX = 7 * 24 * 3600_000

/** The most deliveries a queue may allow before it dead-letters a message (`max_deliveries`). */
export const QUEUE_MAX_DELIVERIES_MAX = 1000

/**
 * The longest a queue may remember a dedup key (`dedup_window_ms`), and its longest retry
 * backoffs (`retry_backoff_min_ms`, `retry_backoff_max_ms`): a day.
 */
export const QUEUE_DAY_SETTING_MS_MAX = 24 * 3600_000

/** The largest message-size limit a queue may set (`message_bytes_max`): 4 MiB. */
export const QUEUE_MESSAGE_BYTES_MAX = 4 * 1024 * 1024

/** The largest length limit a queue may set (`queue_length_max`): a billion messages. */
export const QUEUE_LENGTH_MAX = 1_000_000_000

/** The longest a queue may keep a message waiting to be delivered (`message_ttl_ms`): a year. */
export const QUEUE_MESSAGE_TTL_MS_MAX = 365 * 24 * 3600_000
